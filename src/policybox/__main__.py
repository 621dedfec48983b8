"""``python -m policybox`` is the ``policybox`` command."""

from policybox.cli import main

main()
