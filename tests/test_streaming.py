"""The answer on the screen as it is written (issue #40, item 4): the pieces a backend
hands on, the OpenAI event stream, ``lcr ask`` streaming to a terminal through click's
runner, ``--answer-only`` and ``--evidence``. Real text (tests/data), real indexes; the
LLM is scripted here, and real in tests/test_openai_backend.py and
tests/test_streaming_models.py."""

from __future__ import annotations

import io
import json
import random
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from lcr.cli.answer import _LineWrapper
from lcr.cli.models import ModelsFactory
from lcr.cli.output import wrapped
from lcr.models.base import Generation, Message, OnText
from lcr.models.openai_stream import StreamedReply, StreamFailure, read_events
from lcr.models.text_stream import TextPieces
from tests.fakes import ScriptedLLM
from tests.test_cli import run as run_cli

QUESTION = "Who was kind to the bird?"


# ------------------------------------------------------------------ the pieces
def stream_of(texts: Sequence[str], stop: Sequence[str] = ()) -> tuple[list[str], TextPieces]:
    sent: list[str] = []
    pieces = TextPieces(sent.append, stop)
    for text in texts:
        pieces.update(text)
    return sent, pieces


def test_pieces_never_run_ahead_of_a_stop_string() -> None:
    grown = ["The", "The key", "The key\n", "The key\nQ", "The key\nQuestion:"]
    sent, pieces = stream_of(grown, stop=["\nQuestion:"])
    assert "".join(sent) == "The key"  # "\n" and "\nQ" were held back, then cut
    pieces.finish("The key")
    assert "".join(sent) == "The key"
    sent, pieces = stream_of(["Yes", "Yes\n", "Yes\nand"], stop=["\nQuestion:"])
    assert "".join(sent) == "Yes\nand"  # held back only while it could be the stop


def test_a_half_decoded_character_waits_for_its_last_bytes() -> None:
    sent, pieces = stream_of(["caf", "caf\ufffd", "café", "café!"])
    assert sent == ["caf", "é", "!"]  # nothing sent while "é" was half there
    pieces.finish("café!")
    assert "".join(sent) == "café!"


def test_finish_sends_the_rest_and_never_repeats() -> None:
    sent, pieces = stream_of(["To", "Toby f"])
    pieces.finish("Toby found it")
    pieces.finish("Toby found it")
    assert sent == ["To", "by f", "ound it"]


# ------------------------------------------------------------ the event stream
def events(*chunks: str) -> bytes:
    return b"".join(f"data: {c}\n\n".encode() for c in chunks)


def delta(text: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})


def test_server_sent_events_become_one_reply() -> None:
    usage = {"prompt_tokens": 40, "completion_tokens": 3}
    body = (
        b": a comment line\n\n"
        + events(json.dumps({"choices": [{"delta": {"role": "assistant"}}]}))
        + events(delta("Toby"), delta(" found"))
        + b"data: "
        + delta(" it").encode()
        + b"\r\n\r\n"
        + events(json.dumps({"choices": [], "usage": usage}), "[DONE]")
    )
    shown: list[str] = []
    reply = StreamedReply(shown.append)
    read_events(io.BytesIO(body), 10_000, "server", reply.event)
    assert shown == ["Toby", " found", " it"]
    assert reply.reply() == {"choices": [{"message": {"content": "Toby found it"}}], "usage": usage}
    unsaid = StreamedReply(shown.append)
    read_events(io.BytesIO(events(delta("a"), delta(" b"), "[DONE]")), 10_000, "s", unsaid.event)
    assert unsaid.reply()["usage"] == {"completion_tokens": 2}  # a token an event


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (events(delta("x" * 300), "[DONE]"), r"more than 100 bytes"),
        (events(delta("Toby")), r"ended before the reply did"),
        (events("{not json"), r"not JSON"),
        (
            events(json.dumps({"error": {"message": "model\nunloaded"}})),
            r"mid-reply: model unloaded",
        ),
    ],
)
def test_a_broken_stream_is_one_clear_failure(body: bytes, message: str) -> None:
    with pytest.raises(StreamFailure, match=message):
        read_events(
            io.BytesIO(body), 100 if "x" * 300 in body.decode() else 10_000, "server", print
        )


# ------------------------------------------------------------ 80 columns, word by word
def test_streamed_words_are_laid_out_as_the_whole_answer() -> None:
    rng = random.Random(7)
    words = [
        rng.choice(["a", "key", "lighthouse", "Toby", "x" * 90, "keeper's"]) for _ in range(80)
    ]
    answer = " ".join(words[:40]) + "\n" + " ".join(words[40:])
    for _ in range(5):
        out: list[str] = []
        line = _LineWrapper(out.append, start="A: ")
        cuts = sorted(rng.sample(range(1, len(answer)), 30))
        for a, b in zip([0, *cuts], [*cuts, len(answer)], strict=True):
            line.feed(answer[a:b])
        line.close()
        text = "".join(out)
        assert all(len(row) <= 80 for row in text.splitlines()), text
        # textwrap lays out the same words on the same lines, long ones cut alike
        assert text == wrapped("A: " + answer) + "\n"


# ------------------------------------------------------------ lcr ask, scripted
class ScriptedReply(ScriptedLLM):
    """Replies ``reply`` a word at a time; notes stdout as each word is handed on. The
    support check (``answer.not_found=abstain``) hears ``yes_probability``: by default
    it keeps the reply, so these tests see the streamed answer stand."""

    def __init__(self, reply: str, yes_probability: float = 1.0) -> None:
        super().__init__(yes_probability=yes_probability)
        self.reply = reply
        self.stdout_seen: list[str] = []
        self.streamed: list[bool] = []

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_text: OnText | None = None,
    ) -> Generation:
        self.prompts.append(list(messages))
        self.streamed.append(on_text is not None)
        words = self.reply.split(" ")
        for i, word in enumerate(words if on_text is not None else []):
            on_text(word if i == 0 else " " + word)
            sys.stdout.flush()
            self.stdout_seen.append(sys.stdout.buffer.getvalue().decode())  # type: ignore[attr-defined]
        self.usage.add(100, len(words))
        return Generation(self.reply, 100, len(words))


@pytest.fixture()
def index(tmp_path: Path, cinderella: Path) -> Path:
    story = Path(shutil.copy(cinderella, tmp_path / "cinderella.txt"))
    code, _, err = run(["index", str(story), "-m", "bm25", "-q"])
    assert code == 0, err
    return story.with_suffix(".idx")


_MODELS: ModelsFactory | None = None  # the models `use` injects through the CLI's seam


def run(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    """``lcr ARGS``; ``ask`` with the support check, whose reply is streamed (a reply the
    quote check must pass is shown only once verified: tests/test_terminal.py). The
    scripted replies are not the story's words, so nothing is withheld (``guess``) unless
    a test says to abstain (a check would withhold them after streaming, as it may)."""
    if args[0] == "ask" and "answer.check" not in " ".join(args):
        args = [*args, "--set", "answer.check=support"]
    if args[0] == "ask" and "answer.not_found" not in " ".join(args):
        args = [*args, "--set", "answer.not_found=guess"]
    return run_cli(args, stdin=stdin, models=_MODELS)


def use(monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM, *, terminal: bool) -> None:
    from lcr.models.container import Models

    factory: ModelsFactory = lambda spec, progress: Models.with_objects(llm=llm, spec=spec)  # noqa: E731
    monkeypatch.setattr(sys.modules[__name__], "_MODELS", factory)
    monkeypatch.setattr("lcr.cli.answer.stdout_is_terminal", lambda: terminal)


def test_ask_on_a_terminal_streams_the_answer_before_it_is_done(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedReply("Her stepmother's bird was never kind, said the prince.")
    use(monkeypatch, llm, terminal=True)
    code, out, err = run(["ask", str(index), QUESTION, "-k", "3"])
    assert code == 0, err
    assert llm.streamed == [True]
    # while the model was still writing, its first words were already on the screen
    assert llm.stdout_seen[3].endswith("A: Her stepmother's bird"), llm.stdout_seen[3]
    assert "Evidence" not in llm.stdout_seen[-1]
    assert re.search(r"^reading [\d,]+ tokens of evidence$", err, re.M), err
    expected = f"Q: {QUESTION}\nA: {llm.reply}\n"
    assert out.startswith(expected), out
    # under the answer, the line that says why it has no quote, then the evidence
    assert re.match(r"( +\(no quote: [^\n]*\)\n)?\nEvidence \(bm25, ", out[len(expected) :]), out
    assert "final answer" not in out


def test_an_answer_changed_after_streaming_is_said_plainly(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedReply("The excerpts do not mention a bird.", yes_probability=0.0)
    use(monkeypatch, llm, terminal=True)
    abstain = ["--set", "answer.not_found=abstain"]  # lcr's default
    code, out, err = run(["ask", str(index), QUESTION, "-k", "2", *abstain])
    assert code == 0, err
    assert out.startswith(
        f"Q: {QUESTION}\nA: The excerpts do not mention a bird.\n"
        "final answer: not found in the document\n\nEvidence (bm25, "
    ), out


@pytest.mark.parametrize("quiet", [False, True])
def test_a_pipe_gets_the_whole_result_only(
    index: Path, monkeypatch: pytest.MonkeyPatch, quiet: bool
) -> None:
    llm = ScriptedReply("The bird helped her.")
    use(monkeypatch, llm, terminal=False)
    code, out, err = run(["ask", str(index), QUESTION, "-k", "2", *(["-q"] if quiet else [])])
    assert code == 0, err
    assert llm.streamed == [False] and "reading" not in err
    head = f"Q: {QUESTION}\nA: The bird helped her.\n"
    assert out.startswith(head), out
    # the line saying why it has no quote ("helped" is read nowhere), then the evidence
    assert re.match(r"( +\(no quote: [^\n]*\)\n)?\nEvidence \(bm25, ", out[len(head) :]), out


def test_json_stays_one_whole_object_on_a_terminal(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedReply("The bird helped her.")
    use(monkeypatch, llm, terminal=True)
    whole = ["--set", "answer.select=off"]  # the 6 chunks read whole, not their sentences
    code, out, err = run(["ask", str(index), QUESTION, "-k", "6", "--json", *whole])
    assert code == 0, err
    assert llm.streamed == [False] and "reading" not in err
    record = json.loads(out)
    assert record["answer"] == "The bird helped her." and len(record["evidence"]) == 6


def test_answer_only_prints_each_answer_alone(index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = ScriptedReply("The bird helped her.")
    use(monkeypatch, llm, terminal=True)
    questions = f"{QUESTION}\nWho lost a slipper?\n"
    # the scripted reply answers the second question with words its evidence lacks:
    # keep what the support check would withhold, this test is about the output
    keep = ["--set", "answer.support=0"]
    code, out, err = run(["ask", str(index), "-", "--answer-only", "-q", *keep], stdin=questions)
    assert code == 0, err
    assert out == "The bird helped her.\nThe bird helped her.\n"
    assert llm.streamed == [False, False]  # a string for scripts: never a half answer
    code, out, err = run(["ask", str(index), QUESTION, "--answer-only", "--json"])
    assert code == 2 and out == ""
    assert err == "lcr: --answer-only and --json are two different outputs: give one\n"


def test_evidence_listed_is_bounded_and_says_how_many_more(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, ScriptedReply("The birds."), terminal=False)
    for command in ("ask", "retrieve"):
        # the 6 chunks bm25 finds, read whole (not bm25's default selection of sentences)
        args = [command, str(index), QUESTION, "-k", "6", "--set", "answer.select=off"]
        code, out, err = run(args)
        assert code == 0, err
        assert len(re.findall(r"^\[\d\] score ", out, re.M)) == 5, out
        assert "Evidence (bm25, 6 nodes):" in out
        assert "\n... and 1 more (use --evidence all / --json)\n" in out
        code, out, _ = run([*args, "--evidence", "all"])
        assert len(re.findall(r"^\[\d\] score ", out, re.M)) == 6 and "more (use" not in out
        code, out, _ = run([*args, "--evidence", "2"])
        assert len(re.findall(r"^\[\d\] score ", out, re.M)) == 2 and "... and 4 more" in out
    code, out, err = run(["retrieve", str(index), QUESTION, "--evidence", "some"])
    assert code == 2 and out == ""
    assert "--evidence" in err and "'some' is not a count of items or 'all'" in err
    assert err.count("\n") == 1
