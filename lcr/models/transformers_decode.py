"""How the transformers backend decodes: the work done around each step, the KV cache
and compiled steps on CUDA, and how many conversations a GPU batch holds.

Where a step costs milliseconds (a GPU) the work lcr adds around it counts as much as
the step itself. :class:`StepWatch`, the hook ``generate`` calls after every step,
does O(1) work there: it follows the machine's load, advances the token meter, and
only when a reply is streamed reads back the tokens it has not read yet and decodes
the text, at most once every :data:`STREAM_INTERVAL_S` (so one token at a time on
a CPU, a handful at a time on a GPU). Stop strings are transformers' own criterion,
built once per tokenizer and set of strings (:func:`stop_criterion`: building it
walks the whole vocabulary, about 0.1 s a call).

On CUDA (``LCR_STATIC_CACHE``, :func:`decode_plan`): compiled steps are fast (383
tokens/s against 40 with smollm2 on an H200) but the first compiled call of a process
costs about 42 s, so ``auto`` compiles only once they pay: one-stream replies keep the
dynamic cache until the model has generated :data:`COMPILE_AFTER_TOKENS` tokens in this
process (a server, ``lcr eval``, a long ``ask -``), then decode with a static KV cache and
``torch.compile``'d steps where torch can compile (triton installed, compute capability
7.0 or newer), a static cache alone where it cannot. Batches, a CPU and a 4-/8-bit model
keep the dynamic cache under ``auto``. ``on`` asks for the static cache on any device and
from the first call (compiled only on CUDA), ``off`` for neither. The static cache is
sized in steps of :data:`STATIC_CACHE_STEP` tokens and never shrinks, so a compiled step
is not compiled again for every prompt length.

A GPU batch holds as many conversations as free GPU memory allows
(:func:`gpu_batch_rows`, from ``torch.cuda.mem_get_info``), at most
:data:`GPU_BATCH_MAX`; an attention-capturing batch (PECAN's build) as many prompts as
hold their captured rows too (:func:`attention_batch_rows`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lcr.errors import UsageError

if TYPE_CHECKING:
    import torch

    from lcr.models.text_stream import TextPieces
    from lcr.progress import TokenMeter

STREAM_INTERVAL_S = 0.05  # a streamed reply is decoded at most this often
STATIC_CACHE_CHOICES = ("auto", "on", "off")
STATIC_CACHE_STEP = 1024  # tokens: the static cache's length is a multiple of this
GPU_BATCH_MAX = 64  # conversations generated together on a GPU, at most
GPU_BATCH_FALLBACK = 8  # ... where free memory cannot be read
GPU_MEMORY_SHARE = 0.5  # of the free memory, what a batch's cache and activations may take
# One-stream tokens a process generates before ``auto`` compiles: the compile's cost over
# what each token saves, both measured on an H200 with smollm2 (docs/speed.md, "Generating
# on a GPU"): 42 s / (1/40 - 1/383 s) is about 1,900 tokens.
COMPILE_AFTER_TOKENS = 2000


@dataclass(frozen=True)
class DecodePlan:
    """How ``generate`` decodes: a static KV cache or not, compiled steps or not, and why."""

    static_cache: bool
    compiled: bool
    why: str


def static_cache_setting() -> str:
    """``LCR_STATIC_CACHE`` (``auto``, ``on``, ``off``; default ``auto``); a bad value is
    a usage error."""
    raw = os.environ.get("LCR_STATIC_CACHE", "").strip().lower() or "auto"
    if raw not in STATIC_CACHE_CHOICES:
        raise UsageError(
            f"LCR_STATIC_CACHE must be one of {', '.join(STATIC_CACHE_CHOICES)}, got {raw!r}"
        )
    return raw


def triton_available() -> bool:
    """torch.compile's GPU code generator is installed."""
    return importlib.util.find_spec("triton") is not None


def decode_plan(
    device: str,
    setting: str | None = None,
    *,
    quantized: bool = False,
    rows: int = 1,
    generated: int | None = None,
) -> DecodePlan:
    """The decoding :func:`static_cache_setting` asks for on ``device`` (see the module),
    for a call of ``rows`` conversations by a model that has generated ``generated``
    one-stream tokens in this process so far (None: count as paid)."""
    from lcr.models import machine

    choice = static_cache_setting() if setting is None else setting
    if choice not in STATIC_CACHE_CHOICES:
        raise UsageError(
            f"the static cache setting must be one of {', '.join(STATIC_CACHE_CHOICES)}, "
            f"got {choice!r}"
        )
    cuda = device.startswith("cuda")
    if choice == "off":
        return DecodePlan(False, False, "LCR_STATIC_CACHE=off")
    if not cuda:
        if choice == "on":
            return DecodePlan(True, False, "LCR_STATIC_CACHE=on; steps are compiled on CUDA only")
        return DecodePlan(False, False, "a CPU decodes with the dynamic cache")
    if choice == "auto" and rows > 1:
        return DecodePlan(False, False, "auto: a batch decodes with the dynamic cache")
    if choice == "auto" and generated is not None and generated < COMPILE_AFTER_TOKENS:
        why = f"auto: the dynamic cache until {COMPILE_AFTER_TOKENS} tokens pay for a compile"
        return DecodePlan(False, False, why)
    m = machine.current()
    capability = m.compute_capability or (0, 0)
    if quantized:  # as run on the H200; bitsandbytes layers are not compiled
        if choice == "auto":
            return DecodePlan(False, False, "4-/8-bit: the dynamic cache, as tested on a GPU")
        return DecodePlan(True, False, "static cache; bitsandbytes layers are not compiled")
    if not triton_available():
        return DecodePlan(True, False, "static cache; not compiled: triton is not installed")
    if capability < (7, 0):
        why = f"static cache; not compiled: compute capability {capability[0]}.{capability[1]}"
        return DecodePlan(True, False, why)
    return DecodePlan(True, True, "static cache, compiled steps")


def static_cache_length(needed: int, context_window: int) -> int:
    """The static cache's length for ``needed`` positions: the next multiple of
    :data:`STATIC_CACHE_STEP`, within the context window (and never below ``needed``)."""
    rounded = -(-needed // STATIC_CACHE_STEP) * STATIC_CACHE_STEP
    return max(needed, min(rounded, context_window))


def plan_settings(plan: DecodePlan, needed: int, context_window: int) -> dict[str, Any]:
    """GenerationConfig arguments for ``plan`` (nothing for the dynamic cache)."""
    if not plan.static_cache:
        return {}
    return {
        "cache_implementation": "static",
        "max_cache_len": static_cache_length(needed, context_window),
        "disable_compile": not plan.compiled,
    }


def free_gpu_bytes(device: str) -> int | None:
    """Free memory on ``device`` (``torch.cuda.mem_get_info``); None off CUDA or unreadable."""
    if not device.startswith("cuda"):
        return None
    import torch

    try:
        free, _total = torch.cuda.mem_get_info(torch.device(device))
    except (RuntimeError, AssertionError, ValueError):
        return None
    return int(free)


def gpu_batch_rows(free_bytes: int | None, row_bytes: int, wanted: int) -> int:
    """Conversations one GPU batch takes: :data:`GPU_MEMORY_SHARE` of ``free_bytes`` over
    what one row needs (``row_bytes``), between 1 and :data:`GPU_BATCH_MAX`, and no more
    than ``wanted``; :data:`GPU_BATCH_FALLBACK` where free memory is unknown."""
    if free_bytes is None:
        rows = GPU_BATCH_FALLBACK
    else:
        rows = int(free_bytes * GPU_MEMORY_SHARE) // max(1, row_bytes)
    return max(1, min(rows, GPU_BATCH_MAX, max(1, wanted)))


def row_bytes(model: Any, kv_bytes_per_token: int, prompt: int, new: int) -> int:
    """What one conversation of a batch needs on the GPU: its KV cache for every
    position, the prompt's activations through the widest layer while it is read,
    and one row of float32 logits."""
    cfg = model.config
    width = int(getattr(cfg, "intermediate_size", 0) or 4 * int(getattr(cfg, "hidden_size", 0)))
    vocab = int(getattr(cfg, "vocab_size", 0) or 0)
    itemsize = int(getattr(getattr(model, "dtype", None), "itemsize", 4) or 4)
    return kv_bytes_per_token * (prompt + new) + 3 * prompt * width * itemsize + 4 * vocab


def attention_row_bytes(model: Any, kv_bytes_per_token: int, prompt: int, new: int) -> int:
    """What one prompt of an attention-capturing batch needs on the GPU: :func:`row_bytes`,
    plus the float32 attention row kept on the device for each generated token (``new`` x
    ``prompt``) and one layer's float32 weights of a decoding step, with their scores and
    softmax beside them (3 x heads x (prompt + new))."""
    heads = int(getattr(model.config, "num_attention_heads", 1) or 1)
    capture = 4 * new * prompt + 3 * 4 * heads * (prompt + new)
    return row_bytes(model, kv_bytes_per_token, prompt, new) + capture


def attention_batch_rows(free_bytes: int | None, row_bytes: int, wanted: int) -> int:
    """Prompts one attention-capturing GPU batch takes (PECAN's ``llm_batch=0``): as
    :func:`gpu_batch_rows` decides from free memory, but 1 where free memory is unknown
    (a PECAN prompt is thousands of tokens: a guess could run out of memory)."""
    if free_bytes is None:
        return 1
    return gpu_batch_rows(free_bytes, row_bytes, wanted)


@functools.lru_cache(maxsize=32)
def _stop_criterion(tokenizer: Any, stop: tuple[str, ...]) -> Any:
    from transformers import StopStringCriteria

    return StopStringCriteria(tokenizer, list(stop))


def stop_criterion(tokenizer: Any, stop: Sequence[str]) -> Any:
    """transformers' stop-string criterion for ``stop``, built once per tokenizer and strings
    (it keeps no state between calls: each call reads the tokens it is given)."""
    return _stop_criterion(tokenizer, tuple(s for s in stop if s))


class StepWatch:
    """The hook after each decoding step (see the module): never stops generation itself.

    ``rows`` conversations, prompts ``prompt`` columns wide; ``pieces`` hears the first
    row's text up to an end token, decoded at most once every ``interval`` seconds
    (default :data:`STREAM_INTERVAL_S`, read when the watch is made; 0: after every
    step) and once more by :meth:`flush`.
    """

    def __init__(
        self,
        follow_load: Callable[[], None],
        meter: TokenMeter,
        rows: int,
        prompt: int,
        *,
        pieces: TextPieces | None = None,
        decode: Callable[[list[int]], str] | None = None,
        end_ids: frozenset[int] = frozenset(),
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._follow_load = follow_load
        self._meter = meter
        self._rows = rows
        self._prompt = prompt
        self._pieces = pieces
        self._decode = decode
        self._end_ids = end_ids
        self._interval = STREAM_INTERVAL_S if interval is None else interval
        self._clock = clock
        self._last = -float("inf")
        self._never: torch.Tensor | None = None
        self.tokens: list[int] = []  # the first row's reply read back so far
        self.ended = False  # an end token was read: nothing more to stream
        self.decodes = 0  # times the reply was decoded (the tests read it)
        self._latest: torch.Tensor | None = None

    def __call__(self, input_ids: torch.Tensor, scores: Any, **_: Any) -> torch.Tensor:
        self._follow_load()
        self._meter.step(self._rows)
        if self._pieces is not None and not self.ended:
            self._latest = input_ids
            now = self._clock()
            if now - self._last >= self._interval:
                self._last = now
                self._stream(input_ids)
        if self._never is None or self._never.shape[0] != input_ids.shape[0]:
            import torch

            self._never = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        return self._never

    def flush(self) -> None:
        """Stream what the last step left unread (generation has ended)."""
        if self._pieces is not None and not self.ended and self._latest is not None:
            self._stream(self._latest)
        self._latest = None

    def _stream(self, input_ids: torch.Tensor) -> None:
        """Read back only the tokens not read yet, then decode the reply so far."""
        assert self._pieces is not None and self._decode is not None
        start = self._prompt + len(self.tokens)
        if start >= int(input_ids.shape[1]):
            return
        for tok in input_ids[0, start:].tolist():
            if int(tok) in self._end_ids:
                self.ended = True
                break
            self.tokens.append(int(tok))
        self.decodes += 1
        self._pieces.update(self._decode(self.tokens))
