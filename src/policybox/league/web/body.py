"""A request's body, capped: the only way the app reads one."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import Message

from policybox.league.web import MiB


def capped(request: Request, cap: int) -> Request:
    """``request`` whose body is refused with 413 past ``cap`` bytes: before a byte is read when its
    Content-Length says so, else as soon as the bytes streamed in pass it (a chunked upload says no
    length, and a length is the sender's word)."""
    too_large = HTTPException(413, f"the request is larger than this ladder takes ({size(cap)})")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise too_large
    seen = 0

    async def receive() -> Message:
        nonlocal seen
        message = await request.receive()
        seen += len(message.get("body", b""))
        if seen > cap:
            raise too_large
        return message

    return Request(request.scope, receive)


def size(count: int) -> str:
    """A byte count as a person reads it: ``256 MiB``, else ``1000 bytes``."""
    return f"{count // MiB} MiB" if count >= MiB and count % MiB == 0 else f"{count:,} bytes"
