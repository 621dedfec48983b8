"""PolicyboxError, the base of every error policybox raises on purpose, and SpecError (kept import-light:
cells import it)."""


class PolicyboxError(Exception):
    """Bad input the user can fix, or a machine that cannot give what was asked for; the message
    says what to fix. A policy's own failure is never one: it is recorded on its agent."""


class SpecError(PolicyboxError, ValueError):
    """A policy spec the user wrote is wrong; the message says what to fix."""
