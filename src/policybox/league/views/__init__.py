"""What a leaderboard shows, as data: the board's views, a results folder's summary, the plots,
replays, a team's own code, and the rules page. The web page and the report are faces on these."""
