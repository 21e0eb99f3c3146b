"""The dataset format, the generators (determinism, gold where claimed) and the
converters on the real files of ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lcr.cli.eval import eval_group
from lcr.errors import InputError, UsageError
from lcr.eval import convert, dataset, generate
from lcr.eval.dataset import Document, GoldEvidence, Question
from lcr.text.tokens import count_tokens
from tests.conftest import FIXTURES

# ------------------------------------------------------------------ format


def test_round_trip_writes_shared_documents_once(tmp_path: Path) -> None:
    doc = Document("d1", "Title", "Alpha beta.\nThe cook hid the key. Gamma.")
    other = Document("d2", "", "Second document text.")
    qs = [
        Question("q1", "Who hid the key?", ["the cook"], [doc], [GoldEvidence("d1", 12, 33)]),
        Question("q2", "What?", ["x", "y"], [doc, other], [GoldEvidence("d1", text="Gamma")]),
        Question("q3", "Which?", ["d2"], [other], [GoldEvidence("d2")], task="t", meta={"a": 1}),
    ]
    path = tmp_path / "set.jsonl"
    assert dataset.save(qs, path) == 3
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[1].count("The cook hid the key") == 0  # d1 is a reference on line 2
    assert json.loads(lines[1])["documents"][0] == {"id": "d1"}
    back = dataset.load(path)
    assert [q.id for q in back] == ["q1", "q2", "q3"]
    assert back[1].documents[0].text == doc.text
    assert back[2].evidence[0].whole_document and back[2].meta == {"a": 1}
    spans = dataset.gold_spans(back[0]) + dataset.gold_spans(back[1])
    assert spans[0] == ("d1", 12, 33) and doc.text[12:33] == "The cook hid the key."
    assert spans[1] is not None and doc.text[spans[1][1] : spans[1][2]] == "Gamma"
    assert back[0].corpus_key() != back[1].corpus_key()
    assert dataset.load(path, limit=1)[0].id == "q1"


def test_path_documents_and_whitespace_tolerant_strings(tmp_path: Path) -> None:
    (tmp_path / "book.txt").write_text("One  two\nthree four.", encoding="utf-8")
    line = {
        "id": 7,
        "question": "q?",
        "answers": "four",
        "documents": ["book.txt"],
        "evidence": [{"text": "two three"}, {"text": "absent words"}],
    }
    (tmp_path / "s.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    q = dataset.load(tmp_path / "s.jsonl")[0]
    assert q.id == "7" and q.answers == ["four"]
    found, missing = dataset.gold_spans(q)
    assert found is not None and q.documents[0].text[found[1] : found[2]] == "two\nthree"
    assert missing is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"id": "a", "question": "q", "answers": []}', "'documents'"),
        ('{"id": "a", "question": " ", "documents": [{"id": "d", "text": "t"}]}', "empty"),
        ('{"id": "a", "question": "q", "documents": [{"id": "d"}]}', "referenced before"),
        (
            '{"id": "a", "question": "q", "documents": [{"id": "d", "text": "abc"}],'
            ' "evidence": [{"doc": "d", "start": 1, "end": 9}]}',
            "past document",
        ),
        (
            '{"id": "a", "question": "q", "documents": [{"id": "d", "text": "abc"}],'
            ' "evidence": [{"doc": "zz", "text": "a"}]}',
            "unknown document",
        ),
    ],
)
def test_bad_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message) as err:
        dataset.load(path)
    assert "bad.jsonl:1" in str(err.value)


def test_duplicate_ids_and_missing_file(tmp_path: Path) -> None:
    rec = {"id": "a", "question": "q", "answers": ["x"], "documents": [{"id": "d", "text": "t"}]}
    path = tmp_path / "dup.jsonl"
    path.write_text((json.dumps(rec) + "\n") * 2, encoding="utf-8")
    with pytest.raises(InputError, match="used twice"):
        dataset.load(path)
    with pytest.raises(InputError, match="no dataset"):
        dataset.load(tmp_path / "none.jsonl")


# ------------------------------------------------------------------ generators


@pytest.mark.parametrize("kind", generate.KINDS)
def test_generators_gold_is_where_claimed(kind: str) -> None:
    qs = generate.generate(kind, 3000, 4, seed=3)
    assert len(qs) == 4 and len({q.id for q in qs}) == 4
    for q in qs:
        text = q.documents[0].text
        tokens = count_tokens(text)
        assert 2700 <= tokens <= 3000, tokens
        spans = dataset.gold_spans(q)
        assert spans and all(s is not None for s in spans)
        golds = [text[s[1] : s[2]] for s in spans if s is not None]
        for ans in q.answers:
            assert any(ans in g for g in golds), (ans, golds)
        if kind.startswith("niah"):
            assert all(g.startswith("One of the special magic numbers for ") for g in golds)
            assert len(golds) == (4 if kind in ("niah-multivalue", "niah-multiquery") else 1)
            if kind == "niah-multikey":
                assert text.count("One of the special magic numbers") == 4
        if kind == "vt":
            assert len(golds) == 5 and golds[0] == f"VAR {q.answers[0]} = {q.question.split()[-5]}."
            # the chain is in document order
            assert [s[1] for s in spans if s] == sorted(s[1] for s in spans if s)
        if kind == "hashhop":
            chain = q.meta["chain"]
            assert golds == [f"{chain[i]} = {chain[i + 1]}" for i in range(2)]
            assert chain[0] in q.question and q.answers == [chain[-1]]


def test_niah_depths_spread_evenly() -> None:
    qs = generate.generate("niah-single", 2000, 10, seed=0)
    depths = [q.meta["depths"][0] for q in qs]
    assert depths == pytest.approx([(j + 0.5) / 10 for j in range(10)], abs=1e-3)
    positions = [q.evidence[0].start / len(q.documents[0].text) for q in qs]  # type: ignore[operator]
    assert positions == sorted(positions)
    assert positions[0] < 0.1 and positions[-1] > 0.9


def test_hashhop_hops_and_shuffle() -> None:
    q = generate.hashhop(4000, 1, seed=1, hops=6)[0]
    assert len(q.evidence) == 6
    starts = [e.start or 0 for e in q.evidence]
    assert starts != sorted(starts)  # lines are shuffled, the chain is not in order
    with pytest.raises(UsageError):
        generate.hashhop(4000, 1, seed=1, hops=7)
    with pytest.raises(UsageError):
        generate.generate("niah-single", 4000, 1, 0, hops=2)


def test_same_seed_same_bytes_through_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    outs = []
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        path = tmp_path / f"{name}.jsonl"
        res = runner.invoke(
            eval_group,
            [
                "generate",
                "vt",
                "--length",
                "4k",
                "--count",
                "3",
                "--seed",
                str(seed),
                "-o",
                str(path),
            ],
        )
        assert res.exit_code == 0, res.output
        outs.append(path.read_bytes())
    assert outs[0] == outs[1]
    assert outs[0] != outs[2]


def test_parse_length() -> None:
    assert generate.parse_length("32k") == 32768
    assert generate.parse_length("4096") == 4096
    assert generate.parse_length("1m") == 1024 * 1024
    with pytest.raises(UsageError):
        generate.parse_length("lots")


# ------------------------------------------------------------------ converters (real files)
# The small excerpts in tests/data run everywhere; the whole sets (shared_data) when present.


def test_squality_excerpt() -> None:
    qs = convert.prepare("squality", FIXTURES / "squality.jsonl")
    assert [q.question for q in qs] == [
        "What is the plot of the story?",
        "Describe the setting of the story.",
    ]
    assert {q.documents[0].title for q in qs} == {"Jinx Ship To The Rescue"}
    assert all(len(q.answers) == 4 and all(a.strip() for a in q.answers) for q in qs)
    assert len(convert.prepare("squality", FIXTURES / "squality.jsonl", limit=1)) == 1


def test_qmsum_excerpt_gold_spans_are_the_turns() -> None:
    path = FIXTURES / "qmsum.jsonl"
    qs = convert.prepare("qmsum", path)
    turns = json.loads(path.read_text(encoding="utf-8"))["meeting_transcripts"]
    assert len(qs) == 2 and all(q.evidence for q in qs)
    for q, (start, end) in zip(qs, [(5, 27), (5, 14)], strict=True):
        ev = q.evidence[0]
        text = q.documents[0].text[ev.start : ev.end]
        assert text.startswith(f"{turns[start]['speaker']}: {turns[start]['content']}")
        assert text.endswith(turns[end]["content"])
        assert text.count("\n") == end - start


def test_babilong_excerpt_hides_the_facts_in_order(tmp_path: Path) -> None:
    src, filler = FIXTURES / "babi-qa2.txt", FIXTURES / "cinderella.txt"
    samples = convert.babi_samples(src)
    qs = convert.prepare("babilong", src, filler=filler, length=1024, seed=1, limit=3)
    assert len(samples) == 15 and len(qs) == 3
    for q in qs:
        s = samples[[x["line"] for x in samples].index(q.meta["babi_line"])]
        assert q.question == s["question"] and q.answers == [s["answer"]]
        text = q.documents[0].text
        assert 800 <= count_tokens(text) <= 1024
        facts = dict(s["facts"])
        found = sorted(text[e.start : e.end] for e in q.evidence)
        assert found == sorted(facts[i] for i in s["support"]) and len(found) == 2
        at = 0  # every fact of the story, in order (a fact may occur twice)
        for _, fact in s["facts"]:
            at = text.index(fact, at) + len(fact)


def test_prepare_cli_on_the_excerpt(tmp_path: Path) -> None:
    out = tmp_path / "sq.jsonl"
    args = ["prepare", "squality", str(FIXTURES / "squality.jsonl"), "-o", str(out)]
    res = CliRunner().invoke(eval_group, args)
    assert res.exit_code == 0, res.output
    assert len(dataset.load(out)) == 2
    assert out.read_text(encoding="utf-8").count('"text"') == 1  # written once, then referenced
    with pytest.raises(InputError):
        convert.prepare("qmsum", FIXTURES / "squality.jsonl")


def test_squality(shared_data: Path) -> None:
    qs = convert.prepare("squality", shared_data / "squality" / "dev.jsonl")
    assert len(qs) == 125
    assert len({q.documents[0].id for q in qs}) == 25
    assert all(len(q.answers) == 4 and all(a.strip() for a in q.answers) for q in qs)
    assert qs[0].question == "What is the plot of the story?"
    assert qs[0].documents[0].title == "Jinx Ship To The Rescue"
    assert len(convert.prepare("squality", shared_data / "squality" / "dev.jsonl", limit=7)) == 7


def test_qmsum_gold_spans_are_the_turns(shared_data: Path) -> None:
    path = shared_data / "qmsum" / "val.jsonl"
    qs = convert.prepare("qmsum", path)
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    general = sum(len(r["general_query_list"]) for r in raw)
    specific = sum(len(r["specific_query_list"]) for r in raw)
    assert len(qs) == general + specific == 272
    assert len({q.documents[0].id for q in qs}) == 35
    with_ev = [q for q in qs if q.evidence]
    assert len(with_ev) == specific
    q = with_ev[0]  # first specific query of the first meeting: turns 459..530
    turns = raw[0]["meeting_transcripts"]
    ev = q.evidence[0]
    text = q.documents[0].text[ev.start : ev.end]
    first, last = turns[459], turns[530]
    assert text.startswith(f"{first['speaker']}: {first['content']}")
    assert text.endswith(last["content"])
    assert text.count("\n") == 530 - 459


def test_odsum_corpus_and_document_gold(shared_data: Path) -> None:
    qs = convert.prepare("odsum", shared_data / "odsum")
    assert len(qs) == 125
    assert all(len(q.documents) == 25 for q in qs)
    assert len({q.corpus_key() for q in qs}) == 1  # one shared index
    for q in qs[:10]:
        gold = q.doc(q.evidence[0].doc or "")
        assert q.evidence[0].whole_document
        assert gold.text.strip()
    titles = {q.doc(q.evidence[0].doc or "").title for q in qs}
    assert len(titles) == 25


def test_babilong_facts_in_order_and_gold_supporting(shared_data: Path, tmp_path: Path) -> None:
    src = shared_data / "babi" / "qa2_two-supporting-facts_test.txt"
    filler = shared_data / "stories" / "cinderella.txt"
    qs = convert.prepare("babilong", src, filler=filler, length=4096, seed=1, limit=5)
    samples = convert.babi_samples(src)
    assert len(qs) == 5 and len(samples) == 1000
    for q in qs:
        s = samples[[x["line"] for x in samples].index(q.meta["babi_line"])]
        assert q.question == s["question"] and q.answers == [s["answer"]]
        text = q.documents[0].text
        assert 3500 <= count_tokens(text) <= 4096
        facts = dict(s["facts"])
        assert len(q.evidence) == len(s["support"]) == 2
        found = sorted(text[e.start : e.end] for e in q.evidence)
        assert found == sorted(facts[i] for i in s["support"])
        # every fact of the story, in order
        pos = [text.find(f) for _, f in s["facts"]]
        assert all(p >= 0 for p in pos) and pos == sorted(pos)
    again = convert.prepare("babilong", src, filler=filler, length=4096, seed=1, limit=5)
    assert [q.documents[0].text for q in again] == [q.documents[0].text for q in qs]
    with pytest.raises(UsageError, match="--filler"):
        convert.prepare("babilong", src)


def test_prepare_cli_and_errors(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "sq.jsonl"
    res = CliRunner().invoke(
        eval_group,
        [
            "prepare",
            "squality",
            str(shared_data / "squality" / "dev.jsonl"),
            "-o",
            str(out),
            "--limit",
            "6",
        ],
    )
    assert res.exit_code == 0, res.output
    qs = dataset.load(out)
    assert len(qs) == 6
    # the story is written once, then referenced
    assert out.read_text(encoding="utf-8").count('"text"') == 2  # story 1 and story 2
    with pytest.raises(InputError):
        convert.prepare("qmsum", shared_data / "squality" / "dev.jsonl")
    with pytest.raises(InputError, match="no file"):
        convert.prepare("squality", tmp_path / "missing.jsonl")
