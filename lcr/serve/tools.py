"""The tools ``lcr serve`` offers an agent, each a thin call into :mod:`lcr.pipeline`.

A tool's result is what the CLI's ``--json`` prints for the same call (``retrieve``
and ``ask``: :meth:`lcr.result.Result.to_json`; ``info``: ``lcr info --json``), so an
agent and a script read the same fields. An lcr error is an MCP error whose message
is the CLI's one line (code -32602 where the CLI exits 2, -32603 otherwise), with
``data.exit_code`` the CLI's exit code.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from pydantic import Field, ValidationError

from lcr._version import __version__
from lcr.errors import LcrError, LostRaceError, UsageError
from lcr.models.container import Models
from lcr.pipeline.plans import ParsedSets, typed_sets
from lcr.serve.calls import Call, CallCancelled, Calls
from lcr.serve.served import Served
from lcr.text.inputs import expand_inputs

T = TypeVar("T")
log = logging.getLogger("lcr.serve")

MAX_QUESTION_CHARS = 8_000  # a question longer than this is refused, not read
MAX_SETTINGS = 64
MAX_PATHS = 256

SettingValue = str | int | float | bool
Settings = Annotated[
    dict[str, SettingValue],
    Field(
        description='Method or answer settings, "method.key" or "answer.key" to a value, as '
        "`--set` takes them (`lcr methods --settings` lists them); {} for the defaults.",
        max_length=MAX_SETTINGS,
    ),
]
IndexName = Annotated[
    str,
    Field(
        description="An index as list_indexes names it (its name or its path).",
        min_length=1,
        max_length=4096,
    ),
]
MAX_INDEXES = 64
IndexOrIndexes = Annotated[
    IndexName | Annotated[list[IndexName], Field(min_length=1, max_length=MAX_INDEXES)],
    Field(
        description="An index as list_indexes names it (its name or its path), or a list of "
        "them: their evidence is pooled and answered once, each piece naming its index."
    ),
]
Question = Annotated[
    str,
    Field(description="The question, in plain words.", min_length=1, max_length=MAX_QUESTION_CHARS),
]
Method = Annotated[
    str,
    Field(
        description="Retrieval method built into the index: bm25, tfidf, dense, hybrid, full, "
        "mixpr, raptor, graphreader, lightpal, pecan (list_indexes says which are built).",
        min_length=1,
        max_length=64,
    ),
]
K = Annotated[
    int | None,
    Field(description="How many pieces of evidence (the method's default if null).", ge=1, le=1000),
]

LIST_INDEXES = """List the document indexes this server can search: for each, its name (pass it \
as `index` to the other tools), path, documents (file name, format, pages, characters), the \
retrieval methods built into it and its size on disk. Call this first."""

INFO = """Everything recorded about one index, exactly as `lcr info --json` prints it: \
sources, each built method with its settings, models, counts and sizes, and any damage. \
`verify` also checks every file's checksum (reads the whole index: slower)."""

RETRIEVE = """Find the passages of an index's documents that bear on a question, without \
answering it (fast; loads no language model for bm25, tfidf or mixpr). Returns the evidence \
ranked best first: each item's text, its exact character spans in the index's source text, \
and citations (file, pages, section). Use it to read the documents yourself; use `ask` for \
an answer written from them."""

ASK = """Answer a question from one index's documents, or from several (`index` a list): \
retrieve evidence with `method` (from each index, the best pieces kept across them), then \
have the server's language model answer from that evidence only. Returns the answer (or \
"not found in the document"), the evidence it read with spans and citations (file, pages, \
section; with several indexes, each piece's index), usage and timings. Slower than \
`retrieve` (seconds to minutes on a CPU); progress notifications carry the answer's text \
as it is written."""

INDEX = """Build an index over documents inside the served folders (text, Markdown, PDF, \
HTML, EPUB, DOCX, or a folder of them), or add methods to an existing one. `methods` [] \
builds those that need no language model (bm25, mixpr). Reports progress; one build runs \
at a time, and other clients keep reading while it does."""

ADD = """Add documents (inside the served folders) to an existing index and rebuild its \
methods, paying only for what changed. Reports progress."""


@dataclass
class ServeConfig:
    served: Served
    models: Models
    calls: Calls
    allow_index: bool = False


def make_server(config: ServeConfig) -> MCPServer[Any]:
    """The MCP server with lcr's tools (``index`` and ``add`` only if allowed)."""
    server = _Server(
        "lcr",
        version=__version__,
        instructions="Long documents indexed on disk by lcr: list_indexes, then retrieve "
        "passages with exact citations or ask for an answer written from them.",
        log_level="WARNING",
    )
    server.offer_only_tools()
    tools = Tools(config)
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(tools.list_indexes, description=LIST_INDEXES, annotations=read_only)
    server.add_tool(tools.info, description=INFO, annotations=read_only)
    server.add_tool(tools.retrieve, description=RETRIEVE, annotations=read_only)
    server.add_tool(tools.ask, description=ASK, annotations=read_only)
    if config.allow_index:
        writes = ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=False
        )
        server.add_tool(tools.index, description=INDEX, annotations=writes)
        server.add_tool(tools.add, description=ADD, annotations=writes)
    return server


# what lcr serve offers no handler for though the SDK's server has one: no prompts, no
# resources (each would fail with the SDK's code 0 and a traceback for any name)
NOT_OFFERED = ("prompts/", "resources/", "completion/")


class _Server(MCPServer[Any]):
    """The SDK's server, with arguments that fail the schema and unknown tools as MCP
    errors (invalid params) in one line, like lcr's own, a method lcr does not offer
    as method not found (-32601), an unexpected failure anywhere as an internal error
    (-32603, not the SDK's code 0) in one line, and over stdio a malformed line
    answered with a JSON-RPC error (:mod:`lcr.serve.stdio`)."""

    def offer_only_tools(self) -> None:
        self._lowlevel_server.middleware.insert(0, _only_tools)

    async def run_stdio_async(self) -> None:
        from lcr.serve.stdio import serve_stdio

        await serve_stdio(self._lowlevel_server, _log)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or isinstance(cause, LcrError):
                with _errors():  # lcr's own one line, or an internal error's
                    raise (cause if isinstance(cause, Exception) else exc) from None
            if isinstance(cause, ValidationError):
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                    for e in cause.errors()
                )
                raise MCPError(INVALID_PARAMS, f"{name}: {problems}", {"exit_code": 2}) from None
            raise MCPError(INVALID_PARAMS, _one_line(str(exc)), {"exit_code": 2}) from None


async def _only_tools(ctx: Any, call_next: Any) -> Any:
    """The server's outermost middleware: a method lcr does not offer is method not
    found; a failure that is not an MCP error is an internal error, in one line (its
    traceback on stderr)."""
    method = getattr(ctx, "method", "")
    if (
        isinstance(method, str)
        and method.startswith(NOT_OFFERED)
        and not method.endswith("/list")
        and getattr(ctx, "request_id", None) is not None
    ):
        raise MCPError(
            METHOD_NOT_FOUND,
            f"method not found: {method} (lcr serve offers tools only: tools/list, tools/call)",
        )
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError):
        raise
    except Exception as exc:
        with _errors():
            raise exc


class Tools:
    """The tool functions; their signatures are the tools' JSON schemas."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config

    async def list_indexes(self) -> dict[str, Any]:
        def work(call: Call) -> dict[str, Any]:
            return {"indexes": [_listing(s.name, s.path) for s in self.config.served.listed()]}

        return await self._run(None, work)

    async def info(self, index: IndexName, verify: bool = False) -> dict[str, Any]:
        from lcr.pipeline.integrity import info_json
        from lcr.store import Index

        path = self._index(index)
        return await self._run(None, lambda call: info_json(Index.open(path), verify=verify))

    async def retrieve(
        self,
        index: IndexName,
        question: Question,
        ctx: Context,
        method: Method = "bm25",
        k: K = None,
        settings: Settings | None = None,
    ) -> dict[str, Any]:
        from lcr import pipeline

        path = self._index(index)
        plan = _guarded(lambda: pipeline.plan_query(method, _sets(settings), k=k))
        asked = _guarded(lambda: pipeline.checked_question(question))
        models = self.config.models
        needs = plan.needs
        uses_model = needs.uses_llm or needs.embedder

        def work(call: Call) -> dict[str, Any]:
            def once() -> dict[str, Any]:
                index_now = _opened(path, method)
                result = pipeline.retrieve_query(index_now, plan, asked, models, note=_log)
                return result.to_json()

            if not uses_model:
                return _retrying(once)
            with self.config.calls.model_slot(call, lambda: _loaded(models, needs)):
                return _retrying(once)

        return await self._run(ctx, work)

    async def ask(
        self,
        index: IndexOrIndexes,
        question: Question,
        ctx: Context,
        method: Method = "bm25",
        k: K = None,
        max_new_tokens: Annotated[
            int, Field(description="The longest answer, in tokens.", ge=1, le=4096)
        ] = 256,
        settings: Settings | None = None,
    ) -> dict[str, Any]:
        from lcr import pipeline
        from lcr.pipeline.many import ask_pooled, check_poolable

        served = self.config.served
        paths = _guarded(lambda: served.named_indexes([index] if isinstance(index, str) else index))
        plan = _guarded(
            lambda: pipeline.plan_query(method, _sets(settings), k=k, max_new_tokens=max_new_tokens)
        )
        if len(paths) > 1:
            _guarded(lambda: check_poolable(plan, "ask each index in its own call"))
        asked = _guarded(lambda: pipeline.checked_question(question))
        models = self.config.models
        needs = plan.needs | plan.method.answer_needs(plan.settings)

        def work(call: Call) -> dict[str, Any]:
            with self.config.calls.model_slot(call, lambda: _loaded(models, needs)):

                def once() -> dict[str, Any]:
                    opened = [_opened(path, method) for path in paths]
                    stream = _Streamed(call)
                    if len(opened) == 1:  # as `lcr ask INDEX`
                        result = pipeline.ask_query(
                            opened[0], plan, asked, models, note=_log, stream=stream
                        )
                    else:  # as `lcr ask A.idx B.idx`: the evidence pooled, one answer
                        result = ask_pooled(opened, plan, asked, models, note=_log, stream=stream)
                    call.flush()
                    return result.to_json()

                return _retrying(once)

        return await self._run(ctx, work)

    async def index(
        self,
        paths: Annotated[
            list[str],
            Field(
                description="Documents or folders to index, inside the served folders.",
                min_length=1,
                max_length=MAX_PATHS,
            ),
        ],
        out: Annotated[
            str,
            Field(
                description="The index: a served one (to add methods to it) or a new "
                "NAME.idx path inside a served folder.",
                min_length=1,
                max_length=4096,
            ),
        ],
        ctx: Context,
        methods: Annotated[
            list[str],
            Field(description="Methods to build; [] for bm25 and mixpr.", max_length=16),
        ] = [],  # noqa: B006 (a schema default, never mutated)
        settings: Settings | None = None,
    ) -> dict[str, Any]:
        from lcr import pipeline

        served = self.config.served
        sources = _guarded(lambda: [served.source(p) for p in paths])
        target = _guarded(lambda: served.new_index(out))
        names = list(methods)
        sets = _guarded(lambda: _sets(settings))
        models = self.config.models
        plans = _guarded(lambda: pipeline.plan_builds(pipeline.expand_methods(names), models, sets))

        def work(call: Call) -> dict[str, Any]:
            reports: list[dict[str, Any]] = []
            with self.config.calls.builder(call):
                built, _ = pipeline.index_files(
                    expand_inputs(list(sources), warn=_log),
                    target,
                    plans,
                    models,
                    progress=_Progress(call),
                    on_report=lambda r: reports.append(_report(r)),
                    note=_log,
                    warn=_log,
                )
            call.flush()
            return {**_listing(target.name, built.final_path), "built": reports}

        return await self._run(ctx, work)

    async def add(
        self,
        index: IndexName,
        paths: Annotated[
            list[str],
            Field(
                description="Documents or folders to add, inside the served folders.",
                min_length=1,
                max_length=MAX_PATHS,
            ),
        ],
        ctx: Context,
    ) -> dict[str, Any]:
        from lcr.pipeline.collection import add_files

        served = self.config.served
        target = self._index(index)
        sources = _guarded(lambda: [served.source(p) for p in paths])
        models = self.config.models
        told: list[str] = []

        def work(call: Call) -> dict[str, Any]:
            reports: list[dict[str, Any]] = []
            with self.config.calls.builder(call):
                built = add_files(
                    expand_inputs(list(sources), warn=_log),
                    target,
                    [],
                    models,
                    progress=_Progress(call),
                    on_report=lambda r: reports.append(_report(r)),
                    note=_log,
                    warn=_log,
                    tell=told.append,
                )
            call.flush()
            return {**_listing(index, built.final_path), "built": reports, "paid": told}

        return await self._run(ctx, work)

    # ------------------------------------------------------------------ helpers
    def _index(self, given: str) -> Path:
        return _guarded(lambda: self.config.served.index(given))

    async def _run(self, ctx: Context | None, work: Callable[[Call], T]) -> T:
        """``work`` in a worker thread, its errors as MCP errors; with ``ctx``, its
        progress reaches the client."""
        from lcr.serve.http import client_gone

        report = None if ctx is None else ctx.report_progress
        request = None if ctx is None else ctx.request_context.request
        call = self.config.calls.call(report, client_gone(request))

        def run() -> T:
            with _errors():
                try:
                    return work(call)
                except CallCancelled as exc:
                    _log(f"a call stopped: {exc}")
                    raise

        with _errors():
            return await self.config.calls.run(call, run)


class _Streamed:
    """The answer as the model writes it, to the client as progress notifications (and
    a point where a call whose client went away stops)."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.pieces = 0

    def reading(self, tokens: int) -> None:
        self.call.check()

    def text(self, piece: str) -> None:
        self.pieces += 1
        self.call.text(self.pieces, piece)


class _Progress:
    """lcr's :class:`~lcr.progress.Progress` as MCP progress notifications."""

    def __init__(self, call: Call) -> None:
        self.call = call

    def task(self, description: str, total: float | None = None) -> _Task:
        return _Task(self.call, description, total)

    def log(self, message: str) -> None:
        _log(message)
        self.call.check()


class _Task:
    def __init__(self, call: Call, description: str, total: float | None) -> None:
        self.call, self.description, self.total, self.done = call, description, total, 0.0

    def advance(self, n: float = 1) -> None:
        self.done += n
        self.call.progress(self.done, self.total, self.description)

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        if total is not None:
            self.total = total
        if description is not None:
            self.description = description
        self.call.progress(self.done, self.total, self.description)


def _listing(name: str, path: Path) -> dict[str, Any]:
    from lcr.store import Index

    try:
        index = Index.open(path)
    except LcrError as exc:
        return {"name": name, "path": str(path), "error": str(exc)}
    return {
        "name": name,
        "path": str(index.path),
        "documents": [
            {"name": d.name, "format": d.format, "pages": d.pages, "chars": d.end - d.start}
            for d in index.documents
        ],
        "methods": sorted(index.methods),
        "damaged": dict(index.damaged),
        "size_bytes": index.size_bytes(),
    }


def _report(report: Any) -> dict[str, Any]:
    return {"method": report.method, "skipped": bool(getattr(report, "skipped", False))}


def _sets(settings: Mapping[str, SettingValue] | None) -> ParsedSets:
    """A call's settings, checked as the JSON values they are (never made into text)."""
    return typed_sets(dict(settings or {}))


def _loaded(models: Models, needs: Any) -> bool:
    return (not needs.uses_llm or models.llm_loaded) and (
        not needs.embedder or models.embedder_loaded
    )


def _opened(path: Path, method: str) -> Any:
    from lcr.store import Index

    index = Index.open(path)
    index.reader(method)  # a method not built fails before any model loads
    return index


def _retrying(once: Callable[[], T]) -> T:
    """A read that lost a race with a build committing meanwhile is read again, once."""
    try:
        return once()
    except LostRaceError:
        return once()


def _log(message: str) -> None:
    print(f"lcr serve: {message}", file=sys.stderr, flush=True)


def _guarded(make: Callable[[], T]) -> T:
    with _errors():
        return make()


@contextmanager
def _errors() -> Iterator[None]:
    """lcr's errors as MCP errors with the CLI's one line; anything else is a bug, said
    in one line to the client and with its traceback on the server's stderr."""
    try:
        yield
    except MCPError:
        raise
    except LcrError as exc:
        code = INVALID_PARAMS if isinstance(exc, UsageError) else INTERNAL_ERROR
        raise MCPError(code, _one_line(str(exc)), {"exit_code": exc.exit_code}) from None
    except MemoryError:
        raise MCPError(INTERNAL_ERROR, "out of memory", {"exit_code": 1}) from None
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        message = _one_line(f"internal error: {type(exc).__name__}: {exc}")
        raise MCPError(INTERNAL_ERROR, message, {"exit_code": 1}) from None


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in message.splitlines() if part.strip())
