"""How ``ladder serve`` holds up against clients that open connections and send nothing: uvicorn
with a bound on connections and on how long one may take to send a request.

uvicorn's own settings leave two holes here (read in uvicorn 0.54's ``h11_impl``): a connection that
never sends a whole request is kept for ever (its keep-alive timer starts only after a response), and
``limit_concurrency`` answers 503 to a request but still accepts and keeps every connection. A
thousand silent connections so take every descriptor; asyncio's accept then fails with EMFILE, and
no visitor gets in until the attacker lets go. ``Guarded`` closes both holes in uvicorn's own
protocol: a connection beyond ``connections`` is closed the moment it is accepted (its descriptor
given back at once), and one that has not sent a whole request ``request_timeout`` seconds after it
opened (or after its last response) is closed. The cap is kept below the process's descriptor limit
(raised to its hard limit first), so accept never runs out. What a proxy does better -- connections
per client address, a slow body -- is the proxy's (docs/web.md: nginx).

``listen`` binds the server's socket before anything is announced, so that a port in use is one
message (and no URL printed that nothing answers); uvicorn serves on that socket.
"""

from __future__ import annotations

import asyncio
import errno
import resource
import socket
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from policybox.league.ladder.database import LadderError

RESERVED_DESCRIPTORS = 128  # the database, an upload's files, uvicorn's own, the thread pool's
HEADERS_CAP = 16 * 1024  # a request's line and headers: more is answered 400 (h11's default, said here)


def descriptor_room(backlog: int) -> int:
    """Raise this process's soft limit on open files to its hard limit; how many connections fit
    under it beside what the server itself keeps open. asyncio accepts up to ``backlog`` connections
    in one go, and a refused one gives its descriptor back a few turns of the loop later: room for
    four such bursts is kept too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return max(1, hard - RESERVED_DESCRIPTORS - 4 * backlog)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` as uvicorn binds one (``Config.bind_socket``, which on
    failure only logs and exits), or a ``LadderError`` naming the port. uvicorn listens on it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise LadderError(
                f"port {port} on {host} is in use (by another ladder serve, or another program): stop it, or "
                "choose another port with --port"
            ) from None
        raise LadderError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    return sock


def guarded(connections: int, request_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, keeping at most ``connections`` open and closing one that sends no
    whole request within ``request_timeout`` seconds."""

    class Guarded(H11Protocol):
        # asyncio's Protocol declares a BaseTransport; uvicorn's H11Protocol takes the asyncio.Transport
        # asyncio gives it, with the same ignore: this override keeps uvicorn's signature.
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > connections:
                transport.close()  # refused: closed at once, before it costs anything but this
                return
            self._expect_request(None)

        def on_response_complete(self) -> None:
            answered = self.cycle
            super().on_response_complete()
            self._expect_request(answered)

        def _expect_request(self, last: Any) -> None:
            """Close the connection unless a request after ``last`` has begun by the deadline."""
            self.loop.call_later(request_timeout, self._close_if_still, last)

        def _close_if_still(self, last: Any) -> None:
            if self.cycle is last and not self.transport.is_closing():
                self.transport.close()

    return Guarded
