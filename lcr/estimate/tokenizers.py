"""A model's tokenizer alone, for an estimate: never its weights.

- llama.cpp: the GGUF opened vocabulary-only (under a second), its own chat
  template rendered as the backend renders it;
- transformers: the model folder's tokenizer and ``config.json`` (the window);
- a server (``--base-url``): the same model's local tokenizer when lcr has it,
  else lcr's model-free count plus 10%, as the openai backend counts, and a
  few tokens of template per message (``approximate`` says so).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr.errors import ModelError
from lcr.models.base import Message, Tokenizer
from lcr.models.spec import ModelSpec
from lcr.models.special import defang_messages, tokenizer_special_texts

if TYPE_CHECKING:
    from lcr.models.llamacpp_setup import ChatTemplate
    from lcr.models.loading import Source

TEMPLATE_TOKENS_PER_MESSAGE = 5  # a server's chat template, when its tokenizer is unknown
SERVER_WINDOW = 32768  # a server's window when --context-window does not say


class _Tokenizer:
    """What every tokenizer here shares: its window, and counting by encoding."""

    approximate = False
    _window: int

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def render_text(self, messages: Sequence[Message]) -> str:
        raise NotImplementedError

    @property
    def context_window(self) -> int:
        return self._window

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def render(self, messages: Sequence[Message]) -> list[int]:
        return self.encode(self.render_text(messages))


class _TemplatedTokenizer(_Tokenizer):
    """A tokenizer with a model's own chat template, the messages joined by blank lines
    when there is none."""

    _template: ChatTemplate | None
    _specials: frozenset[str] = frozenset()  # broken in messages, as the backend does

    def render_text(self, messages: Sequence[Message]) -> str:
        messages = defang_messages(messages, self._specials)  # as the backend sends them
        if self._template is not None:
            return self._template.render(messages)
        return "\n\n".join(m["content"] for m in messages) + "\n\n"


class LlamaCppTokenizer(_TemplatedTokenizer):
    """A GGUF's vocabulary and chat template (llama.cpp, ``vocab_only``)."""

    def __init__(self, path: Path, model_id: str, window: int | None) -> None:
        import llama_cpp
        from llama_cpp._internals import LlamaModel

        from lcr.models.llamacpp_llm import DEFAULT_CONTEXT
        from lcr.models.llamacpp_setup import ChatTemplate, quiet_llama_logs

        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        try:
            with quiet_llama_logs():
                self._model = LlamaModel(path_model=str(path), params=params, verbose=False)
        except (ValueError, OSError) as exc:
            raise ModelError(f"llama.cpp cannot read the vocabulary of {path}: {exc}") from None
        self.model_id = model_id
        meta = self._model.metadata()
        trained = next(
            (int(v) for k, v in meta.items() if k.endswith(".context_length") and v.isdigit()),
            DEFAULT_CONTEXT,
        )
        self._window = min(window or DEFAULT_CONTEXT, trained)
        vocab = self._model.vocab
        source = meta.get("tokenizer.chat_template")
        self._template = (
            ChatTemplate(
                source,
                self._piece(llama_cpp.llama_vocab_bos(vocab)),
                self._piece(llama_cpp.llama_vocab_eos(vocab)),
            )
            if source
            else None
        )

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        piece = bytes(self._model.token_to_piece(token, special=True)).rstrip(b"\0")
        return piece.decode("utf-8", errors="replace")

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return [int(t) for t in self._model.tokenize(text.encode("utf-8"), False, False)]

    def render(self, messages: Sequence[Message]) -> list[int]:
        text = self.render_text(messages)
        return [int(t) for t in self._model.tokenize(text.encode("utf-8"), False, True)]


class HFTokenizer(_Tokenizer):
    """A transformers model folder's tokenizer, rendered as the transformers backend does."""

    def __init__(self, tokenizer: Any, model_id: str, window: int) -> None:
        self._tokenizer = tokenizer
        self.model_id = model_id
        self._window = window

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def render_text(self, messages: Sequence[Message]) -> str:
        messages = defang_messages(messages, tokenizer_special_texts(self._tokenizer))
        if getattr(self._tokenizer, "chat_template", None):
            return str(
                self._tokenizer.apply_chat_template(
                    [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
                )
            )
        return "\n\n".join(m["content"] for m in messages) + "\n\n"


class FolderTokenizer(_TemplatedTokenizer):
    """A transformers model folder read without transformers: its ``tokenizer.json``
    through the ``tokenizers`` library and its chat template through the same Jinja
    renderer as llama.cpp's backend (transformers' options), so the counts are the
    transformers backend's own."""

    def __init__(self, folder: Path, model_id: str, cap: int) -> None:
        from tokenizers import Tokenizer as FastTokenizer

        from lcr.models.llamacpp_setup import ChatTemplate

        try:
            self._tokenizer = FastTokenizer.from_file(str(folder / "tokenizer.json"))
            settings = _json_object(folder / "tokenizer_config.json")
            config = _json_object(folder / "config.json")
        except Exception as exc:  # tokenizers raises a bare Exception for a bad file
            raise ModelError(f"cannot read the tokenizer in {folder}: {exc}") from None
        self.model_id = model_id
        trained = config.get("max_position_embeddings")
        self._window = int(min(trained, cap)) if isinstance(trained, int) and trained > 0 else cap
        source = _chat_template_source(folder, settings)
        bos, eos = (_token_text(settings.get(k)) for k in ("bos_token", "eos_token"))
        self._template = ChatTemplate(source, bos, eos) if source else None
        self._specials = tokenizer_special_texts(self._tokenizer)

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)


def _json_object(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    import json

    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _chat_template_source(folder: Path, settings: dict[str, Any]) -> str | None:
    """The template transformers would use: ``chat_template.jinja``, else the config's
    (a string, or the one named "default" of a list)."""
    path = folder / "chat_template.jinja"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    value = settings.get("chat_template")
    if isinstance(value, list):
        named = (t for t in value if isinstance(t, dict) and t.get("name") == "default")
        value = next((t.get("template") for t in named), None)
    return value if isinstance(value, str) and value else None


def _token_text(value: object) -> str:
    """A special token as the config writes it: a string or ``{"content": ...}``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


_PIECE = re.compile(r"\w+|[^\w\s]")


class ApproximateTokenizer(_Tokenizer):
    """lcr's model-free count plus 10% (as the openai backend counts a server's tokens)."""

    approximate = True

    def __init__(self, model_id: str, window: int) -> None:
        self.model_id = model_id
        self._window = window

    def encode(self, text: str) -> list[int]:
        pieces = [hash(p) & 0xFFFF for p in _PIECE.findall(text)]
        extra = math.ceil(len(pieces) * 0.1)
        return pieces + pieces[:extra]

    def render_text(self, messages: Sequence[Message]) -> str:
        return "\n\n".join(m["content"] for m in messages)

    def render(self, messages: Sequence[Message]) -> list[int]:
        ids = [0] * TEMPLATE_TOKENS_PER_MESSAGE * len(messages)
        for m in messages:
            ids += self.encode(m["content"])
        return ids


def load_tokenizer(name: str, backend: str, spec: ModelSpec) -> Tokenizer:
    """The tokenizer ``backend`` would use for model ``name``."""
    if backend in ("openai", "xllamacpp"):  # xllamacpp: the GGUF's vocabulary, read alike
        window = spec.context_window or SERVER_WINDOW
        for local in ("llamacpp", "transformers"):
            try:
                found = load_tokenizer(name, local, spec)
            except (ModelError, OSError, ValueError, ImportError):
                continue
            return found
        return ApproximateTokenizer(name, window)
    if backend == "llamacpp":
        return _llamacpp_tokenizer(name, spec)
    return _hf_tokenizer(name, spec)


def _llamacpp_tokenizer(name: str, spec: ModelSpec) -> LlamaCppTokenizer:
    from lcr.models.loading import gguf_source

    source = gguf_source(name)
    if source is None:
        raise ModelError(f"{name} is not a GGUF model llama.cpp can read")
    return LlamaCppTokenizer(_gguf_path(source), source.model_id, spec.context_window)


def _gguf_path(source: Source) -> Path:
    """The GGUF file of a preset (its part, or the parts joined by a first load) or a file."""
    from lcr.models import cache

    if source.preset is not None:
        parts = source.preset.part_paths() or []
        joined = cache.gguf_path(source.preset.name)
        path = joined if source.preset.multi_part else (parts[0] if parts else joined)
        if not path.is_file():
            raise ModelError(
                f"{source.model_id}'s GGUF file is not prepared yet (a first load joins it)"
            )
        return path
    if source.gguf_file is None:
        raise ModelError(f"{source.model_id} is not a GGUF file")
    return Path(source.location) / source.gguf_file


def _hf_tokenizer(name: str, spec: ModelSpec) -> Tokenizer:
    """What the transformers backend reads: the converted copy's tokenizer, else (before
    the first load converts it) the GGUF's, read by transformers as that load reads it.

    A folder with a ``tokenizer.json`` is read by the ``tokenizers`` library alone
    (:class:`FolderTokenizer`): importing transformers and torch would cost the
    estimate more than all its counting.
    """
    from lcr.models import cache
    from lcr.models.loading import resolve
    from lcr.models.transformers_core import DEFAULT_CONTEXT_CAP

    source = resolve(name, "llm")
    cap = spec.context_window
    folder: Path | None = None
    if source.preset is not None:
        cap = cap or source.preset.context_window
        if cache.has_dequantized(source.preset.name):
            folder = cache.hf_dir(source.preset.name)
    elif source.gguf_file is None:
        folder = Path(source.location)
    if folder is not None and (folder / "tokenizer.json").is_file():
        return FolderTokenizer(folder, source.model_id, cap or DEFAULT_CONTEXT_CAP)
    return _transformers_tokenizer(name, spec)


def _transformers_tokenizer(name: str, spec: ModelSpec) -> Tokenizer:
    """The tokenizer as transformers itself reads it (a GGUF not yet converted)."""
    from transformers import AutoConfig, AutoTokenizer

    from lcr.models import cache
    from lcr.models.loading import hub_offline, quiet_libraries, resolve
    from lcr.models.transformers_core import DEFAULT_CONTEXT_CAP

    source = resolve(name, "llm")
    options: dict[str, Any] = {"local_files_only": True}
    cap = spec.context_window
    if source.preset is not None:
        cap = cap or source.preset.context_window
        location = str(cache.hf_dir(source.preset.name))
        if not cache.has_dequantized(source.preset.name):
            gguf = _gguf_path(source)
            location, options["gguf_file"] = str(gguf.parent), gguf.name
    else:
        location = source.location
        if source.gguf_file is not None:
            options["gguf_file"] = source.gguf_file
    quiet_libraries()
    with hub_offline():
        tokenizer = AutoTokenizer.from_pretrained(location, **options)
        config = AutoConfig.from_pretrained(location, **options)
    trained = getattr(config, "max_position_embeddings", None) or DEFAULT_CONTEXT_CAP
    window = int(min(trained, cap or DEFAULT_CONTEXT_CAP))
    return HFTokenizer(tokenizer, source.model_id, window)
