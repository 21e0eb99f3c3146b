"""The transformers backend's core: a Hugging Face causal chat model run in process.

:class:`TransformersCore` loads the model and implements the
:class:`lcr.models.base.LLM` protocol (generation, yes/no and log-probabilities
read from logits, continuation scoring from a prefix's KV cache computed once).
Attention capture, which only PECAN needs, is added on top by
:class:`lcr.models.transformers_llm.TransformersLLM`, the class lcr loads.

Computation is fp32 on CPU (bf16 is ~10x slower on CPUs without AVX-512) and
bf16/fp16 on CUDA; 4-/8-bit loading goes through bitsandbytes on CUDA only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from lcr.errors import ModelError, UsageError
from lcr.evidence import Usage
from lcr.models import transformers_decode as decoding
from lcr.models.base import (
    ContinuationScore,
    Generation,
    Message,
    OnText,
    answer_first_tokens,
    pairs_by_context_tail,
)
from lcr.models.llamacpp_threads import (
    ThreadGovernor,
    default_threads,
    fixed_threads,
    usable_cores,
)
from lcr.models.special import defang_messages
from lcr.models.special import tokenizer_special_texts as tokenizer_special_texts
from lcr.models.text_stream import TextPieces, cut_at_stop
from lcr.models.token_math import length_batches as _length_batches
from lcr.models.transformers_decode import GPU_BATCH_FALLBACK, StepWatch
from lcr.progress import NULL_PROGRESS, Progress, TokenMeter

if TYPE_CHECKING:
    import torch

DEFAULT_CONTEXT_CAP = 32768
QUANTIZE_CHOICES = ("4bit", "8bit")
DEVICE_CHOICES = ("auto", "cpu", "cuda")
# continuation scoring: padded tokens per batch, and positions projected to the
# vocabulary at a time (bounds memory: 128 x 150k vocabulary x 8 bytes = 150 MB)
_SCORE_BATCH_TOKENS = 4096
# ... and the prefix's KV cache, repeated for every row of a batch, at most this many
# bytes (a 7B scorer's 4096-token prefix repeated 8 times would take ~23 GB)
_SCORE_BATCH_KV_BYTES = 2 * 2**30
_SCORE_CHUNK = 128


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch can use a GPU, else ``cpu``; ``cuda`` without one fails."""
    from lcr.models import machine

    dev = (device or "auto").strip().lower()
    if dev == "auto":
        return "cuda" if machine.current().gpu else "cpu"
    if dev == "cpu":
        return "cpu"
    if dev == "cuda" or dev.startswith("cuda:"):
        m = machine.current()
        if not m.gpu:
            why = (
                f"torch {m.torch_version} is a CPU build; install a CUDA one: "
                f"{machine.cuda_torch_command(m.torch_version)}"
                if m.gpu_present and m.torch_cuda is None
                else "no CUDA GPU is available (run lcr doctor)"
            )
            raise ModelError(f"--device {device} asked for, but {why}")
        return dev
    raise UsageError(f"unknown device {device!r}; choose one of {', '.join(DEVICE_CHOICES)}")


def check_quantize(quantize: str | None, device: str) -> None:
    """Refuse 4-/8-bit loading where bitsandbytes cannot do it, before any loading starts."""
    from lcr.models import machine

    if quantize is None:
        return
    if quantize not in QUANTIZE_CHOICES:
        raise UsageError(
            f"unknown quantization {quantize!r}; choose one of {', '.join(QUANTIZE_CHOICES)}"
        )
    if not device.startswith("cuda"):
        raise ModelError(
            f"--quantize {quantize} needs a CUDA GPU (bitsandbytes); on CPU leave it out "
            "(the model runs in fp32)"
        )
    m = machine.current()
    if m.bitsandbytes_version is None:
        raise ModelError(f"--quantize {quantize} needs bitsandbytes: pip install 'lcr[gpu]'")
    if not m.bitsandbytes_ok:
        raise ModelError(
            f"--quantize {quantize} needs bitsandbytes {machine.BITSANDBYTES_MIN} or newer "
            f"(installed: {m.bitsandbytes_version}): {machine.BITSANDBYTES_COMMAND}"
        )


def compute_dtype(device: str) -> torch.dtype:
    """fp32 on CPU; on CUDA bf16 where the GPU has it in hardware (Ampere and newer),
    else fp16 (torch's bf16 check counts slow emulation on a T4 or V100)."""
    import torch

    from lcr.models import machine

    if device.startswith("cuda"):
        return torch.bfloat16 if machine.current().native_bf16 else torch.float16
    return torch.float32


def chat_text(tokenizer: Any, messages: Sequence[Message]) -> str:
    """The chat-templated text of ``messages`` ending with the assistant prompt; a
    message's own text never spells a special token whole (the tokenizer would match
    it: :mod:`lcr.models.special`). Without a chat template (a base model): the
    contents separated by blank lines."""
    messages = defang_messages(messages, tokenizer_special_texts(tokenizer))
    if getattr(tokenizer, "chat_template", None):
        return str(
            tokenizer.apply_chat_template(
                [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
            )
        )
    return "\n\n".join(m["content"] for m in messages) + "\n\n"


@dataclass
class PrefixCache:
    """The KV cache of a token prefix, reusable by any number of continuations.

    Never feed ``cache`` to the model directly (the model extends a cache in
    place): :meth:`fork` gives a deep copy for one continuation.
    """

    ids: list[int]
    cache: Any
    last_logits: Any  # (vocab,) logits after the last prefix token

    def __len__(self) -> int:
        return len(self.ids)

    def fork(self) -> Any:
        return copy.deepcopy(self.cache)


class TransformersCore:
    """A causal chat model run in-process with transformers; see the module docstring."""

    backend = "transformers"
    quantize: str | None = None  # bitsandbytes 4bit/8bit (part of the cache keys' configuration)
    static_cache: str | None = None  # auto/on/off; None: LCR_STATIC_CACHE (transformers_decode)

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_id: str,
        device: str = "cpu",
        context_window: int | None = None,
        batch_on_cpu: bool = False,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.device = device
        self.usage = Usage()
        self.batch_on_cpu = batch_on_cpu
        self.model.eval()
        configured = getattr(model.config, "max_position_embeddings", None) or DEFAULT_CONTEXT_CAP
        cap = context_window if context_window is not None else DEFAULT_CONTEXT_CAP
        self._context_window = int(min(configured, cap))
        self._first_tokens: dict[str, frozenset[int]] = {}
        self.end_ids = self._collect_eos_ids()
        pad = tokenizer.pad_token_id
        self._pad_id = int(pad) if pad is not None else min(self.end_ids, default=0)
        self.progress: Progress = NULL_PROGRESS  # the run's, set by lcr.models.loading
        self.threads: int | None = None  # torch's CPU threads once follow_load_on_cpu ran
        self.generated_one_stream = 0  # tokens of one-stream replies: when auto compiles
        self._governor: ThreadGovernor | None = None

    def follow_load_on_cpu(self) -> None:
        """torch threads as llama.cpp's: the cores other work leaves idle, re-measured about
        once a second while generating (``LCR_THREADS`` fixes the count).

        torch's threads spin at every barrier like llama.cpp's, so a thread more than
        there are idle cores costs several times the time (docs/speed.md, "Threads").
        """
        if not self.device.startswith("cpu"):
            return
        import torch

        self.threads = default_threads()
        torch.set_num_threads(self.threads)
        if fixed_threads() is None:
            self._governor = ThreadGovernor(self.threads, usable_cores())

    def _follow_load(self) -> None:
        if self._governor is None:
            return
        wanted = self._governor.check()
        if wanted is not None:
            import torch

            torch.set_num_threads(wanted)
            self.threads = wanted

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(
        cls,
        source: str | Path,
        *,
        model_id: str,
        gguf_file: str | None = None,
        device: str = "cpu",
        quantize: str | None = None,
        context_window: int | None = None,
        local_only: bool = True,
    ) -> Self:
        """Load from a model folder, a folder + ``gguf_file``, or a hub id.

        ``device`` must already be resolved (``cpu``/``cuda[:N]``). Library
        exceptions propagate; :mod:`lcr.models.loading` turns them into ModelError.
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        check_quantize(quantize, device)
        decoding.static_cache_setting()  # a bad LCR_STATIC_CACHE is refused before anything loads
        dtype = compute_dtype(device)
        common: dict[str, Any] = {"local_files_only": local_only}
        if gguf_file is not None:
            common["gguf_file"] = gguf_file
        tokenizer = AutoTokenizer.from_pretrained(str(source), **common)
        kwargs: dict[str, Any] = dict(common, dtype=dtype, attn_implementation="sdpa")
        if quantize is not None:
            from transformers import BitsAndBytesConfig

            if quantize == "4bit":
                kwargs["quantization_config"] = BitsAndBytesConfig(
                    load_in_4bit=True, bnb_4bit_compute_dtype=dtype, bnb_4bit_quant_type="nf4"
                )
            else:
                kwargs["quantization_config"] = BitsAndBytesConfig(load_in_8bit=True)
            kwargs["device_map"] = {"": device if ":" in device else 0}
        with _silent_gguf_progress(gguf_file is not None):
            model: Any = AutoModelForCausalLM.from_pretrained(str(source), **kwargs)
        if quantize is None:
            if model.dtype != dtype:  # a bf16 save is computed in fp32 on CPU
                model = model.to(dtype)
            model = model.to(torch.device(device))
        llm = cls(model, tokenizer, model_id=model_id, device=device, context_window=context_window)
        llm.quantize = quantize
        return llm

    def save_dequantized(self, dest: Path, dtype: str = "float32") -> None:
        """Save the (GGUF-dequantized) weights and tokenizer as a plain HF folder.

        The GGUF quantizer is dropped so the copy loads without dequantizing again.
        With ``dtype="bfloat16"`` the copy is half the size; the in-memory model is
        rounded through bf16 too, so this run computes exactly what later loads will.
        """
        import torch

        cfg = self.model.config
        if getattr(cfg, "quantization_config", None) is not None:
            delattr(cfg, "quantization_config")
        self.model.hf_quantizer = None
        if dtype == "bfloat16":
            # Parameters only: buffers such as RoPE's inv_freq are recomputed in fp32 on
            # load, so rounding them would make this run differ from later ones.
            params = list(self.model.parameters())
            original = [p.dtype for p in params]
            for p in params:
                p.data = p.data.to(torch.bfloat16)
            try:
                self.model.save_pretrained(dest)
            finally:
                for p, dt in zip(params, original, strict=True):
                    p.data = p.data.to(dt)
        else:
            self.model.save_pretrained(dest)
        self.tokenizer.save_pretrained(dest)

    # ------------------------------------------------------------ LLM protocol

    @property
    def context_window(self) -> int:
        return self._context_window

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def encode(self, text: str) -> list[int]:
        """Plain-text token ids, no special tokens added."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def render(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the chat-templated conversation, ending with the assistant prompt.

        A tokenizer without a chat template (a base model) gets the messages'
        contents separated by blank lines.
        """
        if not messages:
            raise ModelError("an LLM call needs at least one message")
        return self.encode(self.render_text(messages))

    def render_text(self, messages: Sequence[Message]) -> str:
        """The text :meth:`render` tokenizes (:func:`chat_text`)."""
        return chat_text(self.tokenizer, messages)

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
        pieces = TextPieces(on_text, stop) if on_text is not None else None
        new = self._decode_batch([prompt], max_new_tokens, stop, temperature, pieces, seed)
        gen = self._generations([prompt], new, stop)[0]
        if pieces is not None:
            pieces.finish(gen.text)
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
        """Left-padded batches on CUDA, as many conversations as free GPU memory allows
        (:func:`lcr.models.transformers_decode.gpu_batch_rows`); on CPU one call at a time.

        Batching on CPU buys little (compute bound) and padding changes results
        slightly, so on CPU the outputs equal those of :meth:`generate`.
        """
        prompts = [self.render(c) for c in conversations]
        size = self.batch_rows(prompts, max_new_tokens)
        out: list[Generation] = []
        for start in range(0, len(prompts), size):
            part = prompts[start : start + size]
            new = self._decode_batch(part, max_new_tokens, stop, temperature)
            gens = self._generations(part, new, stop)
            for offset, gen in enumerate(gens):
                out.append(gen)
                if on_result is not None:
                    on_result(start + offset, gen)
        return out

    def batch_rows(self, prompts: Sequence[Sequence[int]], max_new_tokens: int) -> int:
        """Conversations generated together: 1 on CPU (unless ``batch_on_cpu``:
        :data:`GPU_BATCH_FALLBACK`), on CUDA what free memory holds for the longest prompt."""
        if not self.device.startswith("cuda"):
            return GPU_BATCH_FALLBACK if self.batch_on_cpu else 1
        longest = max((len(p) for p in prompts), default=1)
        new = max(1, min(max_new_tokens, self.context_window - longest))
        need = decoding.row_bytes(self.model, self.kv_bytes_per_token(), longest, new)
        return decoding.gpu_batch_rows(decoding.free_gpu_bytes(self.device), need, len(prompts))

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        """P(yes) / (P(yes) + P(no)) for the first token of the assistant's answer.

        Each answer counts with the first token of both spellings ``"Yes"`` and
        ``" Yes"`` (tokenizers split these differently), their probabilities summed.
        Computed from the logits directly (the softmax normaliser cancels), so
        it never underflows to 0/0.
        """
        import torch

        yes_ids, no_ids = self.first_token_ids(yes), self.first_token_ids(no)
        if yes_ids & no_ids:
            raise ModelError(f"the answers {yes!r} and {no!r} start with the same token")
        ids = self._fit(self.render(messages))
        logits = self._forward_logits(ids, keep=1)[0, -1].double()
        lse_yes = torch.logsumexp(logits[sorted(yes_ids)], dim=0)
        lse_no = torch.logsumexp(logits[sorted(no_ids)], dim=0)
        self.usage.add(len(ids), 0)
        return float(torch.sigmoid(lse_yes - lse_no))

    def continuation_logprob(self, context: str, continuation: str) -> float:
        """Sum of log P(continuation tokens | context), plain text, one forward pass.

        Context and continuation are tokenized separately (a clean boundary); an
        empty context is replaced by the BOS (else EOS) token so the first
        continuation token is still scored. A context too long for the window
        loses its beginning.
        """
        ctx = self.encode(context)
        cont = self.encode(continuation)
        if not cont:
            return 0.0
        if not ctx:
            ctx = [self._start_token()]
        room = self.context_window - len(cont)
        if room < 1:
            raise ModelError(
                f"a continuation of {len(cont)} tokens does not fit the context window "
                f"of {self.model_id} ({self.context_window} tokens)"
            )
        ctx = ctx[-room:]
        logits = self._forward_logits(ctx + cont, keep=len(cont) + 1)[0, :-1]
        self.usage.add(len(ctx) + len(cont), 0)
        return _sum_logprob(logits, cont)

    def continuation_logprobs(
        self,
        context: str,
        continuations: Sequence[str],
        *,
        max_tokens: int | None = None,
    ) -> list[ContinuationScore]:
        """Each continuation scored after ``context``, whose KV cache is computed once per tail.

        With ``max_tokens`` every pair is cut by :func:`split_token_budget`, as the
        llama.cpp backend cuts it, so a pair scores the same text on both backends;
        pairs keeping the same context tail share one prefix cache (all of them
        when the continuations are short, as with ``lightpal.continuation_tokens``).
        Continuations are scored in batches from that cache: the prefix's keys and
        values repeated along the batch, the continuations right-padded (a padded
        position comes after every real one, so causal attention alone keeps it
        out of the scores), instead of one copied cache and one forward pass each.
        """
        ctx_ids = self.encode(context) or [self._start_token()]
        budget = min(max_tokens or self.context_window, self.context_window)
        scores: list[ContinuationScore] = [ContinuationScore(0.0, 0)] * len(continuations)
        encoded = [self.encode(text) for text in continuations]
        groups = pairs_by_context_tail(len(ctx_ids), encoded, budget)
        for n_ctx, members in groups.items():
            prefix = self.prefix_cache(ctx_ids[-n_ctx:])
            reused = n_ctx * (len(members) - 1)  # read again from the cache, not encoded
            if reused:
                self.usage.add(reused, 0, calls=0, cached_tokens=reused)
            kv_rows = _SCORE_BATCH_KV_BYTES // max(1, self.kv_bytes_per_token())
            for batch in _length_batches(members, _SCORE_BATCH_TOKENS, n_ctx, kv_rows):
                kept = [cont for _, cont in batch]
                for (i, cont), logprob in zip(
                    batch, self._score_after_prefix(prefix, kept), strict=True
                ):
                    scores[i] = ContinuationScore(logprob, len(cont))
        return scores

    def _score_after_prefix(self, prefix: PrefixCache, conts: list[list[int]]) -> list[float]:
        """Sum of log-probs of each (non-empty) continuation after ``prefix``, one batch."""
        import torch

        first = torch.log_softmax(prefix.last_logits.double(), dim=-1)
        sums = [float(first[cont[0]]) for cont in conts]
        rows = [(b, cont) for b, cont in enumerate(conts) if len(cont) > 1]
        if not rows:
            return sums
        width = max(len(cont) - 1 for _, cont in rows)
        ids = torch.full((len(rows), width), self._pad_id, dtype=torch.long)
        for r, (_, cont) in enumerate(rows):
            ids[r, : len(cont) - 1] = torch.tensor(cont[:-1])
        cache = copy.deepcopy(prefix.cache)
        if len(rows) > 1:
            cache.batch_repeat_interleave(len(rows))
        hidden = self._hidden_after(ids.to(self.model.device), cache)
        head = self.model.get_output_embeddings()
        for r, (b, cont) in enumerate(rows):
            targets = cont[1:]
            for a in range(0, len(targets), _SCORE_CHUNK):
                part = targets[a : a + _SCORE_CHUNK]
                with torch.no_grad():
                    logits = head(hidden[r, a : a + len(part)])
                sums[b] += _sum_logprob(logits, part)
        self.usage.add(sum(len(cont) - 1 for _, cont in rows), 0)
        return sums

    def _hidden_after(self, ids: torch.Tensor, cache: Any) -> torch.Tensor:
        """Last hidden states ``(batch, len, dim)`` of ``ids`` after a (batched) cache.

        The vocabulary projection is left to the caller, a few positions at a
        time: a batch's full logits would take gigabytes with a 150k vocabulary.
        """
        import torch

        decoder = self.model.get_decoder()
        with torch.no_grad():
            out = decoder(input_ids=ids, cache=cache, use_cache=True)
        hidden: torch.Tensor = out.last_hidden_state
        return hidden

    def kv_bytes_per_token(self) -> int:
        """Bytes of KV cache one token takes (keys and values of every layer)."""
        cfg = self.model.config
        layers = int(getattr(cfg, "num_hidden_layers", 1) or 1)
        heads = int(getattr(cfg, "num_attention_heads", 1) or 1)
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
        head_dim = getattr(cfg, "head_dim", None) or int(getattr(cfg, "hidden_size", 0)) // heads
        itemsize = int(getattr(getattr(self.model, "dtype", None), "itemsize", 4) or 4)
        return 2 * layers * kv_heads * int(head_dim) * itemsize

    def prefix_cache(self, prefix: str | Sequence[int]) -> PrefixCache:
        """Run the prefix once and keep its KV cache (plain text, no chat template)."""
        import torch

        ids = self.encode(prefix) if isinstance(prefix, str) else [int(i) for i in prefix]
        if not ids:
            ids = [self._start_token()]
        with torch.no_grad():
            out = self.model(input_ids=self.as_batch(ids), use_cache=True, logits_to_keep=1)
        self.usage.add(len(ids), 0)
        return PrefixCache(ids=ids, cache=out.cache, last_logits=out.logits[0, -1])

    # ---------------------------------------------------------------- helpers

    def _collect_eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.model.config):
            value = getattr(source, "eos_token_id", None)
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value)
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        return ids

    def _start_token(self) -> int:
        bos = self.tokenizer.bos_token_id
        if bos is not None:
            return int(bos)
        if self.end_ids:
            return min(self.end_ids)
        raise ModelError(f"{self.model_id} has neither a BOS nor an EOS token")

    def first_token_ids(self, word: str) -> frozenset[int]:
        """First token of ``word`` and of `` word``: both spellings count as that answer."""
        if word not in self._first_tokens:
            try:
                self._first_tokens[word] = answer_first_tokens(self.encode, word)
            except ValueError as exc:
                raise ModelError(str(exc)) from None
        return self._first_tokens[word]

    def _fit(self, ids: list[int], reserve: int = 0) -> list[int]:
        if len(ids) + reserve > self.context_window:
            raise ModelError(
                f"a prompt of {len(ids)} tokens does not fit the context window of "
                f"{self.model_id} ({self.context_window} tokens)"
            )
        return ids

    def as_batch(self, ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """Token ids as a ``(1, n)`` tensor (a 2-D tensor as it is) on the model's device."""
        import torch

        tensor = ids if isinstance(ids, torch.Tensor) else torch.tensor([list(ids)])
        if tensor.dim() == 1:
            tensor = tensor.unsqueeze(0)
        return tensor.to(self.model.device)

    def _forward_logits(self, ids: list[int], keep: int) -> torch.Tensor:
        import torch

        with torch.no_grad():
            out = self.model(input_ids=self.as_batch(ids), use_cache=False, logits_to_keep=keep)
        logits: torch.Tensor = out.logits
        return logits

    def _generations(
        self, prompts: list[list[int]], replies: list[list[int]], stop: Sequence[str]
    ) -> list[Generation]:
        """:meth:`_decode_batch`'s replies as texts cut at an end token or a stop string,
        counted in the usage."""
        results: list[Generation] = []
        ends = self.end_ids | {self._pad_id}
        for p, new in zip(prompts, replies, strict=True):
            end = next((i for i, tok in enumerate(new) if tok in ends), None)
            count = len(new) if end is None else end + 1  # an end token was paid for too
            text = cut_at_stop(self.tokenizer.decode(new[:end], skip_special_tokens=True), stop)
            self.usage.add(len(p), count)
            self.generated_one_stream += count if len(prompts) == 1 else 0  # when auto compiles
            results.append(Generation(text=text, prompt_tokens=len(p), completion_tokens=count))
        return results

    def _decode_batch(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        stop: Sequence[str],
        temperature: float,
        pieces: TextPieces | None = None,
        seed: int | None = None,
    ) -> list[list[int]]:
        """Greedy (or sampled) replies to left-padded ``prompts`` by ``model.generate``: each
        row's new ids, padding left in; ``pieces`` hears the one prompt's text as it is
        decoded."""
        import torch
        from transformers import GenerationConfig, StoppingCriteriaList

        if seed is not None and temperature > 0:
            torch.manual_seed(seed)  # generate() samples from torch's global generator

        longest = max(len(p) for p in prompts)
        self._fit(max(prompts, key=len))
        budget = max(1, min(max_new_tokens, self.context_window - longest))
        input_ids = torch.full((len(prompts), longest), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), longest), dtype=torch.long)
        for row, p in enumerate(prompts):  # left padding: every prompt ends at the same column
            input_ids[row, longest - len(p) :] = torch.tensor(p)
            mask[row, longest - len(p) :] = 1
        quantized = self.quantize is not None
        plan = decoding.decode_plan(
            self.device,
            self.static_cache,
            quantized=quantized,
            rows=len(prompts),
            generated=self.generated_one_stream,
        )
        config = GenerationConfig(
            max_new_tokens=budget,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=None,
            top_k=None,
            pad_token_id=self._pad_id,
            eos_token_id=sorted(self.end_ids) or None,
            **decoding.plan_settings(plan, longest + budget, self.context_window),
        )
        meter = TokenMeter(self.progress, f"generating with {self.model_id}", budget * len(prompts))
        watch = StepWatch(
            self._follow_load,
            meter,
            len(prompts),
            longest,
            pieces=pieces,
            decode=lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True),
            end_ids=frozenset(self.end_ids),
        )
        criteria = StoppingCriteriaList([watch])
        if any(stop):
            criteria.append(decoding.stop_criterion(self.tokenizer, stop))
        with torch.no_grad():
            try:
                out = self.model.generate(
                    input_ids=input_ids.to(self.model.device),
                    attention_mask=mask.to(self.model.device),
                    generation_config=config,
                    stopping_criteria=criteria,
                )
                watch.flush()
            finally:
                meter.finish()
        return [[int(t) for t in row] for row in out[:, longest:].tolist()]


@contextmanager
def _silent_gguf_progress(active: bool) -> Iterator[None]:
    """Hide transformers' GGUF dequantization bar (a raw tqdm its logging switch misses)."""
    import functools

    try:  # an inactive bar imports nothing
        if active:
            from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        active = False
    original = getattr(gguf_utils, "tqdm", None) if active else None
    if original is None:
        yield
        return
    gguf_utils.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def _sum_logprob(logits: torch.Tensor, targets: Sequence[int]) -> float:
    """Sum over positions of log softmax(logits[i])[targets[i]], in float64."""
    import torch

    logp = torch.log_softmax(logits.double(), dim=-1)
    index = torch.tensor(list(targets), device=logp.device).unsqueeze(1)
    return float(logp.gather(1, index).sum())
