"""The prebuilt llama.cpp backend: a GGUF model run in process through xllamacpp.

xllamacpp ships llama.cpp and its HTTP server as wheels on PyPI, so installing it
compiles nothing (llama-cpp-python compiles llama.cpp: minutes to half an hour). It
exposes the server, not llama.cpp's C API: lcr calls the server's completion handler
in process (JSON in, JSON out) and its ``/tokenize`` handler on a loopback port that
only this process holds the key to. What that gives lcr:

- **generation** and **streaming** (the handler's callback hears each piece), with
  the prompt rendered by lcr from the GGUF's own chat template, as the ``llamacpp``
  backend renders it, and sent as token ids;
- **usage** from the server's own counts, with the prompt tokens its slot reused
  from the call before (``cached_tokens``: the server keeps a shared prefix);
- **yes/no scores** from the server's top-N next-token probabilities (``n_probs``,
  computed from the full softmax): P(yes) / (P(yes) + P(no)) over both spellings of
  each answer. An answer token outside the top :data:`TOP_PROBS` counts as the
  smallest listed probability at most (both outside: 0.5).

What it cannot do: log-probabilities of a given continuation (LightPAL's
ContextScore; the server scores only tokens it samples, never a prompt's), attention
weights (PECAN), and changing its thread count after it starts, so the count is set
once, at load, from the cores other work leaves idle (``LCR_THREADS`` fixes it).
Those need the ``llamacpp`` extra (llama-cpp-python) or transformers.
"""

from __future__ import annotations

import json
import math
import secrets
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lcr.errors import ModelError
from lcr.evidence import Usage
from lcr.models.base import (
    Capability,
    ContinuationScore,
    Generation,
    Message,
    OnText,
    answer_first_tokens,
)
from lcr.models.gguf_header import header_value
from lcr.models.special import defang_messages
from lcr.models.text_stream import TextPieces
from lcr.progress import NULL_PROGRESS, Progress, TokenMeter

DEFAULT_CONTEXT = 16384  # tokens of KV cache, as the llamacpp backend
DEFAULT_BATCH = 512
MICRO_BATCH = 256
TOP_PROBS = 50  # next-token probabilities the server returns for a yes/no score
INSTALL_HINT = "pip install 'lcr[llamacpp]'"
MISSING = (
    "{purpose} needs {what}, which the prebuilt llama.cpp engine (xllamacpp) does not "
    f"provide; install llama-cpp-python ({INSTALL_HINT}) or use --backend transformers"
)

# sampling as the llamacpp backend samples: softmax(logits / T) and nothing else
_PLAIN_SAMPLING = {
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


class XLlamaCppLLM:
    """A GGUF chat model run by llama.cpp's server in process; see the module docstring."""

    backend = "xllamacpp"
    capabilities: frozenset[Capability] = frozenset(
        {Capability.GENERATE, Capability.CHOICE_PROBABILITY, Capability.PREFIX_CACHE}
    )

    def __init__(
        self, server: Any, key: str, *, model_id: str, n_ctx: int, threads: int, device: str
    ) -> None:
        self._server = server
        self._key = key
        self._address = str(server.listening_address)
        self.model_id = model_id
        self.device = device
        self.threads = threads
        self.progress: Progress = NULL_PROGRESS  # the run's, set by lcr.models.loading
        self.usage = Usage()
        self._n_ctx = n_ctx
        self._first_tokens: dict[str, frozenset[int]] = {}
        props = self._get("/props")
        self._template = _template(props)

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        model_id: str,
        context_window: int | None = None,
        device: str = "cpu",
        threads: int | None = None,
    ) -> XLlamaCppLLM:
        """Start llama.cpp's server on ``path`` in this process, its logs off."""
        from lcr.models.llamacpp_threads import default_threads, fixed_threads

        fixed_threads()  # a bad LCR_THREADS is refused before anything loads
        try:
            import xllamacpp
        except ImportError:
            raise ModelError(
                "--backend xllamacpp is not installed: pip install 'lcr[local]'"
            ) from None
        gpu = device.startswith("cuda")
        if gpu and not _has_gpu(xllamacpp):
            raise ModelError(
                "this xllamacpp build has no GPU support (PyPI's wheels are CPU only); use "
                f"--device cpu, --backend llamacpp built for CUDA ({INSTALL_HINT}) or "
                "--backend transformers"
            )
        trained = header_value(Path(path), ".context_length")
        window = context_window or DEFAULT_CONTEXT
        n_ctx = min(window, int(trained)) if isinstance(trained, int) and trained > 0 else window
        n_threads = threads or default_threads()
        key = secrets.token_hex(16)
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_batch = DEFAULT_BATCH
        params.n_ubatch = min(DEFAULT_BATCH, MICRO_BATCH)
        params.n_parallel = 1  # one slot: a call's prefix is the next call's cache
        params.n_gpu_layers = -1 if gpu else 0
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.verbosity = -1  # llama.cpp's log lines would garble lcr's output
        params.warmup = False
        params.api_keys = [key]  # the loopback port answers only this process
        try:
            server = xllamacpp.Server(params)
        except (RuntimeError, ValueError, OSError) as exc:
            raise ModelError(f"llama.cpp (xllamacpp) cannot load {path}: {exc}") from None
        return cls(server, key, model_id=model_id, n_ctx=n_ctx, threads=n_threads, device=device)

    def close(self) -> None:
        """Stop the server and free the model now rather than at garbage collection."""
        self._server = None

    # ------------------------------------------------------------ the server

    def _request(self, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(
            self._address + path,
            data=data,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._key}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                return dict(json.load(reply))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ModelError(
                f"llama.cpp's server (xllamacpp) did not answer {path}: {exc}"
            ) from None

    def _get(self, path: str) -> dict[str, Any]:
        return self._request(path, None)

    def _complete(
        self, body: dict[str, Any], callback: Callable[[dict[str, Any]], bool] | None = None
    ) -> dict[str, Any]:
        if self._server is None:
            raise ModelError(f"{self.model_id} (xllamacpp) was closed")
        if callback is None:
            reply = self._server.handle_completions(body)
        else:
            reply = self._server.handle_completions(body, callback)
        if isinstance(reply, dict) and "error" in reply:
            raise ModelError(_error_text(reply["error"], self.model_id, self._n_ctx))
        return reply if isinstance(reply, dict) else {}

    # ------------------------------------------------------------ LLM protocol

    @property
    def context_window(self) -> int:
        return self._n_ctx

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def encode(self, text: str) -> list[int]:
        """Plain-text token ids: no BOS, special-token text kept as text."""
        if not text:
            return []
        return self._tokenize(text, parse_special=False)

    def _tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        reply = self._request(
            "/tokenize", {"content": text, "add_special": False, "parse_special": parse_special}
        )
        return [int(t) for t in reply.get("tokens", [])]

    def render_text(self, messages: Sequence[Message]) -> str:
        """The chat-templated conversation, ending where the assistant's turn opens."""
        if not messages:
            raise ModelError("an LLM call needs at least one message")
        # the server's vocabulary is not readable here: every control-token shape is
        # broken in a message (lcr.models.special), as for a remote server
        messages = defang_messages(messages, None)
        if self._template is not None:
            return self._template.render(messages)
        return "\n\n".join(m["content"] for m in messages) + "\n\n"

    def render(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the chat-templated conversation (its control tokens parsed)."""
        ids = self._tokenize(self.render_text(messages), parse_special=True)
        if len(ids) >= self._n_ctx:
            raise ModelError(
                f"a prompt of {len(ids)} tokens does not fit the context window of "
                f"{self.model_id} ({self._n_ctx} tokens; --context-window sets it)"
            )
        return ids

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
        prompt = self.render(messages)
        budget = max(1, min(max_new_tokens, self._n_ctx - len(prompt)))
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": budget,
            "temperature": max(0.0, temperature),
            "stop": [s for s in stop if s],
            "cache_prompt": True,
            **_PLAIN_SAMPLING,
        }
        if seed is not None:
            body["seed"] = seed
        meter = TokenMeter(self.progress, f"generating with {self.model_id}", budget)
        # streamed even when nobody listens: Python runs between tokens, so Ctrl-C stops
        # a long generation at the next token rather than after the last
        pieces = TextPieces(on_text, stop) if on_text is not None else None
        try:
            reply, text = self._stream(body, pieces, meter)
        finally:
            meter.finish()
        usage = reply.get("usage") or {}
        prompt_n = int(usage.get("prompt_tokens", len(prompt)))
        completion_n = int(usage.get("completion_tokens", 0))
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
        self.usage.add(prompt_n, completion_n, cached_tokens=cached)
        return Generation(text=text, prompt_tokens=prompt_n, completion_tokens=completion_n)

    def _stream(
        self, body: dict[str, Any], pieces: TextPieces | None, meter: TokenMeter
    ) -> tuple[dict[str, Any], str]:
        """The streamed reply's last chunk (its usage) and the whole text, each piece
        handed to ``pieces`` (when given) as it comes."""
        parts: list[str] = []
        last: dict[str, Any] = {}
        failure: list[BaseException] = []

        def hear(chunk: dict[str, Any]) -> bool:
            nonlocal last
            if "error" in chunk:
                last = chunk
                return True
            last = chunk
            piece = str((chunk.get("choices") or [{}])[0].get("text") or "")
            if piece:
                parts.append(piece)
                try:
                    meter.step()
                    if pieces is not None:
                        pieces.update("".join(parts))
                except BaseException as exc:  # the caller's error or Ctrl-C, raised after
                    failure.append(exc)
                    return True  # stop generating
            return False

        self._stoppable({**body, "stream": True}, hear)
        if failure:
            raise failure[0]
        if "error" in last:
            raise ModelError(_error_text(last["error"], self.model_id, self._n_ctx))
        text = "".join(parts)
        if pieces is not None:
            pieces.finish(text)
        return last, text

    def _stoppable(self, body: dict[str, Any], hear: Callable[[dict[str, Any]], bool]) -> None:
        """A streamed call run on a worker thread while this one waits: Ctrl-C reaches
        this thread (a signal raised inside the engine's callback is swallowed there),
        which tells the callback to stop at the next token and then raises it."""
        stop = threading.Event()
        outcome: list[BaseException] = []

        def callback(chunk: dict[str, Any]) -> bool:
            return stop.is_set() or hear(chunk)

        def work() -> None:
            try:
                self._complete(body, callback)
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=work, name="lcr-xllamacpp", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.1)
        except BaseException:
            stop.set()
            worker.join()
            raise
        if outcome:
            raise outcome[0]

    def generate_batch(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_result: Callable[[int, Generation], None] | None = None,
    ) -> list[Generation]:
        """One conversation after another (the server runs one slot: each call's prefix
        stays cached for the next)."""
        results: list[Generation] = []
        for i, conv in enumerate(conversations):
            gen = self.generate(
                conv, max_new_tokens=max_new_tokens, stop=stop, temperature=temperature
            )
            results.append(gen)
            if on_result is not None:
                on_result(i, gen)
        return results

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        """P(yes) / (P(yes) + P(no)) for the answer's first token, from the server's top
        :data:`TOP_PROBS` next-token probabilities (see the module docstring)."""
        yes_ids, no_ids = self._first_token_ids(yes), self._first_token_ids(no)
        if yes_ids & no_ids:
            raise ModelError(f"the answers {yes!r} and {no!r} start with the same token")
        prompt = self.render(messages)
        reply = self._complete(
            {
                "prompt": prompt,
                "max_tokens": 1,
                "temperature": 0.0,
                "n_probs": TOP_PROBS,
                "cache_prompt": True,
            }
        )
        usage = reply.get("usage") or {}
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
        self.usage.add(int(usage.get("prompt_tokens", len(prompt))), 0, cached_tokens=cached)
        try:
            top = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(
                f"llama.cpp's server (xllamacpp) returned no probabilities for {self.model_id}"
            ) from None
        return yes_share({int(t["id"]): float(t["logprob"]) for t in top}, yes_ids, no_ids)

    def continuation_logprob(self, context: str, continuation: str) -> float:
        raise ModelError(MISSING.format(purpose="scoring a continuation", what="its log-probs"))

    def continuation_logprobs(
        self,
        context: str,
        continuations: Sequence[str],
        *,
        max_tokens: int | None = None,
    ) -> list[ContinuationScore]:
        raise ModelError(MISSING.format(purpose="scoring a continuation", what="its log-probs"))

    def _first_token_ids(self, word: str) -> frozenset[int]:
        if word not in self._first_tokens:
            try:
                self._first_tokens[word] = answer_first_tokens(self.encode, word)
            except ValueError as exc:
                raise ModelError(str(exc)) from None
        return self._first_tokens[word]


def yes_share(logprobs: dict[int, float], yes_ids: frozenset[int], no_ids: frozenset[int]) -> float:
    """P(yes) / (P(yes) + P(no)) from the top next tokens' log-probabilities: each side's
    listed spellings summed; a side with none listed counts as the smallest listed
    probability (an upper bound on it), so both unlisted give 0.5."""
    if not logprobs:
        return 0.5
    floor = math.exp(min(logprobs.values()))

    def mass(ids: frozenset[int]) -> float:
        listed = [math.exp(lp) for t, lp in logprobs.items() if t in ids]
        return sum(listed) if listed else floor

    p_yes, p_no = mass(yes_ids), mass(no_ids)
    return p_yes / (p_yes + p_no)


def _template(props: dict[str, Any]) -> Any:
    """The GGUF's chat template as the server read it, rendered by lcr's Jinja (the
    same text the llamacpp and transformers backends send)."""
    source = props.get("chat_template")
    if not source:
        return None
    from lcr.models.llamacpp_setup import ChatTemplate

    return ChatTemplate(
        str(source), str(props.get("bos_token") or ""), str(props.get("eos_token") or "")
    )


def _has_gpu(module: Any) -> bool:
    try:
        devices = module.get_device_info()
    except Exception:
        return False
    text = json.dumps(devices, default=str).lower()
    return any(word in text for word in ("cuda", "gpu", "vulkan", "metal"))


def _error_text(error: Any, model_id: str, n_ctx: int) -> str:
    if isinstance(error, dict):
        if error.get("type") == "exceed_context_size_error":
            return (
                f"a prompt of {error.get('n_prompt_tokens', '?')} tokens does not fit the "
                f"context window of {model_id} ({n_ctx} tokens; --context-window sets it)"
            )
        message = str(error.get("message") or error)
    else:
        message = str(error)
    return f"llama.cpp's server (xllamacpp) refused the call: {message.splitlines()[0][:200]}"
