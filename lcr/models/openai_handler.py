"""A transport that answers in-process: httpx's ``MockTransport`` pattern for lcr's
OpenAI-compatible backend.

A handler (a function from :class:`HttpRequest` to :class:`HttpResponse`) plays
the server; its replies go through the same reading as a real server's
(:func:`~lcr.models.openai_llm.status_error`, :func:`~lcr.models.openai_llm.reply_json`),
so the backend's error paths (retries, ``Retry-After``, bodies that are not JSON,
a refused connection) are tested without a network, beside the real-server tests.
A reply whose ``Content-Type`` is ``text/event-stream`` is read as a server's stream
is (:func:`~lcr.models.openai_stream.read_events`), event by event, when the caller
streams: the transport takes every parameter of the protocol it stands in for.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lcr.models.openai_llm import MAX_RESPONSE_BYTES, ServerError, reply_json, status_error
from lcr.models.openai_stream import StreamFailure, read_events


@dataclass(frozen=True)
class HttpRequest:
    """A request as :class:`HandlerTransport` hands it to its handler."""

    method: str
    path: str
    payload: dict[str, Any] | None
    timeout: float


@dataclass(frozen=True)
class HttpResponse:
    """A handler's reply: status, body and the headers lcr reads (``Retry-After``)."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, obj: Any, status: int = 200, **headers: str) -> HttpResponse:
        return cls(status, json.dumps(obj).encode("utf-8"), dict(headers))

    @property
    def is_event_stream(self) -> bool:
        """Whether the body is server-sent events (header names are case-insensitive)."""
        kind = next((v for k, v in self.headers.items() if k.lower() == "content-type"), "")
        return kind.split(";")[0].strip().lower() == "text/event-stream"


class HandlerTransport:
    """Requests answered in-process by ``handler`` (httpx's ``MockTransport`` pattern):
    its :class:`HttpResponse` is read by the same code as a server's reply (error
    statuses, Retry-After, bodies that are not JSON), and an ``OSError`` it raises is
    a network failure. For tests of the backend's error paths, and for embedding a
    model server in the same process."""

    def __init__(
        self,
        handler: Callable[[HttpRequest], HttpResponse],
        base_url: str = "http://handler",
        max_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.handler = handler
        self.base_url = base_url.rstrip("/")
        self.max_bytes = max_bytes
        self.requests: list[HttpRequest] = []

    def request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        timeout: float,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        where = f"{self.base_url}{path}"
        sent = HttpRequest(method, path, payload, timeout)
        self.requests.append(sent)
        try:
            reply = self.handler(sent)
        except TimeoutError:
            raise ServerError(
                f"no complete reply from {where} within {timeout:g} s", transient=False
            ) from None
        except OSError as exc:
            raise ServerError(f"cannot reach {self.base_url}: {exc}", transient=True) from None
        if not 200 <= reply.status < 300:
            raise status_error(reply.status, reply.body, reply.headers.get("Retry-After"), where)
        if on_event is not None and reply.is_event_stream:
            try:
                read_events(io.BytesIO(reply.body), self.max_bytes, where, on_event)
            except StreamFailure as exc:
                raise ServerError(str(exc), transient=False) from None
            return {}
        return reply_json(reply.body, where)
