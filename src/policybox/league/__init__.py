"""The leaderboard: everything that plays many episodes and ranks policies, on top of the engine.

``evaluate`` (a batch tournament into a results folder) and the ladder (continuous, in a database)
live here, with what they share: the tournament and its seating (``tournament``), the workers that
play episodes (``worker``, ``worker_pool``, ``ray_backend``, ``packing``), the results journal
(``journal``), the ranking rules (``ranking``), the summary (``summary``), submissions kept as
versions (``versions``) and their setup scripts, run in a cell (``setup``, ``setup_runner``,
``harvest``). The engine below --
``policybox.episode``, ``host``, ``cell``, ``envs`` -- never imports this package.
"""
