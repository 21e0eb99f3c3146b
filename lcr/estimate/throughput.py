"""How fast a backend reads and writes tokens on this machine, and what builds observed.

Two files in lcr's cache folder (``$LCR_CACHE_DIR``), both small JSON:

- ``throughput.json``: per model, backend, device and machine, the prefill and
  decode rates measured once by loading the model and timing a few calls (a few
  seconds), with the load average then; measured again when the load differs a
  lot (the rates of a shared CPU follow it);
- ``observed.json``: per method and model (and server), what its last real
  build paid and took: the source of a server's rates (``--base-url``: nothing
  to measure in process) and of the figures an estimate cannot know before the
  model replies (summary lengths, facts per reply).

Written atomically; a damaged file is read as empty (it is a cache).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lcr.estimate.calls import BATCH_LANES
from lcr.models.base import LLM, Capability, Message, Role

if TYPE_CHECKING:
    from lcr.models.container import Models
    from lcr.store.manifest import MethodEntry

LOAD_FACTOR = 1.5  # (1 + load) changing by this factor either way: measure again
REAL_BACKENDS = frozenset({"llamacpp", "xllamacpp", "transformers", "openai"})
DECODE_COST = 10.0  # a server's decoded token against a prompt token, with one observation
_Stored = TypeVar("_Stored")  # a dataclass kept in throughput.json


@dataclass(frozen=True)
class Rates:
    """Tokens per second; ``source`` says where they come from, for the user."""

    prefill: float
    decode: float
    batch_decode: float  # summed over BATCH_LANES sequences decoded together
    load_s: float = 0.0
    attention_prefill: float = 0.0  # transformers with attention weights (PECAN)
    attention_decode: float = 0.0
    # decoding slows as the context grows: the rates after a short and a long prompt
    short_context: float = 0.0
    long_context: float = 0.0
    decode_long: float = 0.0
    attention_decode_long: float = 0.0
    load_avg: float = 0.0
    measured_at: str = ""
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def at_load(self, now: float) -> Rates:
        """These rates as a process would see them at the load ``now``: on a busy CPU a
        process gets about ``cores / (load + 1)`` of it (``load_share``)."""
        factor = load_share(now) / load_share(self.load_avg)
        if abs(math.log(factor)) < 0.05:
            return self
        fields = ("prefill", "decode", "batch_decode", "attention_prefill", "attention_decode")
        scaled = {f: getattr(self, f) * factor for f in (*fields, "decode_long")}
        scaled["attention_decode_long"] = self.attention_decode_long * factor
        note = (
            f"; scaled x{factor:.2f} to the load now ({now:.1f}; {self.load_avg:.1f} when measured)"
        )
        return replace(self, **scaled, source=self.source + note)


def _cache_file(name: str) -> Path:
    from lcr.models.cache import cache_dir

    return cache_dir() / name


def _read(name: str) -> dict[str, Any]:
    try:
        data = json.loads(_cache_file(name).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # gone, torn, or nested beyond reading
        return {}
    return data if isinstance(data, dict) else {}


def _write(name: str, data: dict[str, Any]) -> None:
    path = _cache_file(name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache: the next estimate measures again


def machine_key() -> str:
    """The CPU model and its core count: rates measured on another machine do not apply."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model or 'cpu'} x{os.cpu_count() or 1}"


def current_load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def load_share(load: float) -> float:
    """The share of the CPU one more busy process gets at this load average."""
    cores = os.cpu_count() or 1
    return min(1.0, cores / (load + 1.0))


def load_differs(then: float, now: float) -> bool:
    ratio = (1.0 + now) / (1.0 + then)
    return abs(math.log(ratio)) > math.log(LOAD_FACTOR)


PROBE_VERSION = 4  # rates of an older probe: v1 lacks what the time model reads, v2-v3 decode wrong


def rates_key(model: str, backend: str, device: str) -> str:
    return f"v{PROBE_VERSION}|{model}|{backend}|{device}|{machine_key()}"


def cached_rates(key: str) -> Rates | None:
    """Rates measured here before, unless the load then and now differ a lot."""
    rates = _stored(key, Rates)
    if rates is None or not _plausible(rates):
        return None  # edited or torn: measured again rather than printed as nan or years
    if load_differs(rates.load_avg, current_load()):
        return None
    return rates


_TEXT_FIELDS = ("measured_at", "source")


def _stored(key: str, kind: type[_Stored]) -> _Stored | None:
    """The entry ``key`` of throughput.json as a ``kind``, its unknown fields left out;
    None when there is none or it does not fit (written by another lcr, or torn)."""
    entry = _read("throughput.json").get(key)
    if not isinstance(entry, dict):
        return None
    fields = kind.__dataclass_fields__  # type: ignore[attr-defined]
    try:
        return kind(**{k: v for k, v in entry.items() if k in fields})
    except TypeError:
        return None


def _plausible(rates: Rates) -> bool:
    """Whether stored rates can stand for a real measurement: every figure a finite,
    non-negative number, the three the estimate divides by above zero."""
    for name in Rates.__dataclass_fields__:
        value = getattr(rates, name)
        if name in _TEXT_FIELDS:
            if not isinstance(value, str):
                return False
        elif (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            return False
    return min(rates.prefill, rates.decode, rates.batch_decode) > 0


_PROBE = (
    "The keeper of the lighthouse on Gull Rock wrote in his log every evening: the wind, "
    "the boats that passed, the state of the lamp and the oil it burned. "
)


_clock = time.perf_counter  # the probe's clock (a test runs it on a simulated one)


def _timed(run: Any) -> tuple[Any, float]:
    started = _clock()
    out = run()
    return out, _clock() - started


def _prompt(what: str, repeats: int) -> list[Message]:
    """A fresh prompt (its head differs, so no cached prefix serves it)."""
    return [{"role": "user", "content": f"{what} {time.time_ns()}. " + _PROBE * repeats}]


def measure_rates(llm: LLM, load_s: float) -> Rates:
    """Time a long prefill, decoding after a short and after a long prompt, and a batch
    of decodes (seconds on a small model; the 1.5B takes longer on a busy CPU).

    A decode rate is the difference of two generations from prompts of the same length,
    one of a single token and one of many, so the prefill and the call's overhead cancel
    (subtracting an estimated prefill from one call left a small difference of two
    large times: 3,400 tokens/s once for SmolLM2, which decodes about 100)."""
    first, spent = _timed(lambda: llm.generate(_prompt("Log", LONG), max_new_tokens=1))
    prefill = first.prompt_tokens / max(spent, 1e-6)

    def decode_rate(what: str, repeats: int, new: int) -> tuple[float, float]:
        one, spent_one = _timed(lambda: llm.generate(_prompt(what, repeats), max_new_tokens=1))
        many, spent_many = _timed(lambda: llm.generate(_prompt(what, repeats), max_new_tokens=new))
        extra = max(many.completion_tokens - one.completion_tokens, 1)
        return extra / max(spent_many - spent_one, 1e-6), many.prompt_tokens + new / 2

    decode, short = decode_rate("Tell a long story about", SHORT, 32)
    decode_long, long = decode_rate("Tell the story of", LONG, 24)

    def batch(new: int) -> tuple[int, float]:
        convs = [_prompt(f"Story {i}: tell a long story about", SHORT) for i in range(BATCH_LANES)]
        gens, spent = _timed(lambda: llm.generate_batch(convs, max_new_tokens=new))
        return sum(g.completion_tokens for g in gens), spent

    (ones, spent_ones), (manys, spent_manys) = batch(1), batch(24)
    batch_rate = max(manys - ones, 1) / max(spent_manys - spent_ones, 1e-6)
    attention = (0.0, 0.0)
    if Capability.ATTENTION in llm.capabilities and hasattr(llm, "generate_with_attention"):
        attention = (_attention_rate(llm, SHORT), _attention_rate(llm, LONG))
    return Rates(
        prefill=prefill,
        decode=decode,
        batch_decode=max(batch_rate, decode),
        load_s=load_s,
        attention_prefill=prefill if attention[0] else 0.0,
        attention_decode=attention[0],
        short_context=short,
        long_context=long,
        decode_long=decode_long,
        attention_decode_long=attention[1],
        load_avg=current_load(),
        measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )


SHORT, LONG = 1, 10  # repeats of the probe text: ~50 and ~400 tokens


def _attention_rate(llm: Any, repeats: int) -> float:
    """Decoding with attention weights (PECAN's build) after a prompt of ``repeats``: the
    difference of a one-token call and a 12-token call, as for the plain decode rates."""
    one, spent_one = _timed(
        lambda: llm.generate_with_attention(
            llm.render(_prompt("Sum up", repeats)), max_new_tokens=1
        )
    )
    ids = llm.render(_prompt("Sum up", repeats))
    many, spent_many = _timed(lambda: llm.generate_with_attention(ids, max_new_tokens=12))
    extra = max(many.completion_tokens - one.completion_tokens, 1)
    return float(extra / max(spent_many - spent_one, 1e-6))


@dataclass(frozen=True)
class LongAttention:
    """Calls with attention weights at a batch's length (PECAN's build) and at a quarter
    of it, each timed once with its prefill apart (``prefill_seconds``), in one probe at
    one load: the prefill rate and the decode rate at both lengths. lcr's short probe
    (prompts of ~50-420 tokens) priced a 7.6k-token call of smollm2 at 43 s where it took
    98 s: transformers' prefill per token was about 2x dearer at 7.6k than at 1-4k
    (bench/pecan_batch_cost.py); and its one-call prefill of ~420 tokens is noisy on a
    busy CPU (43 to 211 tokens/s for smollm2), so the line runs through the two here."""

    length: int  # prompt tokens of the long call
    prefill: float  # prompt tokens per second at that length
    decode: float  # tokens per second decoded after it, with attention weights
    context: float  # the mean context those tokens were decoded after
    mid_length: int = 0  # the same, for the call at a quarter of the length (0: none)
    mid_prefill: float = 0.0
    mid_decode: float = 0.0
    mid_context: float = 0.0
    load_avg: float = 0.0
    measured_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def at_load(self, now: float) -> LongAttention:
        factor = load_share(now) / load_share(self.load_avg)
        if abs(math.log(factor)) < 0.05:
            return self
        rates = ("prefill", "decode", "mid_prefill", "mid_decode")
        return replace(self, **{f: getattr(self, f) * factor for f in rates})


LONG_NEW = 24  # tokens the probe at a batch's length decodes
LENGTH_STEP = 512  # probe lengths are rounded up to this (one probe serves nearby batches)


def probe_length(length: int, window: int) -> int:
    """The prompt length to probe for calls of about ``length`` tokens: rounded up to
    :data:`LENGTH_STEP`, within the window (room left for the probe's reply)."""
    rounded = -(-max(length, 1) // LENGTH_STEP) * LENGTH_STEP
    return max(1, min(rounded, window - LONG_NEW - 1))


def _ids_of_length(llm: Any, length: int) -> list[int]:
    """A chat prompt of ``length`` tokens: the probe text, repeated, cut before the template's
    closing turn so the prompt still ends where the reply begins."""
    tail = llm.render([{"role": "user", "content": "x"}])
    head = llm.render([{"role": "user", "content": "Sum up: " + _PROBE * (length // 30 + 2)}])
    closing = 0
    while closing < min(len(tail), len(head)) and tail[-1 - closing] == head[-1 - closing]:
        closing += 1
    body = head[: len(head) - closing]
    ends = head[len(head) - closing :]
    return body[: max(length - len(ends), 1)] + ends


def _attended(llm: Any, length: int) -> tuple[int, float, float, float]:
    """One ``generate_with_attention`` of ``length`` prompt tokens writing :data:`LONG_NEW`:
    its prompt length, prefill rate, decode rate (the call's time less its prefill, per
    token written; 0 when the call reports no split) and mean decoding context."""
    ids = _ids_of_length(llm, length)
    gen, spent = _timed(lambda: llm.generate_with_attention(ids, max_new_tokens=LONG_NEW))
    prefill_s = float(getattr(gen, "prefill_seconds", 0.0) or 0.0)
    if not 0 < prefill_s < spent:  # no split reported: the whole call as the prefill
        prefill_s = spent
    written = max(int(gen.completion_tokens), 1)
    decode = written / (spent - prefill_s) if spent > prefill_s else 0.0
    return len(ids), len(ids) / max(prefill_s, 1e-6), decode, len(ids) + written / 2


def measure_attention_cost(llm: Any, length: int) -> LongAttention:
    """Calls with attention weights at ``length`` prompt tokens and at a quarter of it (see
    :class:`LongAttention`). About two minutes for smollm2 at 7.7k tokens on 2 busy cores."""
    mid = _attended(llm, max(length // 4, 64))
    n, prefill, decode, context = _attended(llm, length)
    return LongAttention(
        length=n,
        prefill=prefill,
        decode=decode,
        context=context,
        mid_length=mid[0],
        mid_prefill=mid[1],
        mid_decode=mid[2],
        mid_context=mid[3],
        load_avg=current_load(),
        measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )


def long_attention_key(key: str, length: int, read_after: bool = False) -> str:
    """The probe's cache key; rows read after the reply (``LCR_ATTENTION_CAPTURE=after``)
    cost another prompt pass, so they are probed apart."""
    return f"{key}|attention@{length}" + ("|read after" if read_after else "")


def cached_long_attention(key: str) -> LongAttention | None:
    """A probe at this length measured here before, unless the load differs a lot."""
    found = _stored(key, LongAttention)
    if found is None:
        return None
    numbers = [getattr(found, f) for f in LongAttention.__dataclass_fields__]
    numbers = [x for x in numbers if not isinstance(x, str)]
    if (
        any(
            isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0
            for x in numbers
        )
        or min(found.length, found.prefill) <= 0
    ):
        return None
    if load_differs(found.load_avg, current_load()):
        return None
    return found


def store_long_attention(key: str, found: LongAttention) -> None:
    data = _read("throughput.json")
    data[key] = found.to_json()
    _write("throughput.json", data)


def store_rates(key: str, rates: Rates) -> None:
    data = _read("throughput.json")
    data[key] = rates.to_json()
    _write("throughput.json", data)


# ------------------------------------------------------------------ observations


def observation_key(method: str, model: str, backend: str, base_url: str | None) -> str:
    return f"{method}|{model}|{backend}|{base_url or ''}"


def record_build(
    method: str,
    model: str,
    backend: str,
    base_url: str | None,
    usage: dict[str, int],
    stats: dict[str, Any],
    settings: dict[str, Any],
    seconds: float,
) -> None:
    """Remember what a build paid and took: the estimate's source for a server's rates
    and for the figures the model's replies decide. Builds served from the cache alone
    teach nothing and are not recorded."""
    calls = int(usage.get("calls", 0))
    if calls <= 0:
        return
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    encoded = prompt - int(usage.get("cached_tokens", 0))
    llm_seconds = stats.get("llm_seconds") or stats.get("scoring_s") or seconds
    if not isinstance(llm_seconds, (int, float)):
        llm_seconds = seconds
    entry: dict[str, Any] = {
        "calls": calls,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "encoded_tokens": encoded,
        "llm_seconds": float(llm_seconds),
        "build_seconds": seconds,
        "load_avg": current_load(),
        "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "completion_per_call": completion / calls,
    }
    if prompt:
        entry["completion_per_prompt_token"] = completion / prompt
    budget = next((v for k, v in settings.items() if k.endswith("max_new_tokens")), None)
    if isinstance(budget, int) and budget > 0:
        entry["completion_share"] = completion / calls / budget
    keys = stats.get("key_forms")
    if isinstance(keys, int) and completion:
        entry["keys_per_completion_token"] = keys / completion
    data = _read("observed.json")
    data[observation_key(method, model, backend, base_url)] = entry
    _write("observed.json", data)


def observed(method: str, model: str, backend: str, base_url: str | None) -> dict[str, Any]:
    found = _read("observed.json").get(observation_key(method, model, backend, base_url))
    return found if isinstance(found, dict) else {}


def server_rates(model: str, base_url: str) -> Rates | None:
    """A server's rates from the builds observed against it: with runs of different
    shapes, prompt and reply costs fitted apart; with one, a reply token taken as
    :data:`DECODE_COST` prompt tokens."""
    runs = [
        v
        for k, v in _read("observed.json").items()
        if isinstance(v, dict) and k.endswith(f"|{model}|openai|{base_url}")
    ]
    runs = [
        r for r in runs if isinstance(r.get("llm_seconds"), int | float) and r["llm_seconds"] > 0
    ]
    if not runs:
        return None
    try:
        last = max(runs, key=lambda r: str(r.get("at", "")))
        enc = sum(float(r["encoded_tokens"]) for r in runs)
        out = sum(float(r["completion_tokens"]) for r in runs)
        secs = sum(float(r["llm_seconds"]) for r in runs)
        load_avg = float(last.get("load_avg", 0.0))
    except (KeyError, TypeError, ValueError):
        return None  # an edited record: no rates rather than an internal error
    if not all(math.isfinite(x) and x >= 0 for x in (enc, out, secs, load_avg)):
        return None
    units = enc + DECODE_COST * out
    per_unit = secs / units if units > 0 else 0.0
    if per_unit <= 0:
        return None
    prefill = 1.0 / per_unit
    decode = prefill / DECODE_COST
    return Rates(
        prefill=prefill,
        decode=decode,
        batch_decode=decode,  # a server's concurrency is already inside what was observed
        measured_at=str(last.get("at", "")),
        load_avg=load_avg,
        source=(
            f"observed in {len(runs)} build(s) against {base_url} (last {last.get('at')}); a "
            f"reply token taken as {DECODE_COST:g} prompt tokens"
        ),
    )


def observe_build(method: str, uses_llm: bool, models: Models, entry: MethodEntry) -> None:
    """What a committed build paid and took (its manifest entry), remembered for
    ``lcr index --estimate``; a build that loaded no LLM is not recorded."""
    usage = entry.stats.get("llm_usage")
    role = Role.LLM if uses_llm else Role.SCORER
    if not isinstance(usage, dict) or not models.loaded(role):
        return
    backend = str(models.backend_of(role))
    if backend not in REAL_BACKENDS:  # a test's scripted LLM teaches nothing about models
        return
    url = models.spec.base_url if backend == "openai" else None
    record_build(
        method,
        models.model_id(role),
        backend,
        url,
        usage,
        entry.stats,
        entry.settings,
        entry.build_seconds,
    )
