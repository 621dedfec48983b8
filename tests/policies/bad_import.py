"""Fails at import: it needs a module nobody installed."""

import policybox_test_no_such_module  # noqa: F401
