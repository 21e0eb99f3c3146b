"""The OpenAI-compatible backend's error paths, with a handler playing the server.

A :class:`HandlerTransport` hands each request to a function here; its replies are
read by the same code as a real server's (tests/test_openai_backend.py runs the
real llama-cpp-python server for the paths that need one).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator

import pytest

from lcr.errors import LLMCallError
from lcr.models.openai_handler import HandlerTransport, HttpRequest, HttpResponse
from lcr.models.openai_llm import OpenAILLM, RetryPolicy, Transport

HI = [{"role": "user", "content": "Say hi."}]


def chat(text: str, prompt: int = 5, completion: int = 2) -> HttpResponse:
    return HttpResponse.json(
        {
            "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
        }
    )


def replies(*sequence: HttpResponse | Exception) -> Callable[[HttpRequest], HttpResponse]:
    """A handler giving these replies in turn (raising the exceptions)."""
    queue: Iterator[HttpResponse | Exception] = iter(sequence)

    def handle(request: HttpRequest) -> HttpResponse:
        reply = next(queue)
        if isinstance(reply, Exception):
            raise reply
        return reply

    return handle


def llm_for(handler: Callable[[HttpRequest], HttpResponse], sleeps: list[float]) -> OpenAILLM:
    return OpenAILLM(
        HandlerTransport(handler),
        model_id="m",
        context_window=4096,
        retry=RetryPolicy(attempts=3, base_s=0.01, cap_s=0.02),
        sleep=sleeps.append,
    )


def test_a_rate_limit_is_retried_after_the_servers_hint() -> None:
    sleeps: list[float] = []
    busy = HttpResponse.json({"error": {"message": "slow down"}}, 429, **{"Retry-After": "7"})
    llm = llm_for(replies(busy, chat("hi")), sleeps)
    assert llm.generate(HI, max_new_tokens=4).text == "hi"
    assert sleeps == [7.0] and llm.retries == 1
    assert llm.usage.calls == 1 and llm.usage.prompt_tokens == 5


def test_a_server_error_that_persists_fails_in_one_line_after_its_tries() -> None:
    sleeps: list[float] = []
    down = HttpResponse(503, b"<html>\n<b>Service Unavailable</b>\n</html>")
    llm = llm_for(replies(down, down, down), sleeps)
    with pytest.raises(LLMCallError) as exc:
        llm.generate(HI)
    assert (
        str(exc.value)
        == "LLM call failed after 3 tries: HTTP 503 from http://handler/chat/completions: <html>"
    )
    assert len(sleeps) == 2 and llm.usage.calls == 0


def test_a_client_error_is_not_retried_and_says_the_servers_message() -> None:
    sleeps: list[float] = []
    gone = HttpResponse.json({"error": {"message": "model 'm'\nnot found"}}, 404)
    llm = llm_for(replies(gone), sleeps)
    with pytest.raises(
        LLMCallError, match=r"^LLM call failed: HTTP 404 from \S+: model 'm' not found$"
    ):
        llm.generate(HI)
    assert sleeps == []


def test_a_reply_that_is_not_json_is_retried_then_refused() -> None:
    sleeps: list[float] = []
    garbled = HttpResponse(200, b"Bad Gateway")
    llm = llm_for(replies(garbled, garbled, garbled), sleeps)
    with pytest.raises(
        LLMCallError, match=r"after 3 tries: \S+ answered with something that is not JSON"
    ):
        llm.generate(HI)


def test_a_refused_connection_is_transient() -> None:
    sleeps: list[float] = []
    llm = llm_for(replies(ConnectionRefusedError("refused"), chat("back")), sleeps)
    assert llm.generate(HI).text == "back"
    assert llm.retries == 1 and len(sleeps) == 1


def test_a_chat_reply_of_the_wrong_shape_is_one_line() -> None:
    llm = llm_for(replies(HttpResponse.json({"choices": []})), [])
    with pytest.raises(LLMCallError) as exc:
        llm.generate(HI)
    assert "\n" not in str(exc.value)


def test_the_request_is_what_the_api_expects() -> None:
    transport = HandlerTransport(replies(chat("hi")))
    llm = OpenAILLM(transport, model_id="served-model", context_window=4096)
    llm.generate(HI, max_new_tokens=9, stop=["\n"])
    (sent,) = transport.requests
    assert (sent.method, sent.path) == ("POST", "/chat/completions")
    assert sent.payload is not None
    assert sent.payload["model"] == "served-model" and sent.payload["messages"] == HI
    assert sent.payload["max_tokens"] == 9 and sent.payload["stop"] == ["\n"]


def sse(*events: dict[str, object] | str) -> HttpResponse:
    """A reply streamed as server-sent events (a ``str`` is sent as it is: ``[DONE]``)."""
    lines = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events]
    return HttpResponse(200, "".join(lines).encode(), {"Content-Type": "text/event-stream"})


def delta(text: str) -> dict[str, object]:
    return {"choices": [{"delta": {"content": text}}]}


def test_the_handler_transport_takes_what_the_transport_protocol_passes() -> None:
    """The stand-in has the protocol's parameters, names and defaults (a streamed generate
    through it raised TypeError: it lacked ``on_event``)."""
    stand_in = inspect.signature(HandlerTransport.request).parameters
    protocol = inspect.signature(Transport.request).parameters
    assert [(p.name, p.kind, p.default) for p in stand_in.values()] == [
        (p.name, p.kind, p.default) for p in protocol.values()
    ]


def test_a_streamed_reply_is_handed_on_piece_by_piece() -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 6, "completion_tokens": 3}}
    transport = HandlerTransport(replies(sse(delta("Once"), delta(" upon"), usage, "[DONE]")))
    llm = OpenAILLM(transport, model_id="m", context_window=4096)
    pieces: list[str] = []
    gen = llm.generate(HI, max_new_tokens=8, on_text=pieces.append)
    assert gen.text == "Once upon" and "".join(pieces) == "Once upon" and len(pieces) == 2
    assert (gen.prompt_tokens, gen.completion_tokens) == (6, 3)
    (sent,) = transport.requests
    assert sent.payload is not None and sent.payload["stream"] is True


def test_a_stream_cut_before_its_end_fails_in_one_line_without_a_retry() -> None:
    sleeps: list[float] = []
    llm = llm_for(replies(sse(delta("Once"))), sleeps)
    with pytest.raises(LLMCallError, match=r"^LLM call failed: the reply stream from \S+ ended"):
        llm.generate(HI, on_text=lambda text: None)
    assert sleeps == []


def test_a_server_that_does_not_stream_is_read_whole() -> None:
    llm = llm_for(replies(chat("hi there")), [])
    pieces: list[str] = []
    assert llm.generate(HI, on_text=pieces.append).text == "hi there"
    assert "".join(pieces) == "hi there"
