"""The ``policybox`` command line, one module per concern: the commands (``app``), the options
``run`` and ``evaluate`` share (``options``) and what the terminal shows (``tables``)."""

from policybox.cli.app import app, main

__all__ = ["app", "main"]
