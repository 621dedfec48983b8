"""The continuous ladder: its folder and settings, the run loop, the database and the modules that
write it -- one a noun: ``version_store``, ``match_store``, ``team_store``, ``scrimmage_store``,
``final_store`` (the views' reads are ``reads``) -- matchmaking, a version's life, retention, and
the checks on what is submitted."""
