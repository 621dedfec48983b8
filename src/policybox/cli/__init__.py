"""The ``policybox`` command line, one module per concern: the commands (``app``; ``policybox ladder``'s in
``ladder_commands``, ``ladder_play`` and ``ladder_web``), the options they share (``options``), what a
command does once it runs (``run_command``, ``evaluate_command``, ``doctor_command``, ``common``) and what
the terminal shows (``tables``, ``verdict``)."""

from policybox.cli.app import app, main

__all__ = ["app", "main"]
