"""Issue 54, as a hostile user tried it: each row where a user meets it (the CLI or the
API), with bm25 and tfidf (no model) unless the row is about a model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lcr.store import Index
from lcr.store.writing import mark_made
from tests.conftest import needs
from tests.test_index_writers import run


def sources(index: Path) -> list[str]:
    return sorted(Path(d.name).name for d in Index.open(index).manifest.sources)


@pytest.fixture()
def texts(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, line in [
        ("a.txt", "Alpha rowed to the rock."),
        ("b.txt", "Beta lit the lamp."),
        ("c.txt", "Gamma rang the bell."),
    ]:
        out[name] = tmp_path / name
        out[name].write_text(line * 20, encoding="utf-8")
    return out


# ------------------------------------------------------- row 4: a symlinked index


def test_a_symlinked_index_stays_a_link_through_add_remove_and_force(
    tmp_path: Path, texts: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    real, link = tmp_path / "x.idx", tmp_path / "link.idx"
    assert run(["index", str(texts["a.txt"]), "-o", str(real), "-m", "bm25"], capsys)[0] == 0
    link.symlink_to(real.name)
    steps = [
        (["index", str(texts["b.txt"]), "-o", str(link), "--add"], ["a.txt", "b.txt"]),
        (["remove", str(link), "a.txt"], ["b.txt"]),
        (["index", str(texts["c.txt"]), "-o", str(link), "-m", "bm25", "--force"], ["c.txt"]),
    ]
    for args, expected in steps:
        code, _, err = run(args, capsys)
        assert code == 0, err
        assert link.is_symlink() and os.readlink(link) == real.name, args
        assert sources(real) == expected, args
        assert sources(link) == expected, args
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["link.idx", "x.idx", *texts])


# ------------------------------------- row 5: a user's folder that looks like lcr's


@pytest.mark.parametrize("kind", ["new", "tmp", "old", "failed"])
def test_a_users_folder_beside_an_index_is_never_removed(
    tmp_path: Path, texts: dict[str, Path], capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    index = tmp_path / "x.idx"
    assert run(["index", str(texts["a.txt"]), "-o", str(index), "-m", "bm25"], capsys)[0] == 0
    mine = tmp_path / f".x.idx.{kind}-userdata"
    mine.mkdir()
    (mine / "thesis.tex").write_text("my thesis", encoding="utf-8")
    # what a killed lcr left: marked as its own, so recovery still clears it
    left = tmp_path / f".x.idx.{kind}-0badf00d"
    left.mkdir()
    mark_made(left)
    code, _, err = run(["index", str(texts["b.txt"]), "-o", str(index), "--add"], capsys)
    assert code == 0, err
    code, _, err = run(["index", str(texts["a.txt"]), str(texts["b.txt"]), "-o", str(index),
                        "-m", "tfidf"], capsys)  # fmt: skip
    assert code == 0, err
    assert (mine / "thesis.tex").read_text(encoding="utf-8") == "my thesis"
    assert not left.exists()
    assert sources(index) == ["a.txt", "b.txt"]


def test_an_index_swapped_out_by_a_killed_writer_comes_back(
    tmp_path: Path, texts: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A two-rename swap killed between its renames: the marked old index returns."""
    index = tmp_path / "x.idx"
    assert run(["index", str(texts["a.txt"]), "-o", str(index), "-m", "bm25"], capsys)[0] == 0
    aside = tmp_path / ".x.idx.old-12345678"
    (index / ".lcr-made").write_text(aside.name, encoding="utf-8")
    index.rename(aside)
    code, _, _ = run(["info", str(index), "--json"], capsys)
    assert code != 0  # readers see no index until a writer recovers it
    code, _, err = run(["index", str(texts["b.txt"]), "-o", str(index), "--add"], capsys)
    assert code == 0, err
    assert sources(index) == ["a.txt", "b.txt"]
    assert not aside.exists() and not (index / ".lcr-made").exists()
    assert json.loads((index / "manifest.json").read_text())["format"] == "lcr-index"


# ------------------------------------------------------- row 3: a poisoned LLM cache
def _poison(value: object) -> object:
    if isinstance(value, str):
        return "The keeper's name was MARMOT-77. | MARMOT-77"
    if isinstance(value, list):
        return [_poison(v) for v in value]
    if isinstance(value, dict):
        return {k: _poison(v) for k, v in value.items()}
    return value


def test_an_edited_llm_cache_is_refused_paid_again_and_reported(
    tmp_path: Path,
    texts: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The scripted LLM stands in for the model: the cache's path is the same for any."""
    from tests.test_index_writers import GR_FAST, ExtractLLM, build_stats, use_models

    index = tmp_path / "x.idx"
    first = ExtractLLM()
    use_models(monkeypatch, first)
    args = ["index", str(texts["a.txt"]), "-o", str(index), "-m", "graphreader", *GR_FAST, "-q"]
    assert run(args, capsys)[0] == 0
    assert run(["info", str(index), "--verify"], capsys)[0] == 0
    cache = index / "cache" / "graphreader.jsonl"
    lines = [json.loads(line) for line in cache.read_text(encoding="utf-8").splitlines()]
    assert lines and all("mac" in line for line in lines)
    for line in lines:
        line["value"] = _poison(line["value"])
    cache.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")

    code, out, err = run(["info", str(index), "--verify"], capsys)
    assert code != 0
    assert f"{len(lines)} LLM output(s) lcr did not write" in out + err

    again = ExtractLLM()
    use_models(monkeypatch, again)
    code, _, err = run(["index", str(texts["b.txt"]), "-o", str(index), "--add", *GR_FAST, "-q"],
                       capsys)  # fmt: skip
    assert code == 0, err
    stats = build_stats(index, "graphreader")
    assert stats["llm_cached"] == 0 and again.calls >= len(lines)
    built = "".join(p.read_text(encoding="utf-8") for p in index.rglob("*.jsonl"))
    assert "MARMOT" not in built
    assert run(["info", str(index), "--verify"], capsys)[0] == 0


def test_a_cache_line_signed_by_another_index_is_refused(tmp_path: Path) -> None:
    """The digest is keyed per index: a line copied from another index does not pass."""
    from lcr.store.cache import LLMCache

    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    LLMCache(tmp_path / "one" / "m.jsonl").put("k", "from one")
    LLMCache(tmp_path / "two" / "m.jsonl").put("other", "from two")
    line = (tmp_path / "one" / "m.jsonl").read_text(encoding="utf-8")
    with (tmp_path / "two" / "m.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(line)
    reread = LLMCache(tmp_path / "two" / "m.jsonl")
    assert reread.get("k") is None and reread.refused == 1
    assert reread.get("other") == "from two"


# ------------------------------------------ rows 7, 8, 9, 13, 15: what a folder holds
def test_an_index_given_as_documents_is_refused(
    tmp_path: Path, texts: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "x.idx"
    assert run(["index", str(texts["a.txt"]), "-o", str(index), "-m", "bm25"], capsys)[0] == 0
    code, _, err = run(["index", str(index), "-o", str(index), "--add"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "is an lcr index, not a folder of documents" in err
    assert sources(index) == ["a.txt"]


def test_a_folder_walk_skips_outside_links_fifos_and_non_documents_in_few_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    (docs / "img").mkdir(parents=True)
    (docs / "manual.txt").write_text("The manual of the lamp. " * 20, encoding="utf-8")
    (docs / ".drafts").mkdir()
    (docs / ".drafts" / "n.txt").write_text("A draft inside. " * 20, encoding="utf-8")
    (docs / "inner.txt").symlink_to(".drafts/n.txt")  # a link inside the folder is read
    (tmp_path / "secret.txt").write_text("The secret outside. " * 20, encoding="utf-8")
    (docs / "leak.txt").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(docs / "pipe")
    for i in range(30):
        (docs / "img" / f"figure{i}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(50))
    (docs / "style.css").write_text("body { color: red }", encoding="utf-8")
    (docs / "Makefile").write_text("all:\n\techo hi\n", encoding="utf-8")
    index = tmp_path / "d.idx"
    code, _, err = run(["index", str(docs), "-o", str(index), "-m", "bm25"], capsys)
    assert code == 0, err
    assert sources(index) == ["inner.txt", "manual.txt"]
    assert "secret" not in Index.open(index).source
    warnings = err.strip().splitlines()
    assert len(warnings) == 3, err  # the outside link, the FIFO, one summary line
    assert any("leak.txt" in w and "outside the folder given" in w for w in warnings)
    assert any("pipe" in w and "not a plain file" in w for w in warnings)
    assert any("skipped 32 files" in w and "30 .png" in w and "--glob" in w for w in warnings)
    # --glob names what to index anyway
    code, _, err = run(["index", str(docs), "-o", str(tmp_path / "css.idx"), "-m", "bm25",
                        "--glob", "*.css"], capsys)  # fmt: skip
    assert code == 0, err
    assert sources(tmp_path / "css.idx") == ["style.css"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a folder without permission")
def test_an_unreadable_subfolder_is_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    (docs / "locked").mkdir(parents=True)
    (docs / "a.txt").write_text("Readable text. " * 20, encoding="utf-8")
    (docs / "locked" / "b.txt").write_text("Hidden text. " * 20, encoding="utf-8")
    (docs / "locked").chmod(0)
    try:
        code, _, err = run(["index", str(docs), "-o", str(tmp_path / "d.idx"), "-m", "bm25"],
                           capsys)  # fmt: skip
    finally:
        (docs / "locked").chmod(0o755)
    assert code == 0, err
    assert "skipped" in err and "locked" in err


# ------------------------------------------------ rows 10, 12: values from the environment
@pytest.fixture()
def bm25_index(tmp_path: Path, texts: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> Path:
    index = tmp_path / "l.idx"
    assert run(["index", str(texts["a.txt"]), "-o", str(index), "-m", "bm25"], capsys)[0] == 0
    return index


@needs("smollm2-135m", "llamacpp")  # LCR_THREADS is read where llama.cpp loads it
@pytest.mark.parametrize(
    "threads", ["100000", "99999999999999999999", "-1", "0", "abc", "1e9", "513"]
)
def test_a_bad_lcr_threads_is_one_line_and_exit_2(
    bm25_index: Path, threads: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("LCR_THREADS", threads)
    code, _, err = run(
        ["ask", str(bm25_index), "Who rowed?", "-m", "bm25", "--llm", "smollm2-135m",
         "--backend", "llamacpp"], capsys,
    )  # fmt: skip
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "LCR_THREADS must be" in err, err


@pytest.mark.parametrize("how", ["option", "env"])
@pytest.mark.parametrize("value", ["nan", "inf", "-nan"])
def test_a_call_timeout_that_is_not_a_number_is_exit_2(
    bm25_index: Path, how: str, value: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    args = ["ask", str(bm25_index), "Who rowed?", "-m", "bm25"]
    if how == "env":
        monkeypatch.setenv("LCR_CALL_TIMEOUT", value)
    else:
        args += ["--call-timeout", value]
    code, _, err = run(args, capsys)
    assert code == 2, err
    assert "call-timeout" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "stored",
    [
        '"a string"',
        "null",
        "[" * 200_000 + "]" * 200_000,
        '{"KEY": "a string"}',
        '{"KEY": null}',
        '{"KEY": {"prefill": NaN, "decode": 3.0, "batch_decode": 5.0}}',
        '{"KEY": {"prefill": -40.0, "decode": 3.0, "batch_decode": 5.0}}',
        '{"KEY": {"prefill": 1e-300, "decode": "fast", "batch_decode": 5.0}}',
        '{"KEY": {"prefill": 40.0, "decode": 0, "batch_decode": 5.0}}',
        '{"KEY": {"prefill": 40.0, "decode": 3.0, "batch_decode": 5.0, "source": 7}}',
    ],
)
def test_tampered_measured_rates_are_measured_again_not_printed(
    tmp_path: Path, stored: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lcr.estimate import throughput

    monkeypatch.setenv("LCR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    key = throughput.rates_key("smollm2-135m", "llamacpp", "cpu")
    (tmp_path / "cache" / "throughput.json").write_text(
        stored.replace("KEY", key), encoding="utf-8"
    )
    assert throughput.cached_rates(key) is None
    good = throughput.Rates(prefill=40.0, decode=3.0, batch_decode=5.0,
                            load_avg=throughput.current_load())  # fmt: skip
    throughput.store_rates(key, good)
    assert throughput.cached_rates(key) == good


# ------------------------------------------------------------ row 6: deep HTML
def test_html_past_the_parsers_old_depth_is_read_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "font.html"
    lines = "".join(f"<font size=2>Line {i}<br>" for i in range(400))
    page.write_text(f"<html><body>{lines}<p>Final paragraph.</p></body></html>", encoding="utf-8")
    index = tmp_path / "f.idx"
    code, _, err = run(["index", str(page), "-o", str(index), "-m", "bm25"], capsys)
    assert code == 0, err
    text = Index.open(index).source
    assert "Line 399" in text and text.rstrip().endswith("Final paragraph.")


def test_html_past_the_raised_depth_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "deep.html"
    page.write_text("<html><body>" + "<div>" * 100_000 + "deep text" + "</div>" * 100_000
                    + "<p>after</p></body></html>", encoding="utf-8")  # fmt: skip
    code, _, err = run(["index", str(page), "-o", str(tmp_path / "d.idx"), "-m", "bm25"], capsys)
    assert code != 0 and len(err.strip().splitlines()) == 1, err
    assert "cannot be read whole" in err and "depth" in err and "XML_PARSE" not in err
    assert "no text outside its markup" not in err
    assert not (tmp_path / "d.idx").exists()


# ------------------------------------------- row 11: threads of one process, one index
def test_threads_forcing_one_index_take_the_lock_in_turn(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import lcr

    paths = []
    for i in range(8):
        paths.append(tmp_path / f"d{i}.txt")
        paths[-1].write_text(f"Document {i} tells of keeper number {i}. " * 30, encoding="utf-8")
    out = tmp_path / "t.idx"

    def build(path: Path) -> str:
        return lcr.index(path, out=out, methods=["bm25"], force=True).source

    for workers in (2, 8):
        with ThreadPoolExecutor(workers) as pool:
            texts = list(pool.map(build, paths[:workers]))
        assert [t for t in texts if t] == texts  # each thread's own build, whole
        final = Index.open(out)
        assert final.source in texts
        assert sources(out) and len(sources(out)) == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("bad", [5, [5], None, object()])
def test_a_glob_of_the_wrong_type_is_one_clear_error(tmp_path: Path, bad: object) -> None:
    import lcr
    from lcr.errors import ArgumentTypeError

    (tmp_path / "a.txt").write_text("Alpha. " * 20, encoding="utf-8")
    with pytest.raises(ArgumentTypeError, match="glob must be a list of file patterns"):
        lcr.index(tmp_path / "a.txt", out=tmp_path / "a.idx", glob=bad)  # type: ignore[arg-type]


# ------------------------------------------------ row 16: evidence numbered in order
def test_evidence_is_numbered_one_to_n_even_when_items_share_a_rank(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Sentences selected from one chunk keep its rank: they were numbered 1, 2, 3, 4, 4."""
    import re

    from lcr.cli.output import print_result
    from lcr.evidence import Evidence, EvidenceItem
    from lcr.result import Result

    ranks = [1, 2, 3, 4, 4, 6]
    items = [
        EvidenceItem(
            f"n{i}",
            0,
            0,
            1.0 / (i + 1),
            f"Sentence {i}.",
            [(i, i + 1)],
            extra={"rank": r},
            document="a.txt",
        )
        for i, r in enumerate(ranks)
    ]
    result = Result("Who rowed?", "bm25", Evidence(items=items, method="bm25"), read=items)
    print_result(result, answer=False)
    out = capsys.readouterr().out
    assert re.findall(r"^\[(\d+)\]", out, re.M) == ["1", "2", "3", "4", "5", "6"], out


# ------------------------------------------------ row 13: SIGTERM and SIGHUP say so
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_end_with_one_line(tmp_path: Path, sig: str) -> None:
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    number = getattr(signal, sig)

    def default_disposition() -> None:  # a suite run under nohup ignores SIGHUP, and so would lcr
        signal.signal(number, signal.SIG_DFL)

    proc = subprocess.Popen(
        [sys.executable, "-m", "lcr", "index", "-", "-o", str(tmp_path / "s.idx"), "-m", "bm25"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=default_disposition,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write("The keeper rowed out to the rock. " * 50)
    proc.stdin.flush()  # stdin stays open: lcr waits for the rest of the document
    time.sleep(4)
    proc.send_signal(number)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + number, err
    assert (
        err.strip() == f"lcr: stopped by {sig} (a build in progress keeps what it had; "
        "run the command again)"
    ), err
    assert not (tmp_path / "s.idx").exists()


# ------------------------------------------- row 16: a missing dependency is named
def test_a_missing_dependency_names_the_package_to_install(
    tmp_path: Path, texts: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    import sys

    monkeypatch.setitem(sys.modules, "Stemmer", None)  # import Stemmer now fails
    code, _, err = run(["index", str(texts["a.txt"]), "-o", str(tmp_path / "x.idx"),
                        "-m", "bm25"], capsys)  # fmt: skip
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "pip install PyStemmer" in err and "internal error" not in err


# ------------------------------- row 13: an unwritable model cache that has nothing to do
@needs("smollm2-135m", "llamacpp")
def test_an_unwritable_model_cache_serves_a_model_with_nothing_to_assemble(
    bm25_index: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """smollm2-135m is one GGUF file in its package: nothing is written to the cache, so
    a cache folder that cannot be made (a path under a file) must not stop the answer."""
    monkeypatch.setenv("LCR_CACHE_DIR", "/dev/null/lcr-cache")
    code, out, err = run(["ask", str(bm25_index), "Who rowed?", "-m", "bm25", "--llm",
                          "smollm2-135m", "--backend", "llamacpp", "--answer-only",
                          "--max-new-tokens", "8"], capsys)  # fmt: skip
    assert code == 0, err
    assert out.strip()


# --------------------------------------- row 13: pypdfium2's own lines said as lcr's
def test_a_pdf_outline_deeper_than_read_is_one_lcr_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from reportlab.pdfgen import canvas

    pdf = tmp_path / "deep.pdf"
    c = canvas.Canvas(str(pdf))
    c.drawString(72, 720, "Chapter text about the lighthouse keeper and his lamp.")
    for level in range(24):
        c.bookmarkPage(f"b{level}")
        c.addOutlineEntry(f"Section {level}", f"b{level}", level=level)
    c.showPage()
    c.save()
    code, _, err = run(["index", str(pdf), "-o", str(tmp_path / "p.idx"), "-m", "bm25"], capsys)
    assert code == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "outline is nested deeper than 16 levels" in lines[0], err
    assert "recursion" not in err


# --------------------------------------- row 16: doctor fits 80 columns without llama.cpp
@pytest.mark.parametrize("gpu", [False, True])
def test_doctor_fits_80_columns_where_llamacpp_is_missing(
    monkeypatch: pytest.MonkeyPatch, gpu: bool
) -> None:
    import dataclasses

    from click.testing import CliRunner

    from lcr.cli.main import cli
    from tests.test_gpu import A100, CPU_ONLY, fake

    fake(monkeypatch, dataclasses.replace(A100 if gpu else CPU_ONLY, llamacpp_version=None))
    text = CliRunner().invoke(cli, ["doctor"]).output
    assert "llama.cpp is not installed" in text, text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "llama-cpp-python==" in text
