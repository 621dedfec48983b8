"""PolicyboxError, the base of every error policybox raises on purpose, SpecError and NotFound, and how
an error names the install of what is missing (kept import-light: cells import it)."""


class PolicyboxError(Exception):
    """Bad input the user can fix, or a machine that cannot give what was asked for; the message
    says what to fix. A policy's own failure is never one: it is recorded on its agent."""


class SpecError(PolicyboxError, ValueError):
    """A policy spec the user wrote is wrong; the message says what to fix."""


class NotFound(PolicyboxError, LookupError):
    """What was asked for -- a ladder's name, version, team, match or replay -- is not there; the message
    says what. The web page answers 404; the command line, as for every user error, exit code 2."""


def install_command(extra: str) -> str:
    """The command that installs policybox's optional ``extra``, as an error names it: from PyPI, and
    from a clone of policybox's repository (where ``policybox[...]`` is not what is installed)."""
    return f"pip install 'policybox[{extra}]' (from a clone of policybox, in it: pip install -e '.[{extra}]')"
