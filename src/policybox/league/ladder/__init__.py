"""The continuous ladder: its folder and settings, the run loop, the database and the store that
writes it, matchmaking, a version's life, retention, and the checks on what is submitted."""
