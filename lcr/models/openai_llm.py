"""The OpenAI-compatible backend: LLM calls go to a server the user already runs.

For users who outgrow one machine: vLLM, llama.cpp's server, llama-cpp-python's
server or any endpoint that speaks ``POST {base}/chat/completions``. The server
batches across its GPUs and serves many ``lcr`` processes at once; lcr sends a
batch's independent calls concurrently (``--concurrency``), retries transient
failures with backoff, and reports a call that fails for good as one line.

What it can do: chat generation, and yes/no from the first token's top
log-probabilities where the server returns them (probed before any work).
Continuation log-probabilities and attention need an in-process backend.

Token counts for fitting evidence into the window are lcr's model-free
approximation with a 10% margin: servers disagree on how (or whether) they
tokenize on request.

HTTP goes through a small :class:`Transport`, so the protocol logic stays apart
from the wire, as in httpx: :class:`UrllibTransport` (stdlib ``urllib``) talks
to a server, :class:`~lcr.models.openai_handler.HandlerTransport` hands each
request to a function (the tests of the error paths).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

from lcr.errors import LLMCallError, ModelError
from lcr.evidence import Usage
from lcr.models.base import Capability, ContinuationScore, Generation, Message, OnText
from lcr.models.openai_address import check_api_key, check_base_url
from lcr.models.openai_stream import StreamedReply, StreamFailure, is_event_stream, read_events
from lcr.models.spec import DEFAULT_CALL_TIMEOUT, ModelSpec
from lcr.models.special import defang_messages

DEFAULT_SERVER_WINDOW = 8192  # when the server does not say (vLLM's /models does)
# A reply larger than this is refused: a chat reply (top log-probabilities included)
# is kilobytes, and an endless body must not grow memory without bound.
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
_READ_PIECE = 64 * 1024
TOP_LOGPROBS = 20
_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class ServerError(Exception):
    """A failed request; ``transient`` ones are worth another try."""

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after


class Transport(Protocol):
    """How JSON reaches the server and comes back; raises :class:`ServerError`.
    ``timeout``: seconds the whole request may take (connect, wait, read). With
    ``on_event``, a reply streamed as server-sent events is handed on event by event
    (and ``{}`` returned); a reply that is not a stream is returned as usual."""

    def request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        timeout: float,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]: ...


class _Sockets:
    """The sockets of the requests in flight, so a deadline or an interrupt can cut
    them: shutting a socket down wakes the thread blocked reading it at once, where a
    socket timeout only bounds the wait for each byte (a server trickling one byte a
    second would never time out)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, socket.socket] = {}

    def add(self, call: int, sock: socket.socket) -> None:
        with self._lock:
            self._open[call] = sock

    def cut(self, call: int | None = None) -> None:
        """Cut one request's socket (None: every request's)."""
        with self._lock:
            socks = list(self._open.values()) if call is None else [self._open.get(call)]
        for sock in socks:
            if sock is not None:
                with contextlib.suppress(OSError):  # already closed
                    sock.shutdown(socket.SHUT_RDWR)

    def forget(self, call: int) -> None:
        with self._lock:
            self._open.pop(call, None)


def _tracked_handlers(sockets: _Sockets, call: int) -> list[urllib.request.BaseHandler]:
    """urllib's HTTP(S) handlers, with connections that register their socket."""

    class Http(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            sockets.add(call, self.sock)

    class Https(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            sockets.add(call, self.sock)

    class HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Http, req)

    class HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Https, req)

    return [HttpHandler(), HttpsHandler()]


def _read_body(resp: Any, limit: int, where: str) -> bytes:
    """The reply's body, refused once it passes ``limit`` bytes."""
    length = resp.headers.get("Content-Length") if resp.headers else None
    if length and length.isdigit() and int(length) > limit:
        raise ServerError(
            f"{where} sent a reply of {int(length):,} bytes, more than lcr reads "
            f"({limit:,})", transient=False,
        )  # fmt: skip
    pieces: list[bytes] = []
    size = 0
    while piece := resp.read(_READ_PIECE):
        size += len(piece)
        if size > limit:
            raise ServerError(
                f"{where} sent more than {limit:,} bytes: not a chat reply", transient=False
            )
        pieces.append(piece)
    return b"".join(pieces)


class UrllibTransport:
    """JSON over HTTP(S) with the standard library (no extra dependency).

    Each request has one deadline for all of it (a timer cuts its socket), and a
    reply larger than ``max_bytes`` is refused. :meth:`abort` cuts every request in
    flight and fails new ones, until :meth:`resume`: an interrupt ends a run in
    moments however the server behaves."""

    def __init__(
        self, base_url: str, api_key: str | None = None, max_bytes: int = MAX_RESPONSE_BYTES
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.max_bytes = max_bytes
        self._sockets = _Sockets()
        self._calls = iter(range(1 << 62))
        self._aborted = threading.Event()

    def abort(self) -> None:
        self._aborted.set()
        self._sockets.cut()

    def resume(self) -> None:
        self._aborted.clear()

    def request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        timeout: float,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        if self._aborted.is_set():
            raise ServerError("interrupted", transient=False)
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        call = next(self._calls)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            self._sockets.cut(call)

        timer = threading.Timer(max(timeout, 0.0), expire)
        timer.daemon = True
        timer.start()
        opener = urllib.request.build_opener(*_tracked_handlers(self._sockets, call))
        try:
            with opener.open(req, timeout=max(timeout, 0.001)) as resp:
                if on_event is not None and is_event_stream(resp):
                    read_events(resp, self.max_bytes, f"{self.base_url}{path}", on_event)
                    body = b"{}"
                else:
                    body = _read_body(resp, self.max_bytes, f"{self.base_url}{path}")
            if expired.is_set() or self._aborted.is_set():  # a cut socket reads as the end
                raise TimeoutError
        except urllib.error.HTTPError as exc:
            try:
                error_body = exc.read(4096)
            except Exception:
                error_body = b""
            raise status_error(
                exc.code,
                error_body or str(exc.reason or "").encode("utf-8"),
                exc.headers.get("Retry-After") if exc.headers else None,
                f"{self.base_url}{path}",
            ) from None
        except StreamFailure as exc:  # a stream cut by the deadline or an interrupt says so
            why = str(exc)
            if self._aborted.is_set():
                why = "interrupted"
            elif expired.is_set():
                why = f"no complete reply from {self.base_url}{path} within {timeout:g} s"
            raise ServerError(why, transient=False) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            if self._aborted.is_set():
                raise ServerError("interrupted", transient=False) from None
            if expired.is_set() or isinstance(exc, TimeoutError):
                raise ServerError(
                    f"no complete reply from {self.base_url}{path} within {timeout:g} s",
                    transient=False,
                ) from None
            reason = getattr(exc, "reason", exc)
            raise ServerError(f"cannot reach {self.base_url}: {reason}", transient=True) from None
        finally:
            timer.cancel()
            self._sockets.forget(call)
        return reply_json(body, f"{self.base_url}{path}")


# ------------------------------------------------ what a reply means, whatever the wire


def reply_json(body: bytes, where: str) -> dict[str, Any]:
    """A 2xx reply's body as a JSON object, or the :class:`ServerError` it is."""
    try:
        parsed = json.loads(body)
    except ValueError:
        raise ServerError(
            f"{where} answered with something that is not JSON", transient=True
        ) from None
    if not isinstance(parsed, dict):
        raise ServerError(f"{where} answered with unexpected JSON", transient=False)
    return parsed


def status_error(status: int, body: bytes, retry_after: str | None, where: str) -> ServerError:
    """The :class:`ServerError` of an HTTP error status: transient or not by its code,
    with the server's message on one line and its ``Retry-After`` hint."""
    return ServerError(
        f"HTTP {status} from {where}: {_error_detail(body)}",
        transient=status in _TRANSIENT_STATUS,
        retry_after=_retry_after(retry_after),
    )


def _error_detail(raw: bytes) -> str:
    body = raw[:4096].decode("utf-8", errors="replace")
    try:
        parsed = json.loads(body)
        err = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        message = err.get("message") if isinstance(err, dict) else None
        return " ".join(str(message or err).split())[:200]  # one line, whatever the server sent
    except ValueError:
        return body.strip().splitlines()[0][:200] if body.strip() else ""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for transient failures."""

    attempts: int = 5
    base_s: float = 0.5
    cap_s: float = 8.0

    def delay(self, attempt: int, hint: float | None = None) -> float:
        if hint is not None:
            return min(hint, 60.0)
        return min(self.cap_s, self.base_s * 2**attempt) * (0.5 + random.random() / 2)


class OpenAILLM:
    """Chat calls to an OpenAI-compatible server; see the module docstring."""

    backend = "openai"
    # yes/no from the first token's top log-probabilities, where the server returns
    # them (probed before any work: lcr.models.backends checks the server)
    capabilities: frozenset[Capability] = frozenset(
        {Capability.GENERATE, Capability.CHOICE_PROBABILITY}
    )

    def __init__(
        self,
        transport: Transport,
        *,
        model_id: str,
        context_window: int,
        concurrency: int = 4,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.transport = transport
        self.model_id = model_id
        self.concurrency = max(1, concurrency)
        self.call_timeout = call_timeout  # seconds for one call, its retries included
        self.retry = retry or RetryPolicy()
        self.usage = Usage()
        self.retries = 0  # transient failures retried, for the curious
        self.undecided = 0  # yes/no checks where neither answer was among the top tokens
        self._window = context_window
        self._interrupted = threading.Event()
        # the wait between tries ends at once on an interrupt
        self._sleep = sleep or self._interrupted.wait
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, spec: ModelSpec) -> OpenAILLM:
        """An LLM for ``spec.base_url``; the window from the server when it says."""
        if not spec.base_url:
            raise ModelError(
                "--backend openai needs --base-url URL (or LCR_BASE_URL) of an "
                "OpenAI-compatible server"
            )
        transport = UrllibTransport(
            check_base_url(spec.base_url), check_api_key(os.environ.get("LCR_API_KEY"))
        )
        window = spec.context_window or _server_window(transport, spec.llm, spec.call_timeout)
        return cls(
            transport,
            model_id=spec.llm,
            context_window=window,
            concurrency=spec.concurrency,
            call_timeout=spec.call_timeout,
        )

    # ------------------------------------------------------------ LLM protocol

    @property
    def context_window(self) -> int:
        return self._window

    @property
    def parallel(self) -> int:
        return self.concurrency

    def count_tokens(self, text: str) -> int:
        from lcr.text.tokens import count_tokens

        return math.ceil(count_tokens(text) * 1.1)

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_text: OnText | None = None,
        seed: int | None = None,
    ) -> Generation:
        """One chat call; with ``on_text``, the reply is streamed (``"stream": true``)
        within the same deadline and byte limit, and not retried once text was shown."""
        payload = self._chat_payload(messages, max_new_tokens, stop, temperature)
        if seed is not None:
            payload["seed"] = seed  # honoured by llama.cpp's server, vLLM and OpenAI (best effort)
        if on_text is None:
            return self._generation(self._call("/chat/completions", payload), messages)
        streamed = StreamedReply(on_text)
        payload.update(stream=True, stream_options={"include_usage": True})
        reply = self._call("/chat/completions", payload, streamed)
        gen = self._generation(streamed.reply() if streamed.events else reply, messages)
        streamed.finish(gen.text)  # a server that did not stream: its whole reply at once
        return gen

    def generate_batch(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_result: Callable[[int, Generation], None] | None = None,
    ) -> list[Generation]:
        """Up to ``concurrency`` calls in flight; ``on_result`` as each one returns.

        A call that fails for good stops new calls from starting; the calls in
        flight finish (and reach ``on_result``, so what was paid is kept), then
        the first failure is raised.
        """
        results: list[Generation | None] = [None] * len(conversations)
        if not conversations:
            return []
        failure: BaseException | None = None
        pending = iter(range(len(conversations)))
        running: dict[Future[Generation], int] = {}
        pool = ThreadPoolExecutor(max_workers=self.concurrency)

        def submit_next() -> None:
            i = next(pending, None)
            if i is not None:
                future = pool.submit(
                    self.generate,
                    conversations[i],
                    max_new_tokens=max_new_tokens,
                    stop=stop,
                    temperature=temperature,
                )
                running[future] = i

        try:
            for _ in range(self.concurrency):
                submit_next()
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    i = running.pop(future)
                    try:
                        gen = future.result()
                    except BaseException as exc:  # kept; the batch stops after the in-flight calls
                        failure = failure or exc
                        continue
                    results[i] = gen
                    if on_result is not None:
                        on_result(i, gen)
                    if failure is None:
                        submit_next()
        except BaseException:
            # an interrupt (or a bug): cut the calls in flight rather than wait for them
            self.interrupt()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self._resume()
        if failure is not None:
            raise failure
        return [g for g in results if g is not None]

    def interrupt(self) -> None:
        """End the calls in flight and the waits between tries now (Ctrl-C)."""
        self._interrupted.set()
        abort = getattr(self.transport, "abort", None)
        if abort is not None:
            abort()

    def _resume(self) -> None:
        """Ready for new calls after :meth:`interrupt` (a later batch in the same process)."""
        self._interrupted.clear()
        resume = getattr(self.transport, "resume", None)
        if resume is not None:
            resume()

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        """P(yes) / (P(yes) + P(no)) from the first token's top log-probabilities.

        Tokens that are ``yes``/``no`` up to surrounding spaces count (both
        spellings, as the local backends count them). When neither is among the
        top tokens the answer is undecided: 0.5, counted in ``undecided``.
        """
        payload = self._chat_payload(messages, 1, (), 0.0)
        payload["logprobs"] = True
        payload["top_logprobs"] = TOP_LOGPROBS
        reply = self._call("/chat/completions", payload)
        self._count_usage(reply, messages, completion=1)
        top = _first_top_logprobs(reply)
        if top is None:
            raise LLMCallError(
                f"the server at {getattr(self.transport, 'base_url', '?')} returned no "
                "log-probabilities for a yes/no check"
            )
        p_yes = sum(math.exp(lp) for tok, lp in top if tok.strip() == yes.strip())
        p_no = sum(math.exp(lp) for tok, lp in top if tok.strip() == no.strip())
        if p_yes + p_no <= 0.0:
            with self._lock:
                self.undecided += 1
            return 0.5
        return p_yes / (p_yes + p_no)

    def continuation_logprob(self, context: str, continuation: str) -> float:
        raise ModelError(
            "the openai backend cannot score continuations; use --backend llamacpp or transformers"
        )

    def continuation_logprobs(
        self,
        context: str,
        continuations: Sequence[str],
        *,
        max_tokens: int | None = None,
    ) -> list[ContinuationScore]:
        raise ModelError(
            "the openai backend cannot score continuations; use --backend llamacpp or transformers"
        )

    # ---------------------------------------------------------------- helpers

    def _chat_payload(
        self,
        messages: Sequence[Message],
        max_new_tokens: int,
        stop: Sequence[str],
        temperature: float,
    ) -> dict[str, Any]:
        if not messages:
            raise ModelError("an LLM call needs at least one message")
        payload: dict[str, Any] = {
            "model": self.model_id,
            # the server's template parses control tokens; a message's text must not
            # spell one (its vocabulary is unknown here: the common template shapes)
            "messages": defang_messages(messages),
            "max_tokens": max(1, int(max_new_tokens)),
            "temperature": float(temperature),
        }
        stops = [s for s in stop if s][:4]  # the OpenAI API takes at most four
        if stops:
            payload["stop"] = stops
        if temperature <= 0:
            payload["seed"] = 0
        return payload

    def _call(
        self, path: str, payload: dict[str, Any], streamed: StreamedReply | None = None
    ) -> dict[str, Any]:
        """One request with retries on transient failures, all within ``call_timeout``;
        LLMCallError when it fails for good. A ``streamed`` reply is read into it, and
        never tried again once part of it was shown."""
        deadline = time.monotonic() + self.call_timeout
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0 or self._interrupted.is_set():
                    raise ServerError(
                        "interrupted" if left > 0 else "no time left", transient=False
                    )
                if streamed is None:
                    return self.transport.request("POST", path, payload, left)
                return self.transport.request("POST", path, payload, left, streamed.event)
            except ServerError as exc:
                attempt += 1
                tries = f" after {attempt} tries" if attempt > 1 else ""
                if time.monotonic() >= deadline:
                    raise LLMCallError(
                        f"LLM call failed{tries}: no complete reply within --call-timeout "
                        f"{self.call_timeout:g} s ({exc})"
                    ) from None
                shown = streamed is not None and streamed.shown
                if not exc.transient or attempt >= self.retry.attempts or shown:
                    raise LLMCallError(f"LLM call failed{tries}: {exc}") from None
                with self._lock:
                    self.retries += 1
                wait_s = self.retry.delay(attempt - 1, exc.retry_after)
                self._sleep(min(wait_s, max(deadline - time.monotonic(), 0.0)))

    def _generation(self, reply: dict[str, Any], messages: Sequence[Message]) -> Generation:
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise LLMCallError("the server's reply has no choices[0].message.content") from None
        if not isinstance(text, str):
            raise LLMCallError(
                "the server's reply has a choices[0].message.content that is not text"
            )
        prompt, completion = self._count_usage(reply, messages, text=str(text))
        return Generation(text=str(text), prompt_tokens=prompt, completion_tokens=completion)

    def _count_usage(
        self,
        reply: dict[str, Any],
        messages: Sequence[Message],
        *,
        text: str = "",
        completion: int | None = None,
    ) -> tuple[int, int]:
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        prompt = usage.get("prompt_tokens")
        if not isinstance(prompt, int):
            prompt = sum(self.count_tokens(m["content"]) for m in messages)
        done = usage.get("completion_tokens")
        if not isinstance(done, int):
            done = completion if completion is not None else self.count_tokens(text)
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        with self._lock:
            self.usage.add(prompt, done, cached_tokens=cached if isinstance(cached, int) else 0)
        return prompt, done


def _first_top_logprobs(reply: dict[str, Any]) -> list[tuple[str, float]] | None:
    """``[(token, logprob), ...]`` of the first generated token, or None if absent."""
    try:
        content = reply["choices"][0]["logprobs"]["content"]
        first = content[0]
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(first, dict):
        return None
    entries = first.get("top_logprobs") or [first]
    out: list[tuple[str, float]] = []
    for entry in entries if isinstance(entries, list) else []:
        tok = entry.get("token") if isinstance(entry, dict) else None
        lp = entry.get("logprob") if isinstance(entry, dict) else None
        if isinstance(tok, str) and isinstance(lp, (int, float)) and not isinstance(lp, bool):
            out.append((tok, float(lp)))
    return out or None


def _server_window(transport: Transport, model: str, timeout: float) -> int:
    """``max_model_len`` from ``GET /models`` (vLLM says it), else a cautious default.
    A listing of another shape says nothing: the chat calls will tell what is wrong."""
    try:
        listing = transport.request("GET", "/models", None, timeout)
    except ServerError:
        return DEFAULT_SERVER_WINDOW
    entries = listing.get("data")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("id") in (model, None):
            value = entry.get("max_model_len")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return DEFAULT_SERVER_WINDOW


_LOGPROB_PROBES: dict[str, bool] = {}


def server_returns_logprobs(spec: ModelSpec) -> bool:
    """Ask the server once (per base URL and model) whether it returns top log-probabilities."""
    key = f"{spec.base_url}|{spec.llm}"
    if key not in _LOGPROB_PROBES:
        llm = OpenAILLM.connect(spec)
        payload = llm._chat_payload(
            [{"role": "user", "content": "Is two more than one? Answer Yes or No."}], 1, (), 0.0
        )
        payload["logprobs"] = True
        payload["top_logprobs"] = 5
        try:
            reply = llm._call("/chat/completions", payload)
        except LLMCallError as exc:
            raise ModelError(f"cannot use the server at {spec.base_url}: {exc}") from None
        _LOGPROB_PROBES[key] = _first_top_logprobs(reply) is not None
    return _LOGPROB_PROBES[key]
