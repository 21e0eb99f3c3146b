"""A chat reply streamed by an OpenAI-compatible server (``"stream": true``).

The server sends server-sent events: ``data: {json}`` lines, each a chunk whose
``choices[0].delta.content`` is the next piece of the reply, the last chunk perhaps
with ``usage``, then ``data: [DONE]``. :func:`read_events` reads them off the wire
as they arrive (never past a byte limit); :class:`StreamedReply` joins the pieces,
hands each on, and gives back a reply shaped like a non-streamed one, so the rest
of the backend reads both the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lcr.models.base import OnText
from lcr.models.text_stream import TextPieces

_READ_PIECE = 64 * 1024


class StreamFailure(Exception):
    """The event stream broke its format, reported an error or ran too long: not worth
    another try (the reply may have been partly shown)."""


def is_event_stream(resp: Any) -> bool:
    headers = getattr(resp, "headers", None)
    kind = headers.get("Content-Type", "") if headers is not None else ""
    return str(kind).split(";")[0].strip().lower() == "text/event-stream"


def read_events(
    resp: Any, limit: int, where: str, on_event: Callable[[dict[str, Any]], None]
) -> None:
    """Every event of ``resp`` to ``on_event`` as it arrives, up to ``data: [DONE]``.

    Reads what has arrived (``read1``), not whole buffers, so each piece is handed on
    when the server sends it. More than ``limit`` bytes, an event that is not a JSON
    object, an ``error`` event or an end before ``[DONE]`` is a :class:`StreamFailure`.
    """
    read = getattr(resp, "read1", None) or resp.read
    size = 0
    pending = b""
    data: list[str] = []
    while piece := read(_READ_PIECE):
        size += len(piece)
        if size > limit:
            raise StreamFailure(f"{where} sent more than {limit:,} bytes: not a chat reply")
        *lines, pending = (pending + piece).split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:  # a blank line ends an event
                if _dispatch("\n".join(data), where, on_event):
                    return
                data = []
            # comments (":") and event:, id:, retry: fields say nothing lcr reads
    if data and _dispatch("\n".join(data), where, on_event):
        return
    raise StreamFailure(f"the reply stream from {where} ended before the reply did")


def _dispatch(data: str, where: str, on_event: Callable[[dict[str, Any]], None]) -> bool:
    """Hand on one event's data; True at ``[DONE]``."""
    if data.strip() == "[DONE]":
        return True
    try:
        event = json.loads(data)
    except ValueError:
        raise StreamFailure(f"{where} streamed an event that is not JSON") from None
    if not isinstance(event, dict):
        raise StreamFailure(f"{where} streamed unexpected JSON")
    if "error" in event:
        error = event["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise StreamFailure(
            f"{where} reported an error mid-reply: {' '.join(str(message).split())[:200]}"
        )
    on_event(event)
    return False


class StreamedReply:
    """The pieces of one streamed reply: each handed to ``on_text`` as it comes, all of
    them joined into the reply :meth:`reply` gives (``choices[0].message.content`` and
    the ``usage`` the server sent, if any)."""

    def __init__(self, on_text: OnText) -> None:
        self._pieces = TextPieces(on_text)
        self.text = ""
        self.events = 0
        self._usage: dict[str, Any] | None = None
        self._written = 0  # events with text

    @property
    def shown(self) -> bool:
        """Whether any text was handed on (a retry would show it twice)."""
        return bool(self._pieces.sent)

    def event(self, event: dict[str, Any]) -> None:
        self.events += 1
        if isinstance(event.get("usage"), dict):
            self._usage = event["usage"]
        choices = event.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        delta = first.get("delta") if isinstance(first, dict) else None
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            self._written += 1
            self.text += content
            self._pieces.update(self.text)

    def reply(self) -> dict[str, Any]:
        """The reply joined; without the server's ``usage``, its pieces as the count of
        tokens written (servers send a token per event), the prompt left to estimate."""
        out: dict[str, Any] = {"choices": [{"message": {"content": self.text}}]}
        out["usage"] = (
            self._usage if self._usage is not None else {"completion_tokens": self._written}
        )
        return out

    def finish(self, text: str) -> None:
        """The reply as returned: whatever of it was not handed on yet goes now."""
        self._pieces.finish(text)
