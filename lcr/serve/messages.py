"""What lcr serve refuses of a JSON-RPC message before the SDK reads it, over stdio and
HTTP alike: the SDK takes a request whose ``id`` is an object, a float, a list or a
boolean as a notification (and so never answers it), and refuses a batch as invalid
params. Each is an invalid request (-32600) answered with ``id`` null, as JSON-RPC 2.0
says."""

from __future__ import annotations

from typing import Any

INVALID_REQUEST = -32600
PARSE_ERROR = -32700


def refused(message: Any) -> str | None:
    """Why ``message`` (a JSON value) is not a JSON-RPC message lcr serves, in one line,
    or None where it may be one (the SDK checks the rest)."""
    if isinstance(message, list):
        return "invalid request: a batch (MCP takes one JSON-RPC message at a time)"
    if not isinstance(message, dict):
        return "invalid request: the line is not a JSON-RPC message"
    if "id" in message:
        given = message["id"]
        if isinstance(given, bool) or not isinstance(given, int | str):
            kind = "null" if given is None else type(given).__name__
            return f"invalid request: the id is {kind}; it must be a string or an integer"
    return None
