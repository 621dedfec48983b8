"""How a cell reports a policy's exception to the host (kept free of heavy imports: the bootstrap
uses it before the sandbox is up)."""

from __future__ import annotations

import traceback
from typing import Any

TRACEBACK_LIMIT = 8000


class PolicyFailure(Exception):
    """Policy code raised; carries the report the host records for that agent."""

    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__(report["message"])
        self.report = report


def failure_report(exc: BaseException, phase: str) -> dict[str, Any]:
    tb = "".join(traceback.format_exception(exc))
    return {
        "phase": phase,
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "traceback": tb[-TRACEBACK_LIMIT:],
    }
