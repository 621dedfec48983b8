"""The leaderboard: everything that plays many episodes and ranks policies, on top of the engine.

It is built in wings, each a package that says one thing; a wing imports only those below it
(``tests/test_architecture.py`` checks it):

- ``choices`` and ``ranking``: what a tournament and a ladder may choose (seating, ranking rule, backend), and
  the rules every leaderboard ranks by (forfeits, placings, ratings, shared ranks);
- ``play``: the tournament and its seating, and the workers that play episodes (local or on Ray);
- ``ladder``: the continuous ladder -- its folder, run loop, database and the modules that write it
  (one a noun), matchmaking, and a version's life;
- ``views``: what a leaderboard shows, as data (the board, a results folder's summary, plots);
- ``evaluate``: a tournament played into a results folder that survives crashes;
- ``report`` and ``web``: the static page and the web site, faces on the views.

The engine below -- ``policybox.episode``, ``settings``, ``files``, ``host``, ``cell``, ``envs`` --
never imports this package.
"""
