"""The headers every response carries: a Content-Security-Policy that runs only this site's own
scripts and styles (no inline script or style anywhere; inline SVG is markup, not script), no MIME
sniffing, no referrer; and no caching of pages, whose data is live and may be a team's own."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
EVERY_RESPONSE = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
NOT_STORED = (b"cache-control", b"no-store")
STATIC = "/static/"


class SecurityHeaders:
    """ASGI middleware adding the headers to every HTTP response (pages, JSON, files and errors)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = EVERY_RESPONSE if scope["path"].startswith(STATIC) else [*EVERY_RESPONSE, NOT_STORED]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, sending)
