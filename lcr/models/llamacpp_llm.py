"""The llama.cpp backend: a quantised GGUF model run in process through llama-cpp-python.

On a CPU this is the fast, small way to run lcr's models: the presets are Q4_K_M
GGUF files, which llama.cpp computes with as they are (no dequantised fp32 copy),
about 6x smaller than transformers in fp32, decoding 2.4x faster (bench/README.md).

It implements the :class:`lcr.models.base.LLM` protocol on llama.cpp's own
context API rather than on llama-cpp-python's high-level ``Llama`` class, because
lcr needs three things that class does not give:

- **prefix reuse**: sequence 0 of the KV cache holds the tokens of the last
  call; the next call keeps the longest common prefix and encodes only the rest,
  so an agent's calls that share instructions, or a yes/no check after the same
  context, pay for the shared part once (``Usage.cached_tokens`` counts it);
- **batched generation**: up to ``parallel`` conversations decode together, one
  token per sequence per step, their common prefix encoded once and shared by
  every sequence of the (unified) KV cache;
- **log-probabilities at every position** of a continuation, read straight from
  the logits buffer, with the context encoded once and shared by a batch of
  continuations (LightPAL's ContextScore).

Attention weights are not exposed by llama.cpp: PECAN stays on transformers.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lcr.errors import ModelError
from lcr.evidence import Usage
from lcr.models.base import (
    ALL_CAPABILITIES,
    Capability,
    ContinuationScore,
    Generation,
    Message,
    OnText,
    answer_first_tokens,
    pairs_by_context_tail,
)
from lcr.models.llamacpp_setup import (
    ChatTemplate,
    close_at_exit,
    quiet_llama_logs,
    refuse_amx_build,
)
from lcr.models.llamacpp_threads import ThreadGovernor, default_threads, fixed_threads, usable_cores
from lcr.models.machine import llamacpp_rebuild_command
from lcr.models.special import defang_messages
from lcr.models.text_stream import TextPieces
from lcr.models.token_math import common_prefix as _common_prefix
from lcr.models.token_math import common_prefix_all as _common_prefix_all
from lcr.models.token_math import logsumexp as _logsumexp
from lcr.models.token_math import logsumexp_f32 as _logsumexp_f32
from lcr.progress import NULL_PROGRESS, Progress, TokenMeter

DEFAULT_CONTEXT = 16384  # tokens of KV cache; the presets were trained on 32k
DEFAULT_BATCH = 512  # tokens per llama_decode call
DEFAULT_PARALLEL = 4  # sequences decoded together by generate_batch / continuation scoring
MICRO_BATCH = 256  # tokens per compute step: the compute buffer is 150 MB, not 300 (1.5B)


class LlamaCppLLM:
    """A GGUF chat model run with llama.cpp; see the module docstring."""

    backend = "llamacpp"
    capabilities: frozenset[Capability] = ALL_CAPABILITIES - {Capability.ATTENTION}

    def __init__(
        self,
        model: Any,
        context: Any,
        *,
        model_id: str,
        n_ctx: int,
        n_batch: int,
        parallel: int,
        threads: int,
        device: str = "cpu",
        governor: ThreadGovernor | None = None,
    ) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._model = model  # llama_cpp._internals.LlamaModel
        self._ctx = context  # llama_cpp._internals.LlamaContext
        self.model_id = model_id
        self.device = device
        self.threads = threads
        self._governor = governor  # None: a fixed count (LCR_THREADS, a GPU, or asked for)
        self.progress: Progress = NULL_PROGRESS  # the run's, set by lcr.models.loading
        self.usage = Usage()
        self.parallel = parallel
        self._n_ctx = n_ctx
        self._n_batch = n_batch
        self._vocab = model.vocab
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        from llama_cpp._internals import LlamaBatch

        self._batch = LlamaBatch(n_tokens=n_batch, embd=0, n_seq_max=parallel, verbose=False)
        self._memory = llama_cpp.llama_get_memory(context.ctx)
        self._seq0: list[int] = []  # tokens whose KV sits in sequence 0
        self._seq0_logits: np.ndarray | None = None  # logits after the last of them
        self._first_tokens: dict[str, frozenset[int]] = {}
        self._template = self._load_template()
        self._rng = np.random.default_rng(0)
        close_at_exit(self)

    # ------------------------------------------------------------------ loading

    @classmethod
    @quiet_llama_logs()
    def load(
        cls,
        path: str | Path,
        *,
        model_id: str,
        context_window: int | None = None,
        device: str = "cpu",
        parallel: int = DEFAULT_PARALLEL,
        n_batch: int = DEFAULT_BATCH,
        threads: int | None = None,
    ) -> LlamaCppLLM:
        """Load a GGUF file as it is (memory-mapped, quantised), llama.cpp's logs quiet."""
        import llama_cpp
        from llama_cpp._internals import LlamaContext, LlamaModel

        fixed_threads()  # a bad LCR_THREADS is refused before anything loads
        gpu = device.startswith("cuda")
        if gpu and not llama_cpp.llama_supports_gpu_offload():
            raise ModelError(
                "this llama-cpp-python build has no GPU support; reinstall it with: "
                f"{llamacpp_rebuild_command(cuda=True)} (or use --device cpu or --backend "
                "transformers)"
            )
        if not gpu:  # AMX kernels only run when layers stay on the CPU
            refuse_amx_build()
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = -1 if gpu else 0
        # read into memory rather than mapped: weights that llama.cpp repacks for its
        # fast kernels are then held once, not twice (2.0 GB -> 1.5 GB for the 1.5B model)
        mparams.load_mode = llama_cpp.LLAMA_LOAD_MODE_NONE
        try:
            model = LlamaModel(path_model=str(path), params=mparams, verbose=False)
        except (ValueError, OSError) as exc:
            raise ModelError(f"llama.cpp cannot load {path}: {exc}") from None
        trained = int(model.n_ctx_train()) or DEFAULT_CONTEXT
        n_ctx = min(context_window or DEFAULT_CONTEXT, trained)
        n_threads = threads or default_threads()
        governor = (
            ThreadGovernor(n_threads, usable_cores())
            if threads is None and fixed_threads() is None and not gpu
            else None
        )
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = min(n_batch, MICRO_BATCH)
        # the KV cache stays f16: an 8-bit one saves memory but slows prefill
        # (docs/speed.md, "Threads")
        cparams.n_seq_max = parallel
        cparams.kv_unified = True  # every sequence may use all of n_ctx; shared prefixes
        cparams.n_outputs_max = 0  # logits for as many positions as a batch holds
        cparams.n_outputs_max_per_seq = 0
        cparams.n_threads = n_threads
        cparams.n_threads_batch = n_threads
        cparams.no_perf = True
        try:
            context = LlamaContext(model=model, params=cparams, verbose=False)
        except (ValueError, OSError) as exc:
            raise ModelError(f"llama.cpp cannot create a context for {path}: {exc}") from None
        return cls(
            model,
            context,
            model_id=model_id,
            n_ctx=n_ctx,
            n_batch=n_batch,
            parallel=parallel,
            threads=n_threads,
            device=device,
            governor=governor,
        )

    def _load_template(self) -> ChatTemplate | None:
        meta = self._model.metadata()
        source = meta.get("tokenizer.chat_template")
        if not source:
            return None
        bos = self._piece(self._lib.llama_vocab_bos(self._vocab))
        eos = self._piece(self._lib.llama_vocab_eos(self._vocab))
        return ChatTemplate(source, bos, eos)

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return (
            bytes(self._model.token_to_piece(token, special=True))
            .rstrip(b"\0")
            .decode("utf-8", errors="replace")
        )

    @quiet_llama_logs()
    def close(self) -> None:
        """Free the context and the model now rather than at garbage collection."""
        self._batch.close()
        self._ctx.close()
        self._model.close()

    def __del__(self) -> None:
        # llama.cpp logs as it frees a context: freed here (or at exit, see
        # close_at_exit), its lines stay quiet rather than reaching the host's callback
        with contextlib.suppress(Exception):
            self.close()

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
        return [int(t) for t in self._model.tokenize(text.encode("utf-8"), False, False)]

    def render(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the chat-templated conversation, ending with the assistant prompt."""
        if not messages:
            raise ModelError("an LLM call needs at least one message")
        # the template's own control tokens are parsed; a message's text never is
        messages = defang_messages(messages, self.special_texts)
        if self._template is not None:
            text = self._template.render(messages)
        else:
            text = "\n\n".join(m["content"] for m in messages) + "\n\n"
        return [int(t) for t in self._model.tokenize(text.encode("utf-8"), False, True)]

    @functools.cached_property
    def special_texts(self) -> frozenset[str]:
        """The text of every token the tokenizer matches as a special token (control,
        user-defined): what a message's content must never spell whole."""
        lib = self._lib
        kinds = (
            lib.LLAMA_TOKEN_ATTR_CONTROL
            | lib.LLAMA_TOKEN_ATTR_USER_DEFINED
            | lib.LLAMA_TOKEN_ATTR_UNKNOWN
        )
        found = set()
        for token in range(self._n_vocab):
            if int(lib.llama_vocab_get_attr(self._vocab, token)) & kinds:
                piece = self._piece(token)
                if piece:
                    found.add(piece)
        return frozenset(found)

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
        prompt = self._fit(self.render(messages))
        rng = self._rng if seed is None else np.random.default_rng(seed)
        logits, reused = self._extend_seq0(prompt)
        budget = max(1, min(max_new_tokens, self._n_ctx - len(prompt)))
        decoder = _Decoder(self, budget, stop)
        pieces = TextPieces(on_text, stop) if on_text is not None else None
        meter = TokenMeter(self.progress, f"generating with {self.model_id}", budget)
        try:
            while True:
                token = self._pick(logits, temperature, rng)
                if not decoder.accept(token):
                    break
                if pieces is not None:
                    pieces.update(decoder.text())
                meter.step()
                logits = self._decode_one(token)
        finally:
            meter.finish()
        gen = decoder.result(len(prompt))
        if pieces is not None:
            pieces.finish(gen.text)
        self.usage.add(len(prompt), gen.completion_tokens, cached_tokens=reused)
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
        """Up to ``parallel`` conversations decoded together, their common prefix shared.

        ``on_result(i, generation)`` is called as each one finishes, so a caller
        can store what it paid for before the rest of the batch is done.
        """
        prompts = [self._fit(self.render(c)) for c in conversations]
        results: list[Generation | None] = [None] * len(prompts)
        if self.parallel < 2 or len(prompts) < 2:
            for i, conv in enumerate(conversations):
                gen = self.generate(
                    conv, max_new_tokens=max_new_tokens, stop=stop, temperature=temperature
                )
                results[i] = gen
                if on_result is not None:
                    on_result(i, gen)
            return [g for g in results if g is not None]
        for group in self._groups(prompts, max_new_tokens):
            members = [(i, prompts[i]) for i in group]
            for i, gen in self._generate_group(members, max_new_tokens, stop, temperature):
                results[i] = gen
                if on_result is not None:
                    on_result(i, gen)
        return [g for g in results if g is not None]

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        """P(yes) / (P(yes) + P(no)) for the first token of the answer, from the logits.

        Both spellings of each answer (``"Yes"``, ``" Yes"``) count, summed.
        """
        yes_ids, no_ids = self._first_token_ids(yes), self._first_token_ids(no)
        if yes_ids & no_ids:
            raise ModelError(f"the answers {yes!r} and {no!r} start with the same token")
        prompt = self._fit(self.render(messages))
        logits, reused = self._extend_seq0(prompt)
        self.usage.add(len(prompt), 0, cached_tokens=reused)
        wide = logits.astype(np.float64)
        lse_yes = _logsumexp(wide[sorted(yes_ids)])
        lse_no = _logsumexp(wide[sorted(no_ids)])
        return float(1.0 / (1.0 + np.exp(lse_no - lse_yes)))

    def continuation_logprob(self, context: str, continuation: str) -> float:
        """Sum of log P(continuation | context); a long context loses its beginning."""
        cont = self.encode(continuation)
        if not cont:
            return 0.0
        if len(cont) >= self._n_ctx:
            raise ModelError(
                f"a continuation of {len(cont)} tokens does not fit the context window of "
                f"{self.model_id} ({self._n_ctx} tokens)"
            )
        ctx = self.encode(context) or [self._start_token()]
        ctx = ctx[-(self._n_ctx - len(cont)) :]
        return self._score_group(ctx, [cont])[0].logprob

    def continuation_logprobs(
        self,
        context: str,
        continuations: Sequence[str],
        *,
        max_tokens: int | None = None,
    ) -> list[ContinuationScore]:
        """Every continuation scored after ``context``, encoded once and shared.

        Pairs are cut to ``max_tokens`` by :func:`split_token_budget`; pairs
        keeping the same context tail share it: one encoding, then batched
        decodes of up to ``parallel - 1`` continuations at a time.
        """
        ctx_ids = self.encode(context) or [self._start_token()]
        budget = min(max_tokens or self._n_ctx, self._n_ctx)
        scores: list[ContinuationScore] = [ContinuationScore(0.0, 0)] * len(continuations)
        encoded = [self.encode(text) for text in continuations]
        by_context = pairs_by_context_tail(len(ctx_ids), encoded, budget)
        for n_ctx, items in by_context.items():
            got = self._score_group(ctx_ids[-n_ctx:], [c for _, c in items])
            for (i, _), score in zip(items, got, strict=True):
                scores[i] = score
        return scores

    # ----------------------------------------------------------- the KV cache

    def _extend_seq0(self, tokens: list[int]) -> tuple[np.ndarray, int]:
        """Logits after ``tokens`` in sequence 0, and how many leading tokens were reused.

        Only what differs from the tokens already there is encoded.
        """
        keep = _common_prefix(self._seq0, tokens)
        if keep == len(tokens) == len(self._seq0) and self._seq0_logits is not None:
            return self._seq0_logits, keep
        keep = min(keep, len(tokens) - 1)  # the last token is decoded again for its logits
        self._lib.llama_memory_seq_rm(self._memory, 0, keep, -1)
        self._seq0 = tokens[:keep]
        self._seq0_logits = None
        rows = self._decode([(t, keep + j, 0) for j, t in enumerate(tokens[keep:])], last_only=True)
        self._seq0 = list(tokens)
        self._seq0_logits = rows[-1]
        return rows[-1], keep

    def _decode_one(self, token: int) -> np.ndarray:
        """Append one token to sequence 0; the logits after it."""
        rows = self._decode([(token, len(self._seq0), 0)], last_only=True)
        self._seq0.append(token)
        self._seq0_logits = rows[-1]
        return rows[-1]

    @quiet_llama_logs()
    def _decode(
        self,
        entries: Sequence[tuple[int, int, int]],
        *,
        last_only: bool = False,
        outputs: Sequence[bool] | None = None,
        consume: Callable[[int, np.ndarray], None] | None = None,
    ) -> list[np.ndarray]:
        """Run ``(token, position, sequence)`` entries through the model in batches.

        Logits are kept for the last entry (``last_only``) or for the entries
        flagged in ``outputs``; with ``consume`` each kept row is handed over as
        ``consume(entry index, logits view)`` instead of being copied.
        """
        kept: list[np.ndarray] = []
        batch = self._batch.batch
        total = len(entries)
        for start in range(0, total, self._n_batch):
            self._follow_load()
            chunk = entries[start : start + self._n_batch]
            batch.n_tokens = len(chunk)
            wanted: list[int] = []
            for j, (token, pos, seq) in enumerate(chunk):
                batch.token[j] = token
                batch.pos[j] = pos
                batch.n_seq_id[j] = 1
                batch.seq_id[j][0] = seq
                if last_only:
                    flag = start + j == total - 1
                else:
                    flag = bool(outputs[start + j]) if outputs is not None else False
                batch.logits[j] = flag
                if flag:
                    wanted.append(j)
            code = self._lib.llama_decode(self._ctx.ctx, batch)
            if code != 0:
                self.reset_cache()
                raise ModelError(
                    f"llama.cpp could not decode a batch (code {code}); the prompt may be "
                    f"too long for the context window of {self._n_ctx} tokens"
                )
            for j in wanted:
                ptr = self._lib.llama_get_logits_ith(self._ctx.ctx, j)
                row = np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))
                if consume is not None:
                    consume(start + j, row)
                else:
                    kept.append(row.copy())
        return kept

    def _follow_load(self) -> None:
        """Fewer threads when other work takes a core, all of them again when it stops."""
        if self._governor is None:
            return
        wanted = self._governor.check()
        if wanted is not None:
            self._lib.llama_set_n_threads(self._ctx.ctx, wanted, wanted)
            self.threads = wanted

    def reset_cache(self) -> None:
        """Forget every cached prompt, so the next call pays its whole prompt again
        (benchmarks that measure a full pass, and tests of the reuse itself)."""
        self._lib.llama_memory_clear(self._memory, True)
        self._seq0 = []
        self._seq0_logits = None

    # ------------------------------------------------------ batched generation

    def _groups(self, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        """Prompts in order, in groups of at most ``parallel`` whose KV fits the context."""
        groups: list[list[int]] = []
        current: list[int] = []
        used = 0
        for i, p in enumerate(prompts):
            need = len(p) + max_new_tokens
            if current and (len(current) == self.parallel or used + need > self._n_ctx):
                groups.append(current)
                current, used = [], 0
            current.append(i)
            used += need
        if current:
            groups.append(current)
        return groups

    def _generate_group(
        self,
        group: list[tuple[int, list[int]]],
        max_new_tokens: int,
        stop: Sequence[str],
        temperature: float,
    ) -> list[tuple[int, Generation]]:
        """Decode one group together; sequence k holds the group's k-th conversation.

        The group's common prefix is encoded once in sequence 0 (or found there
        from the call before) and shared with the other sequences' cells.
        """
        prompts = [p for _, p in group]
        shared = min(_common_prefix_all(prompts), min(len(p) for p in prompts) - 1)
        reused = 0
        if shared > 0:
            _, reused = self._extend_seq0(prompts[0][:shared])
        for k in range(1, len(group)):
            self._lib.llama_memory_seq_rm(self._memory, k, 0, -1)
            if shared:
                self._lib.llama_memory_seq_cp(self._memory, 0, k, 0, shared)
        self._lib.llama_memory_seq_rm(self._memory, 0, shared, -1)
        self._seq0 = []  # sequence 0 now diverges from any cached prefix
        self._seq0_logits = None
        entries: list[tuple[int, int, int]] = []
        flags: list[bool] = []
        for k, p in enumerate(prompts):
            entries.extend((t, shared + j, k) for j, t in enumerate(p[shared:]))
            flags.extend([False] * (len(p) - shared - 1) + [True])
        logits = dict(enumerate(self._decode(entries, outputs=flags)))
        decoders = [
            _Decoder(self, max(1, min(max_new_tokens, self._n_ctx - len(p))), stop) for p in prompts
        ]
        positions = [len(p) for p in prompts]
        finished: list[tuple[int, Generation]] = []
        active = list(range(len(group)))
        total = sum(d._budget for d in decoders)
        meter = TokenMeter(self.progress, f"generating with {self.model_id}", total)
        while active:
            step: list[tuple[int, int, int]] = []
            still: list[int] = []
            for k in active:
                token = self._pick(logits[k], temperature, self._rng)
                if decoders[k].accept(token):
                    step.append((token, positions[k], k))
                    positions[k] += 1
                    still.append(k)
                    continue
                gen = decoders[k].result(len(prompts[k]))
                cached = shared if k else reused
                self.usage.add(len(prompts[k]), gen.completion_tokens, cached_tokens=cached)
                finished.append((group[k][0], gen))
            if step:
                meter.step(len(step))
                rows = self._decode(step, outputs=[True] * len(step))
                logits = dict(zip(still, rows, strict=True))
            active = still
        meter.finish()
        for k in range(len(group)):
            self._lib.llama_memory_seq_rm(self._memory, k, 0, -1)
        return finished

    # --------------------------------------------------- continuation scoring

    def _score_group(self, prefix: list[int], conts: list[list[int]]) -> list[ContinuationScore]:
        """log P(cont | prefix) for each; the prefix's cells (sequence 0) shared by all."""
        last, reused = self._extend_seq0(prefix)
        base = len(prefix)
        first_lp = last.astype(np.float64) - _logsumexp(last.astype(np.float64))
        lanes = max(1, self.parallel - 1)
        scores: list[ContinuationScore] = []
        for start in range(0, len(conts), lanes):
            group = conts[start : start + lanes]
            entries: list[tuple[int, int, int]] = []
            targets: list[int] = []
            owners: list[int] = []
            seqs = [k + 1 if self.parallel > 1 else 0 for k in range(len(group))]
            for k, cont in enumerate(group):
                if seqs[k]:  # a lane of its own, sharing the prefix's cells
                    self._lib.llama_memory_seq_rm(self._memory, seqs[k], 0, -1)
                    self._lib.llama_memory_seq_cp(self._memory, 0, seqs[k], 0, base)
                for j, t in enumerate(cont[:-1]):
                    entries.append((t, base + j, seqs[k]))
                    targets.append(cont[j + 1])
                    owners.append(k)
            sums = [float(first_lp[cont[0]]) for cont in group]

            if entries:
                self._add_logprobs(entries, targets, owners, sums)
            for k, cont in enumerate(group):
                if seqs[k]:
                    self._lib.llama_memory_seq_rm(self._memory, seqs[k], 0, -1)
                else:  # roll sequence 0 back to the prefix
                    self._lib.llama_memory_seq_rm(self._memory, 0, base, -1)
                scores.append(ContinuationScore(sums[k], len(cont)))
                # the prefix is encoded once; every later continuation reads it from the cache
                cached = reused if start + k == 0 else base
                self.usage.add(base + len(cont) - 1, 0, cached_tokens=cached)
        return scores

    def _add_logprobs(
        self,
        entries: list[tuple[int, int, int]],
        targets: list[int],
        owners: list[int],
        sums: list[float],
    ) -> None:
        """Decode ``entries`` and add log P(target) at each into ``sums[owner]``."""

        def consume(index: int, row: np.ndarray) -> None:
            sums[owners[index]] += float(row[targets[index]]) - _logsumexp_f32(row)

        self._decode(entries, outputs=[True] * len(entries), consume=consume)

    # ---------------------------------------------------------------- helpers

    def _pick(self, logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
        if temperature <= 0:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / temperature
        z -= z.max()
        p = np.exp(z)
        p /= p.sum()
        return int(rng.choice(len(p), p=p))

    def _is_end(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    def _token_bytes(self, token: int) -> bytes:
        return bytes(self._model.token_to_piece(token, special=False)).rstrip(b"\0")

    def _start_token(self) -> int:
        for token in (
            self._lib.llama_vocab_bos(self._vocab),
            self._lib.llama_vocab_eos(self._vocab),
        ):
            if int(token) >= 0:
                return int(token)
        raise ModelError(f"{self.model_id} has neither a BOS nor an EOS token")

    def _first_token_ids(self, word: str) -> frozenset[int]:
        if word not in self._first_tokens:
            try:
                self._first_tokens[word] = answer_first_tokens(self.encode, word)
            except ValueError as exc:
                raise ModelError(str(exc)) from None
        return self._first_tokens[word]

    def _fit(self, ids: list[int]) -> list[int]:
        if len(ids) >= self._n_ctx:
            raise ModelError(
                f"a prompt of {len(ids)} tokens does not fit the context window of "
                f"{self.model_id} ({self._n_ctx} tokens; --context-window sets it for the "
                "llama.cpp backend)"
            )
        return ids


class _Decoder:
    """One sequence's generated tokens: end tokens, the token budget and stop strings."""

    def __init__(self, llm: LlamaCppLLM, budget: int, stop: Sequence[str]) -> None:
        self._llm = llm
        self._budget = budget
        self._stop = [s for s in stop if s]
        self._pieces: list[bytes] = []
        self.count = 0  # tokens generated (and paid for), an end token included

    def accept(self, token: int) -> bool:
        """Take one generated token; False when generation stops with it."""
        self.count += 1
        if self._llm._is_end(token):
            return False
        self._pieces.append(self._llm._token_bytes(token))
        if self._stop and any(s in self.text() for s in self._stop):
            return False
        return self.count < self._budget

    def text(self) -> str:
        return b"".join(self._pieces).decode("utf-8", errors="ignore")

    def result(self, prompt_tokens: int) -> Generation:
        text = self.text()
        cut = min((p for s in self._stop if (p := text.find(s)) != -1), default=len(text))
        return Generation(
            text=text[:cut], prompt_tokens=prompt_tokens, completion_tokens=self.count
        )
