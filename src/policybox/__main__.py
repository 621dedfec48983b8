"""``python -m policybox`` is the ``policybox`` command (``main`` is its entry point).

Ctrl-C or SIGTERM while the command is still importing (a second or so), or after it has stopped
everything it started, ends it at once (exit 130 or 143). While a command runs, its own handling
takes over (``policybox.cli``: stop every process it started, say what was kept).
"""

import os
import signal


def _exit_now(signum: int, frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(128 + signum)


def main() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _exit_now)
    from policybox.cli import main as command

    command()


if __name__ == "__main__":
    main()
