"""``lcr index ... --estimate``: each method's bill, before any paid call.

Reads the documents exactly as ``lcr index`` would, joins them as the index
would (``join_documents``), asks each method's ``estimate`` hook for its work
(computed from its own chunking code with the model's tokenizer alone), then
turns tokens into time with the rates of :mod:`lcr.estimate.throughput`, into
disk and memory, and into money at the user's price.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr import config
from lcr.errors import LcrError, UsageError
from lcr.estimate import throughput
from lcr.estimate.figures import ZERO, BuildEstimate, LLMWork, Range
from lcr.models.base import Role, Tokenizer
from lcr.models.container import Models
from lcr.models.transformers_attend import capture_setting
from lcr.pipeline.plans import NO_SETS, ParsedSets

if TYPE_CHECKING:
    from lcr.text.formats import ExtractOptions
    from lcr.text.inputs import InputFile

NODE_BYTES = 200  # JSON around a stored node (id, spans, meta)
CACHE_BYTES_PER_CALL = 300  # a cache line around each reply
EMBED_PROBE = 64  # texts the embedder's rate is measured on


@dataclass(frozen=True)
class Price:
    """Money per million tokens, prompt and reply (``--price-per-mtok IN[/OUT]``)."""

    prompt: float
    completion: float

    @classmethod
    def parse(cls, text: str) -> Price:
        parts = text.replace(",", "/").split("/")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) not in (1, 2) or any(v < 0 or v != v or v == float("inf") for v in values):
            raise UsageError(
                f"--price-per-mtok must be a price per million tokens, or INPUT/OUTPUT "
                f"(e.g. 0.15/0.60), not {text!r}"
            )
        return cls(values[0], values[-1])

    def of(self, work: LLMWork) -> Range:
        return work.prompt_tokens.scaled(self.prompt / 1e6) + work.completion_tokens.scaled(
            self.completion / 1e6
        )


@dataclass
class MethodBill:
    """One method's figures, as printed and as ``--json`` writes them."""

    method: str
    work: BuildEstimate
    up_to_date: bool = False
    backend: str | None = None
    rates: throughput.Rates | None = None
    long_attention: throughput.LongAttention | None = None
    seconds: Range | None = None
    memory_bytes: int | None = None
    disk_bytes: Range = ZERO
    cost: Range | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        w = self.work
        out: dict[str, Any] = {
            "method": self.method,
            "up_to_date": self.up_to_date,
            "llm": w.llm.to_json() if w.llm else None,
            "backend": self.backend,
            "embedder_texts": w.embedder_texts.to_json(),
            "disk_bytes": self.disk_bytes.to_json(),
            "memory_bytes": self.memory_bytes,
            "seconds": self.seconds.to_json() if self.seconds else None,
            "cost": self.cost.to_json() if self.cost else None,
            "basis": dict(w.basis),
            "sources": dict(self.sources),
        }
        if self.rates is not None:
            r = self.rates
            out["rates"] = {
                "prefill_tokens_per_s": round(r.prefill, 1),
                "decode_tokens_per_s": round(r.decode, 1),
                "batch_decode_tokens_per_s": round(r.batch_decode, 1),
                "decode_tokens_per_s_long": round(r.decode_long, 1),
                "long_context": round(r.long_context),
            }
            if self.long_attention is not None:
                a = self.long_attention
                out["rates"]["attention_at_length"] = {
                    "prompt_tokens": a.length,
                    "prefill_tokens_per_s": round(a.prefill, 1),
                    "decode_tokens_per_s": round(a.decode, 2),
                }
        return out


def per_token_line(
    short_rate: float, short_at: float, long_rate: float, long_at: float
) -> tuple[float, float]:
    """Seconds per token as ``base + slope * length`` through two measured rates (pure):
    ``short_rate`` tokens/s at length ``short_at``, ``long_rate`` at ``long_at``. The
    slope is never negative (a longer context never makes a token cheaper; two noisy
    rates that say so give a flat line at the short rate), and a missing long rate
    (0) gives the flat line too."""
    short_cost = 1 / max(short_rate, 1e-9)
    slope = 0.0
    if long_rate > 0 and short_rate > 0 and long_at > short_at:
        slope = max((1 / long_rate - short_cost) / (long_at - short_at), 0.0)
    return max(short_cost - slope * short_at, 0.0), slope


def llm_seconds(
    work: LLMWork,
    rates: throughput.Rates,
    long: throughput.LongAttention | None = None,
    *,
    on_gpu: bool = False,
) -> Range:
    """The LLM's share of a build's time at these rates (pure).

    A decoded token costs ``base + slope * context``: the slope from the decode rates
    after a short and a long prompt, the base from the one-sequence or the batched rate.
    A prompt token costs the same way, ``base + slope * its prompt's length``, so a
    prompt of ``n`` tokens costs ``base * n + slope * n^2`` (``work.prompt_square``):
    with ``long``, the probe at the calls' own length and a quarter of it (PECAN's
    batches), both lines run through its two calls; without it the prefill's slope is
    0, as before. ``on_gpu``: calls that decode together share their steps
    (``work.decode_share_on_gpu``); their prompts are still read one by one.
    """
    attention = work.kind == "attention" and rates.attention_decode > 0
    prefill = rates.attention_prefill if attention else rates.prefill
    short = rates.attention_decode if attention else rates.decode
    decode_long = rates.attention_decode_long if attention else rates.decode_long
    short_at, decode_at = rates.short_context, rates.long_context
    prefill_at, prefill_long, prefill_long_at = rates.long_context, 0.0, 0.0
    if attention and long is not None:
        if long.mid_length > 0 and long.mid_prefill > 0:
            prefill, prefill_at = long.mid_prefill, long.mid_length
        prefill_long, prefill_long_at = long.prefill, long.length
        if long.decode > 0:
            decode_long, decode_at = long.decode, long.context
            if long.mid_decode > 0:
                short, short_at = long.mid_decode, long.mid_context
    base, slope = per_token_line(short, short_at, decode_long, decode_at)
    if work.batched and not attention:
        base = max(1 / max(rates.batch_decode, 1e-9) - slope * rates.short_context, 0.0)
    prefill_base, prefill_slope = per_token_line(prefill, prefill_at, prefill_long, prefill_long_at)
    decoding = work.completion_tokens.scaled(base) + work.decode_context.scaled(slope)
    share = work.decode_share_on_gpu
    if on_gpu and share is not None:
        decoding = Range(decoding.expected * share.expected, decoding.high * share.high)
    return (
        work.encoded_tokens.scaled(prefill_base)
        + work.prompt_square.scaled(prefill_slope)
        + decoding
    )


def disk_bytes(work: BuildEstimate, dim: int) -> Range:
    calls = work.llm.calls if work.llm else ZERO
    replies = work.llm.completion_tokens.scaled(4) if work.llm else ZERO
    return (
        work.stored_text_chars
        + work.nodes.scaled(NODE_BYTES)
        + work.vectors.scaled(dim * 4)
        + calls.scaled(CACHE_BYTES_PER_CALL)
        + replies
    )


def ram_of(name: str, backend: str | None) -> int | None:
    """Peak RAM of a preset on this backend (measured figures in the presets)."""
    from lcr.models.presets import PRESETS

    if backend == "openai":
        return 0
    preset = PRESETS.get(name)
    if preset is None:
        return None
    if backend in ("llamacpp", "xllamacpp") and preset.ram_llamacpp_bytes:
        return preset.ram_llamacpp_bytes
    return preset.ram_bytes


@dataclass
class Estimator:
    """The state of one ``--estimate`` run: models chosen (never loaded for the work),
    tokenizers and rates each fetched once."""

    models: Models
    note: Callable[[str], None] = lambda message: None
    tokenizers: dict[tuple[str, str], Tokenizer] = field(default_factory=dict)
    rates: dict[str, throughput.Rates] = field(default_factory=dict)

    def tokenizer(self, name: str, backend: str) -> Tokenizer:
        from lcr.estimate.tokenizers import load_tokenizer

        key = (name, backend)
        if key not in self.tokenizers:
            self.tokenizers[key] = load_tokenizer(name, backend, self.models.spec)
        return self.tokenizers[key]

    def device(self, role: Role) -> str:
        """Where the role's model runs, as its configuration records it."""
        conf = self.models.configuration(role) or {}
        return str(conf.get("device") or self.models.spec.device)

    def llm_rates(self, role: Role, backend: str) -> throughput.Rates | None:
        spec = self.models.spec
        name = self.models.model_id(role)
        if backend == "openai":
            return throughput.server_rates(name, str(spec.base_url))
        key = throughput.rates_key(name, backend, self.device(role))
        if key in self.rates:
            return self.rates[key]
        found = throughput.cached_rates(key)
        if found is not None:
            source = f"measured here {found.measured_at} at load {found.load_avg:.1f} (cached)"
            found = _with_source(found, source).at_load(throughput.current_load())
        else:
            self.note(
                f"measuring {name} on {backend} once: loading it and a few calls, which can "
                "take minutes (cached for later estimates)"
            )
            started = time.perf_counter()
            llm = self.models.scorer if role is Role.SCORER else self.models.llm
            loaded = time.perf_counter() - started
            found = throughput.measure_rates(llm, loaded)
            self.note(f"measured {name} in {time.perf_counter() - started:.0f} s")
            throughput.store_rates(key, found)
            found = _with_source(found, f"measured here now at load {found.load_avg:.1f}")
        self.rates[key] = found
        return found

    def long_attention(
        self, role: Role, backend: str, length: int
    ) -> throughput.LongAttention | None:
        """Attention calls' rates at ``length`` prompt tokens (PECAN's batches): cached per
        model, backend, device, machine and length (rounded up to 512), else measured
        by a call at that length and one at a quarter of it, which loads the model."""
        if backend == "openai" or length <= 0:
            return None
        spec = self.models.spec
        name = self.models.model_id(role)
        conf = self.models.configuration(role) or {}
        rounded = throughput.probe_length(length, 1 << 30)
        read_after = backend == "transformers" and capture_setting() == "after"
        key = throughput.long_attention_key(
            throughput.rates_key(name, backend, str(conf.get("device") or spec.device)),
            rounded,
            read_after,
        )
        found = throughput.cached_long_attention(key)
        if found is not None:
            return found.at_load(throughput.current_load())
        llm = self.models.scorer if role is Role.SCORER else self.models.llm
        if not hasattr(llm, "generate_with_attention"):
            return None
        self.note(
            f"measuring {name} on {backend} once at {rounded} prompt tokens with attention "
            "weights (the build's batches) and a quarter of that: two calls, which can take minutes"
        )
        started = time.perf_counter()
        found = throughput.measure_attention_cost(
            llm, throughput.probe_length(rounded, llm.context_window)
        )
        self.note(
            f"measured {name} at {found.length} tokens in {time.perf_counter() - started:.0f} s"
        )
        throughput.store_long_attention(key, found)
        return found

    def embed_rate(self) -> tuple[float, float, str]:
        """Texts per second of the embedder, its load time, and where they come from."""
        name = self.models.spec.embedder
        key = throughput.rates_key(name, "embedder", self.models.spec.device)
        found = throughput.cached_rates(key)
        if found is not None:
            found = found.at_load(throughput.current_load())
            return found.prefill, found.load_s, f"measured here {found.measured_at} (cached)"
        self.note(f"measuring the embedder {name} once (cached for later)")
        started = time.perf_counter()
        embedder = self.models.embedder
        loaded = time.perf_counter() - started
        texts = [f"{i}: " + throughput._PROBE * 2 for i in range(EMBED_PROBE)]
        started = time.perf_counter()
        embedder.encode(texts)
        rate = EMBED_PROBE / max(time.perf_counter() - started, 1e-6)
        rates = throughput.Rates(
            prefill=rate,
            decode=0.0,
            batch_decode=0.0,
            load_s=loaded,
            load_avg=throughput.current_load(),
            measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        )
        throughput.store_rates(key, rates)
        return rate, loaded, "measured here now"


def _with_source(rates: throughput.Rates, source: str) -> throughput.Rates:
    from dataclasses import replace

    return replace(rates, source=source)


def estimate_index(
    files: Sequence[InputFile],
    out: str | Path,
    methods: Sequence[str],
    models: Models,
    sets: ParsedSets = NO_SETS,
    *,
    price: Price | None = None,
    warn: Callable[[str], None] | None = None,
    note: Callable[[str], None] | None = None,
    extract: ExtractOptions | None = None,
    timed: bool = True,
    force: bool = False,
) -> tuple[dict[str, Any], list[MethodBill]]:
    """Every method's bill for indexing ``files`` (expanded where the paths were given)
    into ``out``; nothing is written and no
    LLM call is made for the work (``timed`` measures rates the cache lacks; ``force``:
    builds already up to date are counted as rebuilt, as ``--force`` rebuilds them)."""
    from lcr.methods import get_method
    from lcr.pipeline import load_documents
    from lcr.pipeline.plans import build_settings, expand_methods, require
    from lcr.store.documents import join_documents
    from lcr.text.tokens import count_tokens

    names = expand_methods(methods)
    plans = []
    for n in names:
        method = get_method(n)
        settings = build_settings(method, sets)
        needs = method.build_needs(settings)
        models = require(models, needs, f"building {n}")  # one binding for them all
        plans.append((method, settings, needs))
    docs = load_documents(files, warn=warn, options=extract)
    source, joined = join_documents(docs)
    documents = [(i, d.start, source[d.start : d.end]) for i, d in enumerate(joined)]
    existing = {} if force else _existing(out, [d.sha256 for d in docs])
    estimator = Estimator(models, note or (lambda message: None))
    bills = [
        _bill(estimator, method, settings, needs, documents, existing, price, timed)
        for method, settings, needs in plans
    ]
    for bill in bills:
        _note_cache(bill, Path(out))
    summary = {
        "documents": len(docs),
        "characters": len(source),
        "tokens": count_tokens(source),
        "index": str(out),
    }
    return summary, bills


CHEAP_SECONDS_PER_TOKEN = 5e-6  # bm25 3 s, mixpr 3.7 s per 1M tokens (docs/speed.md)


def _existing(out: str | Path, digests: list[str]) -> dict[str, Any]:
    """The builds of an index already at ``out`` over the same documents (up to date
    builds cost nothing); empty when there is none."""
    from lcr.store import Index

    if not Path(out).is_dir():
        return {}
    try:
        index = Index.open(out)
        if index.source_digests() != digests:
            return {}
        return {name: e for name, e in index.methods.items() if name not in index.damaged}
    except LcrError:
        return {}


def _note_cache(bill: MethodBill, out: Path) -> None:
    """Replies an index's cache already holds are free to a build (resumed, or rebuilt
    with --force): the estimate counts every call, so it says so."""
    path = out / "cache" / f"{bill.method}.jsonl"
    if bill.up_to_date or bill.work.llm is None or not path.is_file():
        return
    try:
        with path.open("rb") as fh:
            held = sum(1 for _ in fh)
    except OSError:
        return
    if held:
        bill.sources["cache"] = (
            f"the index's cache already holds {held} paid replies of {bill.method}: the build "
            "reuses those whose prompt is unchanged, so it may pay less than estimated"
        )


def _bill(
    est: Estimator,
    method: Any,
    settings: config.Settings,
    needs: Any,
    documents: list[tuple[int, int, str]],
    existing: dict[str, Any],
    price: Price | None,
    timed: bool,
) -> MethodBill:
    from lcr.methods.base import EstimateContext
    from lcr.pipeline import _same_models, _same_settings, build_models_record
    from lcr.pipeline.plans import bind

    est = dataclasses.replace(est, models=bind(est.models, needs))  # the scorer it names
    models = est.models
    role = Role.LLM if needs.uses_llm else Role.SCORER if needs.scorer else None
    backend = models.backend_of(role) if role is not None else None
    entry = existing.get(method.name)
    if (
        entry is not None
        and _same_settings(method, entry.settings, settings)
        and _same_models(entry.models, build_models_record(needs, models))
    ):
        return MethodBill(
            method.name,
            BuildEstimate(basis={"llm": "up to date in the index: nothing to build"}),
            up_to_date=True,
            seconds=Range(0, 0),
            memory_bytes=0,
        )
    model = models.model_id(role) if role is not None else ""
    observed = (
        throughput.observed(method.name, model, str(backend), models.spec.base_url)
        if role is not None
        else {}
    )
    ctx = EstimateContext(
        documents=documents,
        settings=settings,
        tokenizer=lambda name: est.tokenizer(name, str(backend)),
        llm=models.spec.llm,
        observed=observed,
    )
    work = method.estimate(ctx)
    bill = MethodBill(method.name, work, backend=backend)
    bill.disk_bytes = disk_bytes(work, ctx.embedder_dim)
    bill.memory_bytes = _memory(models, needs, backend, role)
    if work.llm is not None:
        tok = est.tokenizers.get((work.llm.model, str(backend)))
        approximate = bool(getattr(tok, "approximate", False))
        bill.sources["tokens"] = (
            "approximate: lcr's model-free count + 10% (no local tokenizer for this model)"
            if approximate
            else f"{work.llm.model}'s own tokenizer and chat template ({backend})"
        )
        if price is not None:
            bill.cost = price.of(work.llm)
            bill.sources["cost"] = (
                f"{price.prompt:g} per 1M prompt tokens, {price.completion:g} per 1M reply tokens"
            )
    if timed:
        _time(est, bill, role, backend, sum(len(t) for _, _, t in documents))
    return bill


def _memory(models: Models, needs: Any, backend: str | None, role: Role | None) -> int | None:
    total = 0
    parts: list[int | None] = []
    if role is not None:
        parts.append(ram_of(models.model_id(role), backend))
    if needs.embedder:
        parts.append(ram_of(models.spec.embedder, "transformers"))
    if any(p is None for p in parts):
        return None
    for p in parts:
        total += int(p or 0)
    return total


def _time(
    est: Estimator, bill: MethodBill, role: Role | None, backend: str | None, chars: int
) -> None:
    """Wall time: the LLM's work at its rates, the embedder's passes, the model loads."""
    work = bill.work
    own = chars / 4 * CHEAP_SECONDS_PER_TOKEN
    own += work.setup_cpu_s / throughput.load_share(throughput.current_load())
    seconds = Range(own, own)
    bill.sources["time"] = "lcr's rate for work without a model (docs/speed.md)"
    if work.setup_cpu_s:
        bill.sources["time"] += (
            f", and {work.setup_cpu_s:g} s of CPU a first build pays (imports) at the load now"
        )
    if work.llm is not None and role is not None and backend is not None:
        rates = est.llm_rates(role, backend)
        if rates is None:
            bill.sources["time"] = (
                "unknown: no build has run against this server yet (its rates are recorded "
                "when one does)"
            )
            return
        bill.rates = rates
        long = None
        if work.llm.kind == "attention" and work.llm.probe_length > 0:
            long = est.long_attention(role, backend, work.llm.probe_length)
        bill.long_attention = long
        on_gpu = est.device(role).startswith("cuda")
        seconds = seconds + llm_seconds(work.llm, rates, long, on_gpu=on_gpu)
        seconds = seconds + Range.exact(rates.load_s)
        bill.sources["time"] = f"LLM rates {rates.source}"
        share = work.llm.decode_share_on_gpu
        if on_gpu and share is not None and share.expected < 1:
            bill.sources["time"] += (
                f"; decoding {share.expected:.2g} of the calls' steps: batches sent together "
                "share them (a group of four in one batch's time on an H200), at most "
                "one at a time"
            )
        if long is not None:
            bill.sources["time"] += (
                f"; with attention weights at {long.length} prompt tokens (the batches' "
                f"length) {long.prefill:.0f} prompt tokens/s and {long.decode:.1f} decoded, "
                f"measured {long.measured_at} at load {long.load_avg:.1f}"
            )
    if work.embedder_texts.high > 0:
        rate, load, source = est.embed_rate()
        seconds = seconds + work.embedder_texts.scaled(1 / max(rate, 1e-9)) + Range.exact(load)
        bill.sources["time"] += f"; embedder {rate:.0f} texts/s, {source}"
    bill.seconds = seconds


@dataclass
class Rebuild:
    """One built method of an index: what rebuilding it from scratch would cost, beside
    what its last build paid (``lcr info --estimate``)."""

    bill: MethodBill
    last_usage: dict[str, Any]
    last_seconds: float
    built_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate": self.bill.to_json(),
            "last_build": {
                "llm_usage": self.last_usage,
                "seconds": self.last_seconds,
                "built_at": self.built_at,
            },
        }


def estimate_rebuilds(index: Any, note: Callable[[str], None] | None = None) -> dict[str, Rebuild]:
    """Each built method of ``index`` estimated from scratch, with the settings and models
    it was built with."""
    from dataclasses import replace

    from lcr.methods import get_method
    from lcr.models.spec import ModelSpec
    from lcr.pipeline import require

    source = index.source
    documents = [(i, d.start, source[d.start : d.end]) for i, d in enumerate(index.documents)]
    out: dict[str, Rebuild] = {}
    for name, entry in index.methods.items():
        method = get_method(name)
        settings = method.build_settings.from_stored(entry.settings)
        recorded = entry.models
        spec = ModelSpec()
        spec = replace(
            spec,
            llm=recorded.get("llm", spec.llm),
            embedder=recorded.get("embedder", spec.embedder),
        )
        models = Models(spec=spec)
        needs = method.build_needs(settings)
        models = require(models, needs, f"estimating {name}")
        estimator = Estimator(models, note or (lambda message: None))
        bill = _bill(estimator, method, settings, needs, documents, {}, None, True)
        usage = entry.stats.get("llm_usage")
        out[name] = Rebuild(
            bill,
            dict(usage) if isinstance(usage, dict) else {},
            entry.build_seconds,
            entry.built_at,
        )
    return out
