"""How the HTTP transport is to serve: its own module, so the transport and the server
that starts it both read it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HttpOptions:
    host: str
    port: int
    token: str | None
    max_request_bytes: int
    read_timeout_s: float
