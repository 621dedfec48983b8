"""How ``ladder serve`` serves: where it listens, the largest upload, and how many connections it keeps
and for how long (``policybox.league.web.serving`` holds them to it). The command's options are these
fields. Light (pydantic alone), so that ``--help`` reads them without loading the web server.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from policybox.league.web import UPLOAD_CAP, MiB


class ServeSettings(BaseModel):
    """The web server's settings: ``ladder serve``'s options."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(default="127.0.0.1", description="The address to listen on; put a TLS proxy in front for others")
    port: int = Field(default=8000, ge=1, le=65535, description="The port to listen on")
    max_upload_mb: int = Field(
        default=UPLOAD_CAP // MiB, ge=1, description="The largest upload a team may send (a zip and its form), in MiB"
    )
    max_connections: int = Field(
        default=1000,
        ge=1,
        description="Connections kept open at once; one more is closed as it comes (at most the descriptor limit)",
    )
    request_timeout: float = Field(
        default=10.0,
        ge=0.1,
        description="How long a connection may take to send a whole request's headers before it is closed",
    )
    keep_alive: int = Field(
        default=5, ge=1, description="How long an idle connection is kept after a response (uvicorn's)"
    )
    backlog: int = Field(
        default=64, ge=1, description="Connections the kernel queues before they are accepted (uvicorn's)"
    )
