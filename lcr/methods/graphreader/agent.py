"""The GraphReader agent (section 3.3-3.4): a state machine over an LLM and a read-only graph.

One query: a rational plan (Figure 7), initial nodes scored by the model
(Figure 8) among candidates pre-selected by embedding similarity, then one
exploration path per initial node, each with its own notebook:

* atomic facts (Figure 9): ``read_chunk(ids)`` queues chunks, or
  ``stop_and_read_neighbor()``;
* chunks, read from the queue (Figure 10): ``search_more()``,
  ``read_previous_chunk()``, ``read_subsequent_chunk()`` or ``termination()``;
* neighbours (Figure 11): ``read_neighbor_node(key)`` or ``termination()``.

At most ``max_calls`` function calls per path (the paper's 10); a chunk or node
is never visited twice in a path. Every call's prompt is budgeted to ``window``
tokens (the paper's 4k; 0 = the model's whole window) with room for the reply:
facts, candidate and neighbour lists keep the prefix that fits, a chunk its
start (counted as ``window_cuts``). Replies are sampled at ``temperature`` (the
paper's 0.2) with a seed per call, ``seed`` + the call's number, so a query is
reproducible. Every reply is parsed defensively: the call
is accepted in the loose forms small models write; when nothing usable parses,
the most conservative action of the stage is taken (stop reading this node's
facts, keep to the chunks already queued, stop at the neighbours) and counted.

The agent can only read: its whole action set is the functions above, their
arguments are checked against the graph, and nothing it reads (a document
saying "ignore previous instructions") can give it another ability.
"""

from __future__ import annotations

import os
import random
import re
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from lcr.methods.graphreader import prompts
from lcr.methods.graphreader.graph import Graph
from lcr.models.base import LLM, Message

NOTEBOOK_MAX_CHARS = 2000  # a notebook longer than this keeps its end
REPLY_EXCERPT_CHARS = 300
PROMPT_MARGIN_TOKENS = 64  # the chat template's tokens around the messages

STAGE_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "atomic_facts": ("read_chunk", "stop_and_read_neighbor"),
    "chunk": ("search_more", "read_previous_chunk", "read_subsequent_chunk", "termination"),
    "neighbors": ("read_neighbor_node", "termination"),
}
# what a reply with no usable call means: the stage's most conservative action
FALLBACK = {
    "atomic_facts": "stop_and_read_neighbor",
    "chunk": "search_more",
    "neighbors": "termination",
}


# Key elements shown for initial node selection, the nearest by embedding to the question
# and plan (the paper shows all): the best node a supporting sentence names ranked at most
# 13th for 50 dev questions: docs/methods/graphreader.md#caps-and-the-fallback-on-two-real-graphs
CANDIDATES = 50
# Neighbours listed to the model a step (the paper lists all): 70% of the links between
# supporting sentences' nodes at 145 key tokens at most a step, against 85% at 262 for
# 100: docs/methods/graphreader.md#caps-and-the-fallback-on-two-real-graphs
MAX_NEIGHBORS = 50


class AgentSettings(Protocol):
    """The query settings the agent reads, by their names in
    :class:`~lcr.methods.graphreader.method.GraphReaderQuery`, which declares them
    (defaults, ranges, the paper's values) and is passed as is."""

    @property
    def initial_nodes(self) -> int: ...
    @property
    def max_calls(self) -> int: ...
    @property
    def rational_plan(self) -> bool: ...
    @property
    def node_selection(self) -> Literal["model", "random"]: ...
    @property
    def read_chunks(self) -> bool: ...
    @property
    def agent_max_new_tokens(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def temperature(self) -> float: ...
    @property
    def window(self) -> int: ...


@dataclass(frozen=True)
class Call:
    """A parsed function call: its name, arguments, and whether it was a fallback."""

    name: str
    args: tuple[str, ...] = ()
    fallback: bool = False


@dataclass
class PathState:
    start: int
    node: int
    stage: str = "atomic_facts"
    notebook: str = ""
    actions: list[str] = field(default_factory=list)
    calls: int = 0
    visited_nodes: list[int] = field(default_factory=list)
    read_chunks: list[int] = field(default_factory=list)
    queue: deque[int] = field(default_factory=deque)
    done: bool = False


@dataclass
class AgentResult:
    plan: str | None
    initial_nodes: list[int]
    notebooks: list[str]
    chunks_read: list[int]  # in the order first read, over all paths
    facts_seen: list[int]  # facts shown to the model, in order first shown
    trace: list[dict[str, Any]]
    counters: Counter[str]
    calls_per_path: list[int]
    prompt_tokens: int = 0
    repeated_prefix_tokens: int = 0


# ------------------------------------------------------------------- parsing
_FUNC_NAMES = sorted({f for fs in STAGE_FUNCTIONS.values() for f in fs}, key=len, reverse=True)
_CALL = re.compile(
    r"(" + "|".join(n.replace("_", r"[_\s-]?") for n in _FUNC_NAMES) + r")"
    r"(?:\s*\((?P<paren>[^()]*)\)?|\s*[:=]\s*(?P<colon>[^\n]*)|[ \t]+(?P<bare>[^\n]*))?",
    re.IGNORECASE,
)
_CHOSEN = re.compile(r"chosen\s*action\W*", re.IGNORECASE)
_NOTEBOOK = re.compile(
    r"updated\s*notebook\W*(?P<body>.*?)(?=\*?\s*rationale|\*?\s*chosen\s*action|\Z)",
    re.IGNORECASE | re.DOTALL,
)
_CHUNK_ID = re.compile(r"(?:\bc|\bid[-_ ]?|\bchunk[-_ ]?)?(\d+)\b", re.IGNORECASE)


def _canonical(name: str) -> str:
    return re.sub(r"[_\s-]+", "_", name.strip().lower())


def parse_call(reply: str, stage: str) -> Call | None:
    """The function call of ``reply`` allowed in ``stage``, or None.

    The ``Chosen Action`` line wins; otherwise the last allowed call anywhere in
    the reply (models often restate the options before choosing).
    """
    allowed = STAGE_FUNCTIONS[stage]
    chosen = _CHOSEN.split(reply)
    candidates = [chosen[-1]] if len(chosen) > 1 else []
    candidates.append(reply)
    for text in candidates:
        found: Call | None = None
        for m in _CALL.finditer(text):
            name = _canonical(m.group(1))
            if name not in allowed:
                continue
            raw = next((g for g in m.group("paren", "colon", "bare") if g is not None), "")
            found = Call(name, _arguments(name, raw))
            if text is not reply:
                break  # the first call on the Chosen Action line
        if found is not None:
            return found
    return None


def _arguments(name: str, raw: str) -> tuple[str, ...]:
    raw = raw.strip()
    if name == "read_chunk":
        return tuple(f"c{int(m.group(1))}" for m in _CHUNK_ID.finditer(raw))
    if name == "read_neighbor_node":
        arg = raw.strip(" \t\"'`“”‘’[]{}<>*.,;")
        return (arg,) if arg else ()
    return ()


def parse_notebook(reply: str) -> str | None:
    """The reply's *Updated Notebook* section, or None when it has none."""
    m = _NOTEBOOK.search(reply)
    if m is None:
        return None
    body = m.group("body").strip(" \t\n*:")
    return body if body else None


_SCORE_LINE = re.compile(
    r"node\W*(?P<key>.+?)\W*,?\s*score\W*(?P<score>\d+(?:\.\d+)?)", re.IGNORECASE
)


def parse_node_scores(reply: str) -> list[tuple[str, float]]:
    """``Node: key, Score: n`` lines as (key, score); other lines ignored."""
    out = []
    for line in reply.splitlines():
        m = _SCORE_LINE.search(line)
        if m is None:
            continue
        key = m.group("key").strip(" \t\"'`[]*:,")
        if key:
            out.append((key, float(m.group("score"))))
    return out


# --------------------------------------------------------------------- agent
class Agent:
    """Runs one query over ``graph`` with ``llm``. Reads only; keeps a trace of every step."""

    def __init__(
        self,
        llm: LLM,
        graph: Graph,
        settings: AgentSettings,
        rank_candidates: Callable[[str], Sequence[int]],
    ) -> None:
        self.llm = llm
        self.graph = graph
        self.s = settings
        self.rank_candidates = rank_candidates
        self.counters: Counter[str] = Counter()
        self.trace: list[dict[str, Any]] = []
        self.rng = random.Random(settings.seed)
        self._last_prompt = ""
        self.prompt_tokens = 0
        self.repeated_prefix_tokens = 0
        self.chunks_read: list[int] = []
        self.facts_seen: list[int] = []

    # ------------------------------------------------------------ LLM calls
    def _generate(self, messages: list[Message]) -> str:
        """One call; counts the prompt tokens it shares with the previous call's prompt."""
        text = "\n".join(f"{m['role']}: {m['content']}" for m in messages)
        common = len(os.path.commonprefix([self._last_prompt, text]))  # noqa: RUF071 (chars)
        if common:
            self.repeated_prefix_tokens += self.llm.count_tokens(text[:common])
        self._last_prompt = text
        if self._prompt_size(messages) > self.budget:
            self.counters["over_window"] += 1  # what cannot be cut (instructions, notebook)
        gen = self.llm.generate(
            messages,
            max_new_tokens=self.s.agent_max_new_tokens,
            temperature=self.s.temperature,
            seed=(self.s.seed + self.counters["llm_calls"]) % 2**32,
        )
        self.prompt_tokens += gen.prompt_tokens
        self.counters["llm_calls"] += 1
        return gen.text

    @property
    def budget(self) -> int:
        """Prompt tokens a call may use: the window less the reply and the chat template."""
        window = self.llm.context_window
        if self.s.window:
            window = min(window, self.s.window)
        return window - self.s.agent_max_new_tokens - PROMPT_MARGIN_TOKENS

    def _prompt_size(self, messages: list[Message]) -> int:
        return sum(self.llm.count_tokens(m["content"]) for m in messages)

    def _longest_fitting(self, n: int, fits: Callable[[int], bool]) -> int:
        """The largest m <= n with ``fits(m)`` (at least 1 when n > 0: an input is never
        emptied, the call goes over instead and is counted)."""
        if n == 0 or fits(n):
            return n
        low, high = 0, n  # fits(low) is assumed, fits(high) is not
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if fits(mid) else (low, mid)
        return max(low, 1)

    def _fit_items(self, items: list[str], build: Callable[[list[str]], list[Message]]) -> int:
        """How many of ``items`` (candidates, neighbours), from the first, fit the budget."""
        return self._longest_fitting(
            len(items), lambda m: self._prompt_size(build(items[:m])) <= self.budget
        )

    def _fit_text(self, text: str, build: Callable[[str], list[Message]]) -> str:
        """The longest start of ``text``, cut at a space, whose prompt fits the budget."""
        words = text.split(" ")
        m = self._longest_fitting(
            len(words), lambda m: self._prompt_size(build(" ".join(words[:m]))) <= self.budget
        )
        return text if m == len(words) else " ".join(words[:m])

    # -------------------------------------------------------------- phases
    def run(self, question: str) -> AgentResult:
        plan: str | None = None
        if self.s.rational_plan:
            plan = self._generate(prompts.plan_messages(question)).strip() or None
            if plan is None:
                self.counters["empty_plan"] += 1
            self.trace.append({"stage": "plan", "plan": plan})
        initial = self._initial_nodes(question, plan)
        notebooks: list[str] = []
        calls: list[int] = []
        for p, node in enumerate(initial):
            state = PathState(start=node, node=node, visited_nodes=[node])
            self._explore(p, question, plan, state)
            notebooks.append(state.notebook)
            calls.append(state.calls)
        return AgentResult(
            plan=plan,
            initial_nodes=initial,
            notebooks=notebooks,
            chunks_read=list(self.chunks_read),
            facts_seen=list(self.facts_seen),
            trace=self.trace,
            counters=self.counters,
            calls_per_path=calls,
            prompt_tokens=self.prompt_tokens,
            repeated_prefix_tokens=self.repeated_prefix_tokens,
        )

    def _initial_nodes(self, question: str, plan: str | None) -> list[int]:
        n = self.s.initial_nodes
        if self.graph.n_nodes == 0:
            self.trace.append({"stage": "initial_nodes", "nodes": [], "note": "empty graph"})
            return []
        if self.s.node_selection == "random":
            chosen = self.rng.sample(range(self.graph.n_nodes), min(n, self.graph.n_nodes))
            self.trace.append(
                {
                    "stage": "initial_nodes",
                    "nodes": [self.graph.keys[i] for i in chosen],
                    "note": "random (no node selection)",
                }
            )
            return chosen
        ranked = list(self.rank_candidates(question + ("\n" + plan if plan else "")))
        shown = ranked[:CANDIDATES]

        def build(keys: list[str]) -> list[Message]:
            at_least = max(prompts.FIGURE_8_AT_LEAST, n)
            return prompts.node_selection_messages(question, plan, keys, at_least=at_least)

        fitting = self._fit_items([self.graph.keys[i] for i in shown], build)
        if fitting < len(shown):
            self.counters["window_cuts"] += 1
            shown = shown[:fitting]
        reply = self._generate(build([self.graph.keys[i] for i in shown]))
        scored: dict[int, float] = {}
        invented = 0
        for key, score in parse_node_scores(reply):
            node = self.graph.find(key, shown)
            if node is None:
                invented += 1
                continue
            scored[node] = max(score, scored.get(node, score))
        self.counters["invented_nodes"] += invented
        order = {node: r for r, node in enumerate(shown)}
        chosen = sorted(scored, key=lambda i: (-scored[i], order[i]))[:n]
        filled = [i for i in shown if i not in chosen][: max(0, n - len(chosen))]
        if not chosen:
            self.counters["fallback_node_selection"] += 1
        elif filled:
            self.counters["initial_nodes_filled"] += len(filled)
        self.trace.append(
            {
                "stage": "initial_nodes",
                "candidates": len(shown),
                "scores": {self.graph.keys[i]: scored[i] for i in chosen},
                "nodes": [self.graph.keys[i] for i in chosen + filled],
                "filled_by_similarity": [self.graph.keys[i] for i in filled],
                "invented": invented,
            }
        )
        return chosen + filled

    def _explore(self, path: int, question: str, plan: str | None, st: PathState) -> None:
        while not st.done:
            if st.calls >= self.s.max_calls:
                self._stop(path, st, f"call limit ({self.s.max_calls}) reached")
                break
            if st.stage == "atomic_facts":
                self._step_atomic_facts(path, question, plan, st)
            elif st.stage == "chunk":
                self._step_chunk(path, question, plan, st)
            else:
                self._step_neighbors(path, question, plan, st)

    def _stop(self, path: int, st: PathState, reason: str) -> None:
        st.done = True
        self.trace.append({"path": path, "stage": "end", "reason": reason, "calls": st.calls})

    def _record(
        self, path: int, st: PathState, stage: str, call: Call, reply: str, **extra: Any
    ) -> None:
        label = f"{call.name}({', '.join(call.args)})"
        st.actions.append(label)
        self.counters[f"call_{call.name}"] += 1
        self.counters[f"stage_{stage}"] += 1
        step: dict[str, Any] = {
            "path": path,
            "call": st.calls,
            "stage": stage,
            "node": self.graph.keys[st.node],
            "action": call.name,
            "arguments": list(call.args),
            "fallback": call.fallback,
        }
        step.update(extra)
        step["notebook"] = st.notebook
        step["reply"] = reply[:REPLY_EXCERPT_CHARS]
        self.trace.append(step)

    def _decide(self, reply: str, stage: str, st: PathState) -> Call:
        st.calls += 1
        notebook = parse_notebook(reply) if stage != "neighbors" else None
        if notebook is not None:
            st.notebook = notebook[-NOTEBOOK_MAX_CHARS:]
        elif stage != "neighbors":
            self.counters["notebook_missing"] += 1
        call = parse_call(reply, stage)
        if call is None:
            self.counters["fallback_actions"] += 1
            return Call(FALLBACK[stage], fallback=True)
        return call

    def _fit_facts(
        self,
        groups: list[tuple[int, list[str]]],
        build: Callable[[list[tuple[int, list[str]]]], list[Message]],
    ) -> tuple[list[tuple[int, list[str]]], int]:
        """The node's facts that fit the window (a protagonist's run to thousands), in
        document order, and how many were cut: the largest prefix whose prompt fits."""
        flat = [(c, f) for c, facts in groups for f in facts]

        def regroup(m: int) -> list[tuple[int, list[str]]]:
            out: dict[int, list[str]] = {}
            for c, f in flat[:m]:
                out.setdefault(c, []).append(f)
            return list(out.items())

        def fits(m: int) -> bool:
            return self._prompt_size(build(regroup(m))) <= self.budget

        kept = self._longest_fitting(len(flat), fits)
        if kept == len(flat):
            return groups, 0
        self.counters["window_cuts"] += 1
        return regroup(kept), len(flat) - kept

    def _step_atomic_facts(self, path: int, q: str, plan: str | None, st: PathState) -> None:
        def build(groups: list[tuple[int, list[str]]]) -> list[Message]:
            return prompts.atomic_facts_messages(
                q,
                plan,
                st.actions,
                st.notebook,
                self.graph.keys[st.node],
                [(Graph.chunk_label(c), facts) for c, facts in groups],
            )

        all_groups = self.graph.facts_by_chunk(st.node)
        groups, cut = self._fit_facts(all_groups, build)
        ids = sorted(self.graph.node_facts[st.node], key=lambda f: self.graph.facts[f].chunk)
        for f in ids[: len(ids) - cut]:  # facts_by_chunk's order: the ones shown
            if f not in self.facts_seen:
                self.facts_seen.append(f)
        facts_cut: dict[str, Any] = {}
        if cut:
            self.counters["facts_cut"] += cut
            shown_chunks = {c for c, _ in groups}
            facts_cut = {
                "facts_cut": cut,
                "facts_shown": sum(len(f) for _, f in groups),
                "chunks_cut": [
                    Graph.chunk_label(c) for c, _ in all_groups if c not in shown_chunks
                ],
            }
        reply = self._generate(build(groups))
        call = self._decide(reply, "atomic_facts", st)
        note = ""
        if call.name == "read_chunk":
            offered = {Graph.chunk_label(c): c for c, _ in groups}
            wanted = [offered[a] for a in call.args if a in offered]
            fresh = [
                c for c in dict.fromkeys(wanted) if c not in st.read_chunks and c not in st.queue
            ]
            if not self.s.read_chunks:
                note = "only atomic facts: chunks are not read"
                st.stage = "neighbors"
            elif fresh:
                st.queue.extend(fresh)
                st.stage = "chunk"
            else:
                self.counters["invalid_arguments"] += 1
                note = "no unread chunk of this node among the arguments"
                st.stage = "neighbors"
            if len(wanted) < len(call.args):
                self.counters["unknown_chunk_ids"] += len(call.args) - len(wanted)
        else:
            st.stage = "neighbors"
        self._record(
            path,
            st,
            "atomic_facts",
            call,
            reply,
            queue=[Graph.chunk_label(c) for c in st.queue],
            note=note,
            **facts_cut,
        )

    def _step_chunk(self, path: int, q: str, plan: str | None, st: PathState) -> None:
        while st.queue and st.queue[0] in st.read_chunks:
            st.queue.popleft()
        if not st.queue:
            st.stage = "neighbors"
            return
        chunk = st.queue.popleft()
        st.read_chunks.append(chunk)
        if chunk not in self.chunks_read:
            self.chunks_read.append(chunk)

        def build(text: str) -> list[Message]:
            label = Graph.chunk_label(chunk)
            return prompts.chunk_messages(q, plan, st.actions, st.notebook, label, text)

        full = self.graph.chunk_texts[chunk]
        text = self._fit_text(full, build)
        cut: dict[str, Any] = {}
        if len(text) < len(full):
            self.counters["window_cuts"] += 1
            cut = {"chunk_chars_cut": len(full) - len(text)}
        reply = self._generate(build(text))
        call = self._decide(reply, "chunk", st)
        note = ""
        if call.name == "termination":
            self._record(path, st, "chunk", call, reply, chunk=Graph.chunk_label(chunk), **cut)
            self._stop(path, st, "termination")
            return
        if call.name in ("read_previous_chunk", "read_subsequent_chunk"):
            other = self.graph.adjacent_chunk(
                chunk, -1 if call.name == "read_previous_chunk" else 1
            )
            if other is None or other in st.read_chunks or other in st.queue:
                self.counters["invalid_arguments"] += 1
                note = "no unread chunk there"
            else:
                st.queue.appendleft(other)
        if not st.queue:
            st.stage = "neighbors"
        self._record(
            path,
            st,
            "chunk",
            call,
            reply,
            chunk=Graph.chunk_label(chunk),
            queue=[Graph.chunk_label(c) for c in st.queue],
            note=note,
            **cut,
        )

    def _step_neighbors(self, path: int, q: str, plan: str | None, st: PathState) -> None:
        neighbors = [n for n in self.graph.neighbors(st.node) if n not in st.visited_nodes]
        if not neighbors:
            self._stop(path, st, "no unvisited neighbour")
            return
        shown = neighbors[:MAX_NEIGHBORS]

        def build(keys: list[str]) -> list[Message]:
            node = self.graph.keys[st.node]
            return prompts.neighbor_messages(q, plan, st.actions, st.notebook, node, keys)

        fitting = self._fit_items([self.graph.keys[n] for n in shown], build)
        if fitting < len(shown):
            self.counters["window_cuts"] += 1
            shown = shown[:fitting]
        reply = self._generate(build([self.graph.keys[n] for n in shown]))
        call = self._decide(reply, "neighbors", st)
        if call.name == "termination":
            self._record(path, st, "neighbors", call, reply)
            self._stop(path, st, "termination")
            return
        if self.s.node_selection == "random":
            target: int | None = self.rng.choice(shown)
            note = "random neighbour (no node selection)"
        else:
            target = self.graph.find(call.args[0], shown) if call.args else None
            note = ""
        if target is None:
            self.counters["invalid_arguments"] += 1
            fallback = Call("termination", call.args, fallback=True)
            self.counters["fallback_actions"] += 1
            self._record(path, st, "neighbors", fallback, reply, note="not a neighbour: stop")
            self._stop(path, st, "termination (unknown neighbour)")
            return
        self._record(
            path, st, "neighbors", call, reply, next_node=self.graph.keys[target], note=note
        )
        st.node = target
        st.visited_nodes.append(target)
        st.stage = "atomic_facts"
