"""End to end: generate a small set, evaluate two cheap methods through the CLI,
check the table, the JSON, the results file and resuming; the answer path with a
scripted LLM, and once with the real small model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lcr.cli.eval import eval_group
from lcr.errors import LcrError, UsageError
from lcr.eval import runner
from lcr.eval.summary import markdown_builds, summarize
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.store import Index
from tests.fakes import ForbiddenLLM, ScriptedLLM


@pytest.fixture()
def niah_set(tmp_path: Path) -> Path:
    path = tmp_path / "niah.jsonl"
    res = CliRunner().invoke(
        eval_group,
        ["generate", "niah-multikey", "--length", "3000", "--count", "6", "-o", str(path)],
    )
    assert res.exit_code == 0, res.output
    return path


def test_two_methods_through_cli_table_json_and_resume(niah_set: Path) -> None:
    cli = CliRunner()
    args = [str(niah_set), "--method", "bm25", "-m", "tfidf", "--retrieval-only", "-k", "3"]
    res = cli.invoke(eval_group, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["new"] == 12 and out["skipped"] == 0 and out["questions"] == 6
    summary = out["summary"]
    assert set(summary["methods"]) == {"bm25", "tfidf"}
    assert "em" not in summary["metrics"]  # no answers in retrieval-only mode
    for method in ("bm25", "tfidf"):
        row = summary["methods"][method]
        assert row["questions"] == 6
        # the needle's key is in the question: lexical retrieval finds it every time
        assert row["recall"]["mean"] == 1.0
        assert row["answer_in_evidence"]["mean"] == 1.0
        assert row["recall"]["low"] <= row["recall"]["mean"] <= row["recall"]["high"]
        assert 0 < row["evidence_tokens"]["mean"] <= 3 * 200
    assert summary["paired"]["a"] == "bm25" and "recall" in summary["paired"]["tests"]
    assert summary["paired"]["tests"]["recall"]["diff"] == 0.0
    # one index per generated document; neither method builds with an LLM
    for method in ("bm25", "tfidf"):
        build = summary["build"][method]
        assert build["indexes"] == 6 and build["build_s"]["mean"] > 0
        assert "llm_calls" not in build

    results = niah_set.with_name("niah.results.jsonl")
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(records) == 12
    rec = records[0]
    assert rec["answer"] is None and len(rec["evidence"]) == 3
    assert rec["usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "calls": 0,
        "cached_tokens": 0,
    }
    assert rec["metrics"]["wall_s"] > 0 and rec["metrics"]["flops"] == 0
    assert (niah_set.parent / "niah.indexes").is_dir()
    assert len(list((niah_set.parent / "niah.indexes").glob("*.idx"))) == 6

    # a rerun skips everything; the table lists both methods
    res = cli.invoke(eval_group, args)
    assert res.exit_code == 0, res.output
    assert "bm25" in res.output and "tfidf" in res.output and "recall" in res.output
    assert "paired bootstrap" in res.output
    assert "index builds" in res.output
    assert not any("…" in line for line in res.output.splitlines())
    assert len(results.read_text().splitlines()) == 12

    # another -k is another run: only it is computed
    res = cli.invoke(eval_group, [*args[:-1], "1", "--json", "--limit", "2"])
    out = json.loads(res.output)
    assert out["new"] == 4 and out["skipped"] == 0
    assert len(results.read_text().splitlines()) == 16


def test_build_and_query_settings_in_one_command(niah_set: Path, tmp_path: Path) -> None:
    opts = runner.RunOptions(
        methods=["bm25"],
        retrieval_only=True,
        out=tmp_path / "s.jsonl",
        limit=1,
        sets=["bm25.chunk_tokens=64", "bm25.top_k=2"],
    )
    outcome = runner.run(niah_set, Models.with_objects(llm=ForbiddenLLM()), opts)
    rec = outcome.records[0]
    assert len(rec["evidence"]) == 2
    assert rec["settings"]["build"]["chunk_tokens"] == 64
    assert rec["metrics"]["evidence_tokens"] <= 2 * 70


def test_resume_after_interruption_and_torn_line(niah_set: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    opts = runner.RunOptions(methods=["bm25"], retrieval_only=True, out=out, limit=3)
    first = runner.run(niah_set, Models.with_objects(llm=ForbiddenLLM()), opts)
    assert first.new == 3
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])  # killed mid-write
    opts.limit = None
    again = runner.run(niah_set, Models.with_objects(llm=ForbiddenLLM()), opts)
    assert again.new == 4 and again.skipped == 2
    assert [r["id"] for r in again.records] == [f"niah-multikey-{i}" for i in range(6)]


class CountedLLM(ScriptedLLM):
    """A scripted LLM that reports a parameter count, as the real backend can."""

    def num_parameters(self) -> int:
        return 135_000_000


def test_answer_path_with_scripted_llm(niah_set: Path, tmp_path: Path) -> None:
    llm = CountedLLM(words=400)
    models = Models.with_objects(llm=llm, spec=ModelSpec(llm="smollm2-135m"))
    # judged by the support check: the scripted echo has no quote of its own to check
    support = ["answer.check=support"]
    opts = runner.RunOptions(methods=["bm25"], k=2, limit=2, out=tmp_path / "a.jsonl", sets=support)
    outcome = runner.run(niah_set, models, opts)
    assert outcome.new == 2
    rec = outcome.records[0]
    m = rec["metrics"]
    # the scripted LLM echoes the prompt, which holds the retrieved needle
    assert rec["answer"] and m["match_all"] == 1.0 and m["match_part"] == 1.0
    assert 0 <= m["f1"] < 0.2 and m["em"] == 0.0 and 0 <= m["rouge_l"] < 0.2
    # the answer alone: the support check of answer.not_found=abstain (lcr's default)
    # reads words, and asks the LLM nothing unless answer.p_yes=true
    assert m["llm_calls"] == 1 and m["prompt_tokens"] > 0 and m["completion_tokens"] > 0
    assert m["flops"] == pytest.approx(2 * 0.135e9 * (m["prompt_tokens"] + m["completion_tokens"]))
    assert rec["usage"]["calls"] == 1 and rec["models"]["llm"] == "scripted-test-llm"
    assert 0.0 <= rec["support"] <= 1.0
    # the same settings with another model is another run
    other = ScriptedLLM()
    other.model_id = "other-llm"
    assert runner.run(niah_set, Models.with_objects(llm=other), opts).new == 2
    assert runner.run(niah_set, Models.with_objects(llm=CountedLLM()), opts).new == 0


def test_user_errors_are_lcr_errors(niah_set: Path, tmp_path: Path) -> None:
    models = Models.with_objects(llm=ForbiddenLLM())
    with pytest.raises(UsageError, match="unknown method"):
        runner.run(niah_set, models, runner.RunOptions(methods=["nope"], retrieval_only=True))
    with pytest.raises(UsageError, match="--method"):
        runner.run(niah_set, models, runner.RunOptions(methods=[], retrieval_only=True))
    with pytest.raises(UsageError):
        runner.run(
            niah_set,
            models,
            runner.RunOptions(methods=["bm25"], retrieval_only=True, sets=["bm25.nokey=1"]),
        )
    with pytest.raises(UsageError, match=r"unknown setting bm25.zz; valid: .*chunk_tokens.*top_k"):
        runner.run(
            niah_set,
            models,
            runner.RunOptions(methods=["bm25"], retrieval_only=True, sets=["bm25.zz=1"]),
        )
    with pytest.raises(LcrError, match="no dataset"):
        runner.run(tmp_path / "x.jsonl", models, runner.RunOptions(methods=["bm25"]))
    res = CliRunner().invoke(eval_group, ["generate", "vt", "--length", "50", "-o", "-"])
    assert isinstance(res.exception, UsageError)
    res = CliRunner().invoke(eval_group, ["generate", "nope", "--length", "5k", "-o", "-"])
    assert res.exit_code == 2  # click's own usage error
    res = CliRunner().invoke(eval_group, ["--help"])
    assert res.exit_code == 0 and "prepare" in res.output and "DATA.jsonl" in res.output


@pytest.mark.slow
def test_real_small_model_answers(niah_set: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(
        eval_group,
        [
            str(niah_set),
            "-m",
            "bm25",
            "-k",
            "2",
            "--limit",
            "1",
            "--llm",
            "smollm2-135m",
            "--device",
            "cpu",
            "--max-new-tokens",
            "24",
            "--json",
            "--set",
            "answer.check=quote",
            "--out",
            str(tmp_path / "s.jsonl"),
        ],
    )
    assert res.exit_code == 0, res.output
    row = json.loads(res.output)["summary"]["methods"]["bm25"]
    # the answer, and the quote check of answer.not_found=abstain: no LLM call
    assert row["llm_calls"]["mean"] == 1.0
    record = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])
    assert "quotes" in record and "quote_check" in record  # what the check found
    assert 0 < row["completion_tokens"]["mean"] <= 24
    assert row["flops"]["mean"] > 0


def test_table_is_wide_when_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lcr eval ... > log` keeps every column whole instead of rich's 80-column cut."""
    from lcr.cli.eval import table_console

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert table_console().width == 240
    monkeypatch.setenv("COLUMNS", "100")
    assert table_console().width == 100


def test_build_cost_of_an_llm_built_method(
    niah_set: Path, tmp_path: Path, embedder: object
) -> None:
    """RAPTOR's summaries are counted per index, and still reported when a rerun skips all."""
    llm = CountedLLM(words=30)
    models = Models.with_objects(llm=llm, embedder=embedder)  # type: ignore[arg-type]
    opts = runner.RunOptions(
        methods=["raptor"], retrieval_only=True, limit=2, out=tmp_path / "b.jsonl"
    )
    first = runner.run(niah_set, models, opts)
    assert first.new == 2 and len(first.builds) == 2
    summaries = 0
    for build in first.builds:
        index = Index.open(niah_set.parent / "niah.indexes" / build["index"])
        nodes = index.reader("raptor").nodes()
        summaries += sum(1 for n in nodes if n.level > 0)
        assert build["llm_calls"] == sum(1 for n in nodes if n.level > 0)
        assert build["prompt_tokens"] > 0 and build["completion_tokens"] > 0
    assert summaries == llm.usage.calls > 0

    again = runner.run(niah_set, Models.with_objects(llm=ForbiddenLLM()), opts)
    assert again.new == 0 and again.builds == first.builds
    table = summarize(again.records, ["raptor"], retrieval_only=True, builds=again.builds)
    row = table["build"]["raptor"]
    assert row["indexes"] == 2 and row["llm_calls"]["mean"] == summaries / 2
    assert "| raptor | 2 |" in markdown_builds(table)


def test_retrieval_only_loads_no_llm_for_mixpr_and_says_so_when_auto_does(
    niah_set: Path, tmp_path: Path
) -> None:
    """The README's ``lcr eval ... -m bm25 -m mixpr --retrieval-only`` needs no LLM."""
    notes: list[str] = []
    opts = runner.RunOptions(
        methods=["bm25", "mixpr"], retrieval_only=True, out=tmp_path / "m.jsonl", limit=2,
        note=notes.append,
    )  # fmt: skip
    outcome = runner.run(niah_set, Models.with_objects(llm=ForbiddenLLM()), opts)
    assert outcome.new == 4 and notes == []

    class LazyModels(Models):
        """Loads a scripted router LLM on first use, as real models load theirs."""

        loads = 0

        @property
        def llm(self) -> ScriptedLLM:
            if self._loaded.llm is None:
                LazyModels.loads += 1
                self._loaded.llm = ScriptedLLM(yes_probability=0.1)
            return self._loaded.llm  # type: ignore[return-value]

    opts.out, opts.sets = tmp_path / "a.jsonl", ["mixpr.mode=auto"]
    outcome = runner.run(niah_set, LazyModels(), opts)
    assert outcome.new == 4 and LazyModels.loads == 1
    assert len(notes) == 1 and notes[0].startswith("mixpr retrieval loads the LLM")
    mixpr = [r for r in outcome.records if r["method"] == "mixpr"]
    assert all(r["usage"]["calls"] == 1 for r in mixpr)


def test_gold_reads_only_the_gold_evidence(niah_set: Path, tmp_path: Path) -> None:
    """``-m gold``: the answer step reads each question's gold evidence and nothing else,
    beside a retriever in the same run; a rerun finds it done."""
    llm = ScriptedLLM(words=400)  # echoes the prompt: what the answer step read
    llm.num_parameters = 135_000_000  # type: ignore[attr-defined]  # what FLOPs count by
    opts = runner.RunOptions(methods=["gold", "bm25"], limit=2, out=tmp_path / "g.jsonl")
    outcome = runner.run(niah_set, Models.with_objects(llm=llm), opts)
    assert outcome.new == 4
    gold = [r for r in outcome.records if r["method"] == "gold"]
    bm25 = [r for r in outcome.records if r["method"] == "bm25"]
    assert len(gold) == len(bm25) == 2
    for g, b in zip(gold, bm25, strict=True):
        assert g["metrics"]["recall"] == 1.0 and g["metrics"]["answer_found"] == 1.0
        assert g["metrics"]["evidence_tokens"] < b["metrics"]["evidence_tokens"]
        assert all(ev["id"].startswith("gold") for ev in g["evidence"])
        assert g["answer"] and g["usage"]["calls"] == 1  # the answer (its check asks nothing)
        per_token = b["metrics"]["flops"] / (
            b["usage"]["prompt_tokens"] + b["usage"]["completion_tokens"]
        )
        assert per_token == 2 * 135_000_000  # the same model: gold's calls cost alike
        used = g["usage"]["prompt_tokens"] + g["usage"]["completion_tokens"]
        assert g["metrics"]["flops"] == pytest.approx(per_token * used)
    again = runner.run(niah_set, Models.with_objects(llm=ForbiddenLLM()), opts)
    assert again.new == 0
    only = runner.RunOptions(methods=["gold"], retrieval_only=True, out=tmp_path / "r.jsonl")
    with pytest.raises(UsageError, match="-m gold"):
        runner.run(niah_set, Models.with_objects(llm=ForbiddenLLM()), only)


def test_indexes_follow_the_results_file_when_the_data_folder_is_read_only(
    niah_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data set on a read-only share: ``lcr eval --out`` elsewhere builds its indexes
    beside the results file (the run must write there anyway), and ``report`` finds
    them; the data's folder is never written. The system's answer is stood in for,
    since root may write anywhere."""
    data_folder = niah_set.parent
    monkeypatch.setattr(runner, "_writable", lambda folder: folder != data_folder)
    out = tmp_path / "runs" / "niah.jsonl"
    args = [str(niah_set), "-m", "bm25", "--retrieval-only", "-k", "3", "--limit", "2"]
    res = CliRunner().invoke(eval_group, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert not (data_folder / "niah.indexes").exists()
    assert len(list((tmp_path / "runs" / "niah.indexes").glob("*.idx"))) == 2
    page = tmp_path / "runs" / "page.html"
    res = CliRunner().invoke(eval_group, ["report", str(out), "-o", str(page)])
    assert res.exit_code == 0, res.output
    assert "What building one index cost" in page.read_text()  # the builds were found


def test_the_index_folder_beside_the_data_wins_while_it_can_be_used(tmp_path: Path) -> None:
    data, out = tmp_path / "d" / "set.jsonl", tmp_path / "o" / "set.results.jsonl"
    data.parent.mkdir()
    assert runner.choose_index_dir(data, out, lambda f: True) == tmp_path / "d" / "set.indexes"
    assert runner.choose_index_dir(data, out, lambda f: False) == tmp_path / "o" / "set.indexes"
    (tmp_path / "d" / "set.indexes").mkdir()  # made earlier (or shipped): read from it
    assert runner.choose_index_dir(data, out, lambda f: False) == tmp_path / "d" / "set.indexes"
    assert runner.indexes_beside(Path("a/x.jsonl")) == Path("a/x.indexes")
    assert runner.indexes_beside(Path("a/x.out")) == Path("a/x.out.indexes")
