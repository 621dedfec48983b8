"""Playing a leaderboard's episodes: the tournament and its seating, the runner a driver sees, and the
backends that play (local worker processes, or Ray tasks)."""
