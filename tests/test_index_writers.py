"""The index's writers (issue 37): one writer at a time, ``--force`` beside and swapped in,
never deleting what lcr did not make, the LLM cache outliving ``--force``, writes that stay
inside the index, and repair hints that repair when pasted where they were printed."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lcr.cli.main import main
from lcr.cli.models import ModelsFactory
from lcr.models.base import Generation, Message
from lcr.models.container import Models
from lcr.store import Index
from tests.test_raptor import HashEmbedder
from tests.test_raptor import ScriptedLLM as SummaryLLM

REPO = Path(__file__).resolve().parents[1]
GR_FAST = ["--set", "graphreader.chunk_tokens=300"]


# the models the next runs of `run` inject through the CLI's seam (`use_models`)
MODELS: ModelsFactory | None = None


def run(
    args: list[str], capsys: pytest.CaptureFixture[str], cwd: Path | None = None
) -> tuple[int, str, str]:
    here = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with pytest.raises(SystemExit) as exc:
            main(args, models=MODELS)
    finally:
        os.chdir(here)
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


def lcr(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "lcr", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def paste(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a printed ``lcr ...`` command as pasted into a shell in ``cwd``."""
    words = shlex.split(command)
    assert words[0] == "lcr", command
    return lcr(*words[1:], cwd=cwd)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def leaves_match_source(index: Path, method: str = "bm25") -> bool:
    opened = Index.open(index)
    source = opened.source
    nodes = opened.reader(method).nodes()
    return all(source[s:e] in n.text or n.text == source[s:e] for n in nodes for s, e in n.spans)


@pytest.fixture()
def two_docs(tmp_path: Path, cinderella: Path) -> tuple[Path, Path]:
    a = tmp_path / "a.txt"
    shutil.copy(cinderella, a)
    b = tmp_path / "b.txt"
    b.write_text(a.read_text().replace("the", "a spanner"))
    return a, b


def use_models(monkeypatch: pytest.MonkeyPatch, llm: Any) -> None:
    """The test's next runs use ``llm`` and a hashing embedder (until the test ends)."""
    monkeypatch.setitem(
        globals(),
        "MODELS",
        lambda spec, progress: Models.with_objects(llm=llm, embedder=HashEmbedder(), spec=spec),
    )


class ExtractLLM(SummaryLLM):
    """GraphReader's extraction replies (any text parses); counts calls; can fail."""

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_text: object = None,
    ) -> Generation:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise self.fail_with("scripted failure")
        self.calls += 1
        words = messages[-1]["content"].split()[-12:]
        text = "1. " + " ".join(words) + " | " + words[0]
        return Generation(text, 50, len(words))


def build_stats(index: Path, method: str) -> dict[str, Any]:
    return dict(Index.open(index).methods[method].stats)


# ------------------------------------------------------------ one writer at a time
# the race showed within 8 rounds of 4: the slow tier runs 8, the quick tier 2 (each
# round starts four processes, about 4 s of CPU)
@pytest.mark.parametrize("rounds", [2, pytest.param(8, marks=pytest.mark.slow)])
def test_concurrent_force_rebuilds_with_other_documents_never_mix_them(
    two_docs: tuple[Path, Path], rounds: int
) -> None:
    """Row 1: four `--force` rebuilds of one output, two documents, at once."""
    a, b = two_docs
    target = a.parent / "r.idx"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _round in range(rounds):
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "lcr",
                    "index",
                    str(f),
                    "-o",
                    str(target),
                    "--force",
                    "-m",
                    "bm25",
                    "-q",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for f in (a, b, a, b)
        ]
        results = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, [err for _, err in results]
        index = Index.open(target)
        assert index.verify() == {}
        assert leaves_match_source(target)
        # the documents the manifest names are the ones whose text is in source.txt
        assert index.source in (a.read_text(), b.read_text())
        sha = index.documents[0].sha256
        assert index.source == (a if sha == _sha(a) else b).read_text()
    leftovers = sorted(p.name for p in a.parent.iterdir())
    assert leftovers == ["a.txt", "b.txt", "r.idx"]  # no lock file, no staged folder


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_concurrent_runs_build_a_method_once(two_docs: tuple[Path, Path]) -> None:
    """Row 17: three runs asking for mixpr at once: one builds it, two find it built."""
    a, _ = two_docs
    target = a.parent / "m.idx"
    assert lcr("index", str(a), "-o", str(target), "-m", "bm25", "-q").returncode == 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lcr", "index", str(a), "-o", str(target), "-m", "mixpr"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 3
    said = " ".join(outs)
    assert said.count("mixpr built") == 1 and said.count("mixpr up to date") == 2, outs


def test_a_concurrent_writer_of_other_documents_without_force_exits_non_zero(
    two_docs: tuple[Path, Path],
) -> None:
    """Row 16: the loser neither exits 0 having done nothing nor mixes documents."""
    a, b = two_docs
    target = a.parent / "r.idx"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lcr", "index", str(f), "-o", str(target), "-m", "bm25", "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for f in (a, b)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], errs
    assert any("indexes other documents" in e and "--force" in e for e in errs)
    assert leaves_match_source(target)


# ---------------------------------------------------- --force beside, swapped at commit
def test_a_failed_force_rebuild_leaves_the_old_index_and_keeps_what_it_paid(
    two_docs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Row 3: a `--force` with other documents that fails half way changes nothing."""
    a, b = two_docs
    book = a.parent / "book.idx"
    assert run(["index", str(a), "-o", str(book), "-m", "bm25", "-q"], capsys)[0] == 0
    before = snapshot(book)
    llm = ExtractLLM(fail_after=3)
    use_models(monkeypatch, llm)
    args = ["index", str(b), "-o", str(book), "--force", "-m", "bm25", "-m", "graphreader"]
    code, _out, err = run([*args, *GR_FAST, "-q"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "run the same command again" in err
    after = snapshot(book)
    paid = after.pop("cache/graphreader.jsonl").decode().splitlines()
    after.pop("cache/graphreader.config.json", None)
    after.pop("cache/secret", None)  # the key its signed lines are checked with (#54)
    assert after == before  # the old index exactly as it was, its cache kept
    assert len(paid) == 3  # ... with the three replies paid for before the failure
    assert [p.name for p in a.parent.iterdir() if ".new-" in p.name] == []
    # the next --force reuses them
    llm2 = ExtractLLM()
    use_models(monkeypatch, llm2)
    code, _, err = run([*args, *GR_FAST, "-q"], capsys)
    assert code == 0, err
    stats = build_stats(book, "graphreader")
    assert stats["llm_cached"] == 3 and stats["llm_calls"] == llm2.calls
    assert Index.open(book).source == b.read_text()


SLOW_BUILD = """
import sys, time
from lcr.cli.main import main
from lcr.models.container import Models
from tests.test_index_writers import ExtractLLM, HashEmbedder
class Slow(ExtractLLM):
    def generate(self, *args, **kwargs):
        time.sleep(0.4)
        return super().generate(*args, **kwargs)
main(sys.argv[1:], models=lambda spec, progress: Models.with_objects(
    llm=Slow(), embedder=HashEmbedder(), spec=spec))
"""


def test_ctrl_c_during_a_force_rebuild_leaves_the_old_index_as_it_was(
    two_docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 3: SIGINT part way into `lcr index b.txt -o book.idx --force -m graphreader`."""
    a, b = two_docs
    book = a.parent / "book.idx"
    assert run(["index", str(a), "-o", str(book), "-q"], capsys)[0] == 0
    before = snapshot(book)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_BUILD, "index", str(b), "-o", str(book), "--force",
         "-m", "graphreader", *GR_FAST, "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    paid = book / "cache" / "graphreader.jsonl"
    deadline = time.monotonic() + 120
    while not (paid.exists() and paid.read_text().count("\n") >= 2):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    after = snapshot(book)
    assert after.pop("cache/graphreader.jsonl").count(b"\n") >= 2  # what it paid is kept
    after.pop("cache/graphreader.config.json", None)
    after.pop("cache/secret", None)  # made with the first paid output (#54)
    before.pop("cache/secret", None)
    assert after == before
    assert Index.open(book).verify() == {}


# ---------------------------------------------------- --force deletes only lcr's folders
def test_force_never_replaces_a_folder_lcr_did_not_make(
    two_docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 2: an empty manifest.json beside the user's thesis is not an index."""
    a, _ = two_docs
    proj = a.parent / "proj"
    proj.mkdir()
    (proj / "thesis.tex").write_text("x\n")
    (proj / "manifest.json").write_text("")
    code, _, err = run(["index", str(a), "-o", str(proj), "--force", "-q"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "thesis.tex" in err and "not an lcr index" in err
    assert (proj / "thesis.tex").read_text() == "x\n"
    assert sorted(p.name for p in proj.iterdir()) == ["manifest.json", "thesis.tex"]


def test_force_repairs_a_damaged_index_of_lcrs_own_files(
    two_docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = two_docs
    idx = a.parent / "a.idx"
    assert run(["index", str(a), "-m", "bm25", "-q"], capsys)[0] == 0
    (idx / "manifest.json").write_text('{"format": "lcr-in')  # torn
    code, _, err = run(["index", str(a), "-m", "bm25", "-q"], capsys)
    assert code == 1
    code, _, err = run(["index", str(a), "-m", "bm25", "-q", "--force"], capsys)
    assert code == 0, err
    assert Index.open(idx).verify() == {}


# ------------------------------------------------------------ the cache outlives --force
def test_the_llm_cache_outlives_force_and_a_one_word_edit(
    two_docs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Row 4: after a one-word edit, `--force` pays only for the chunk that changed; the
    same content again pays nothing."""
    a, _ = two_docs
    idx = a.parent / "a.idx"
    llm = ExtractLLM()
    use_models(monkeypatch, llm)
    args = ["index", str(a), "-m", "graphreader", *GR_FAST, "-q"]
    assert run(args, capsys)[0] == 0
    first = build_stats(idx, "graphreader")
    assert first["llm_calls"] >= 4 and first["llm_cached"] == 0
    text = a.read_text()
    assert "slipper" in text
    a.write_text(text.replace("slipper", "sandal", 1))
    assert run([*args, "--force"], capsys)[0] == 0
    edited = build_stats(idx, "graphreader")
    assert edited["llm_calls"] == 1, edited
    assert edited["llm_cached"] == first["llm_calls"] - 1
    assert run([*args, "--force"], capsys)[0] == 0
    again = build_stats(idx, "graphreader")
    assert again["llm_calls"] == 0 and again["llm_cached"] == first["llm_calls"]


# ------------------------------------------------------------ writes stay inside
@pytest.mark.parametrize("folder", ["/etc", "../../etc", "bm25", "x/bm25.1234abcd", "mixpr.12ab"])
def test_a_build_folder_outside_the_index_is_damage_and_never_read(
    two_docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    """Row 6 (manifest half): methods.X.dir is `<method>.<hex>` or that method is damaged
    (the others keep working), and the printed hint rebuilds it."""
    a, _ = two_docs
    idx = a.parent / "a.idx"
    assert run(["index", str(a), "-m", "bm25", "-q"], capsys)[0] == 0
    manifest = json.loads((idx / "manifest.json").read_text())
    manifest["methods"]["bm25"]["dir"] = folder
    (idx / "manifest.json").write_text(json.dumps(manifest))
    code, _out, err = run(["info", str(idx), "--verify"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "methods.bm25.dir" in err and "damaged" in err
    repaired = paste(_hint(err, "rebuild it alone with: "), a.parent)
    assert repaired.returncode == 0, repaired.stderr
    assert Index.open(idx).verify() == {}


def test_a_symlinked_cache_file_is_never_written_through(
    two_docs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Row 5: `ln -s ~/.bashrc X.idx/cache/graphreader.jsonl`, then an LLM build."""
    a, _ = two_docs
    idx = a.parent / "a.idx"
    assert run(["index", str(a), "-m", "bm25", "-q"], capsys)[0] == 0
    victim = a.parent / "bashrc"
    victim.write_text("alias ls='ls -F'\n")
    (idx / "cache").mkdir()
    (idx / "cache" / "graphreader.jsonl").symlink_to(victim)
    use_models(monkeypatch, ExtractLLM())
    code, _, err = run(["index", str(a), "-m", "graphreader", *GR_FAST, "-q"], capsys)
    assert victim.read_text() == "alias ls='ls -F'\n"
    assert code == 1 and len(err.strip().splitlines()) == 1 and "symbolic link" in err, err
    # a symlinked cache folder neither
    shutil.rmtree(idx / "cache")
    elsewhere = a.parent / "elsewhere"
    elsewhere.mkdir()
    (idx / "cache").symlink_to(elsewhere)
    code, _, err = run(["index", str(a), "-m", "graphreader", *GR_FAST, "-q"], capsys)
    assert code == 1 and "symbolic link" in err and list(elsewhere.iterdir()) == []


def test_lock_files_that_are_links_or_folders_are_never_followed(
    two_docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 5 and row 15: `.lock` a symlink or a folder."""
    a, _ = two_docs
    idx = a.parent / "a.idx"
    assert run(["index", str(a), "-m", "bm25", "-q"], capsys)[0] == 0
    target = a.parent / "created-through-a-link"
    (idx / ".lock").unlink(missing_ok=True)
    (idx / ".lock").symlink_to(target)
    assert run(["index", str(a), "-m", "tfidf", "-q"], capsys)[0] == 0
    assert not target.exists()
    (idx / ".lock").unlink()
    (idx / ".lock").mkdir()
    code, _, err = run(["index", str(a), "-m", "full", "-q"], capsys)
    assert code == 0, err
    # the writer lock beside the folder: a link there is refused, never followed
    sibling = a.parent / ".a.idx.lock"
    assert not sibling.exists()  # removed by the writer that held it
    sibling.symlink_to(target)
    code, _, err = run(["index", str(a), "-m", "bm25", "-q", "--force"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "remove it" in err, err
    assert not target.exists()


def test_an_index_in_the_current_empty_folder(
    two_docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 15: `-o .` in an empty folder (EBUSY before)."""
    a, _ = two_docs
    here = a.parent / "here"
    here.mkdir()
    code, _out, err = run(["index", str(a), "-o", ".", "-m", "bm25", "-q"], capsys, cwd=here)
    assert code == 0, err
    assert Index.open(here).verify() == {}
    # other documents with --force: the current folder is not swapped away under the shell
    _, b = two_docs
    code, _, err = run(["index", str(b), "-o", ".", "--force", "-q"], capsys, cwd=here)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "holds the current folder" in err, (
        err
    )
    assert Index.open(here).source == a.read_text()


# ------------------------------------------------------------ hints that repair
@pytest.fixture()
def project(tmp_path: Path, cinderella: Path) -> Path:
    """A checkout-like folder: the document one folder down, the index beside it."""
    (tmp_path / "examples").mkdir()
    shutil.copy(cinderella, tmp_path / "examples" / "story.txt")
    built = lcr("index", "examples/story.txt", "-o", "examples/story.idx", "-m", "bm25",
                "--set", "bm25.k1=1.1", cwd=tmp_path)  # fmt: skip
    assert built.returncode == 0, built.stderr
    return tmp_path


def _hint(err: str, lead: str) -> str:
    assert lead in err, err
    return err.split(lead, 1)[1].strip().splitlines()[0]


def test_the_verify_hint_repairs_a_same_size_edit(project: Path) -> None:
    """Row 12: one byte of bm25's nodes flipped; `info --verify` prints the repair."""
    idx = project / "examples" / "story.idx"
    nodes = next(idx.glob("bm25.*")) / "nodes.jsonl"
    data = bytearray(nodes.read_bytes())
    data[40] = ord("Q") if data[40] != ord("Q") else ord("R")
    nodes.write_bytes(bytes(data))
    checked = lcr("info", "examples/story.idx", "--verify", cwd=project)
    assert checked.returncode == 1
    fix = _hint(checked.stderr, "rebuild it alone with: ")
    assert "--set bm25.k1=1.1" in fix and "--force" in fix
    assert paste(fix, project).returncode == 0
    assert lcr("info", "examples/story.idx", "--verify", cwd=project).returncode == 0


def test_the_build_hint_of_a_missing_method_works_from_where_it_was_printed(
    project: Path,
) -> None:
    """Issue 41 item 2: the source's folder is kept (`examples/`)."""
    asked = lcr("retrieve", "examples/story.idx", "Who helped?", "-m", "tfidf", cwd=project)
    assert asked.returncode == 1
    fix = _hint(asked.stderr, "build it with: ")
    assert "examples/story.txt" in fix
    assert paste(fix, project).returncode == 0
    assert lcr("retrieve", "examples/story.idx", "Who?", "-m", "tfidf", cwd=project).returncode == 0
    # from another folder the same hint names the paths from there
    sub = project / "examples"
    asked = lcr("retrieve", "story.idx", "Who helped?", "-m", "full", cwd=sub)
    fix = _hint(asked.stderr, "build it with: ")
    assert paste(fix, sub).returncode == 0


def test_the_source_damage_hint_rebuilds_every_method(project: Path) -> None:
    idx = project / "examples" / "story.idx"
    source = idx / "source.txt"
    text = source.read_text()
    source.write_text(text.replace("a", "e", 1))  # same size, other text
    checked = lcr("info", "examples/story.idx", "--verify", cwd=project)
    assert checked.returncode == 1
    fix = _hint(checked.stderr, "rebuild it with: ")
    assert "--force" in fix and "--method bm25" in fix
    assert paste(fix, project).returncode == 0
    assert lcr("info", "examples/story.idx", "--verify", cwd=project).returncode == 0
    assert Index.open(idx).methods["bm25"].settings["k1"] == 1.1


# ------------------------------------------------------------ reads during a rebuild
def test_a_stale_index_after_a_force_rebuild_is_not_called_damaged(
    two_docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 17: an `lcr.Index` opened before another process rebuilt the index."""
    from lcr.errors import IndexDamagedError, LostRaceError

    a, b = two_docs
    idx = a.parent / "a.idx"
    assert run(["index", str(a), "-m", "bm25", "-q"], capsys)[0] == 0
    stale = Index.open(idx)
    assert lcr("index", str(b), "-o", str(idx), "-m", "bm25", "--force", "-q").returncode == 0
    with pytest.raises(LostRaceError, match="rebuilt by another lcr process") as caught:
        stale.reader("bm25").nodes()
    assert not isinstance(caught.value, IndexDamagedError)
    with pytest.raises(LostRaceError):
        _ = stale.source
    assert Index.open(idx).source == b.read_text()  # opened again, it reads the new one


def test_retrieve_reads_the_new_index_when_a_rebuild_commits_while_it_reads(
    two_docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 17 through the CLI: a rebuild that commits between `lcr retrieve` opening the
    index and reading it is a lost race, read again once (as `lcr serve` does), not exit 1."""
    from lcr import pipeline

    a, b = two_docs
    idx = a.parent / "a.idx"
    assert run(["index", str(a), "-o", str(idx), "-m", "bm25", "-q"], capsys)[0] == 0
    real = pipeline.retrieve_query
    calls: list[str] = []

    def rebuilt_first(index: Index, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(index.manifest.source_sha256))
        if len(calls) == 1:  # another process commits a --force rebuild now
            forced = lcr("index", str(b), "-o", str(idx), "-m", "bm25", "--force", "-q")
            assert forced.returncode == 0
        return real(index, *args, **kwargs)

    monkeypatch.setattr(pipeline, "retrieve_query", rebuilt_first)
    code, out, err = run(["retrieve", str(idx), "Who?", "-m", "bm25", "--json"], capsys)
    assert code == 0, err
    assert len(calls) == 2 and calls[0] != calls[1]  # the new index, opened and read again
    assert all(ev["text"] in b.read_text() for ev in json.loads(out)["evidence"])


def test_the_schema_hint_repairs_an_index_of_another_schema(project: Path) -> None:
    manifest_path = project / "examples" / "story.idx" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["schema_version"] = 99
    manifest_path.write_text(json.dumps(manifest))
    asked = lcr("retrieve", "examples/story.idx", "Who helped?", cwd=project)
    assert asked.returncode == 1
    fix = _hint(asked.stderr, "rebuild it with: ")
    assert fix.startswith("lcr index examples/story.txt -o examples/story.idx")
    assert paste(fix, project).returncode == 0
    assert lcr("retrieve", "examples/story.idx", "Who helped?", cwd=project).returncode == 0


@pytest.mark.slow
def test_a_real_llm_force_rebuild_after_an_edit_pays_only_for_the_changed_chunk(
    tmp_path: Path, cinderella: Path
) -> None:
    """Row 4 end to end with SmolLM2-135M: the edited chunk is paid, the others are not,
    and the same text again pays nothing."""
    text = cinderella.read_text()[:2500]
    doc = tmp_path / "s.txt"
    doc.write_text(text)
    args = ["index", "s.txt", "-o", "s.idx", "-m", "graphreader", "--llm", "smollm2-135m",
            "--set", "graphreader.chunk_tokens=200",
            "--set", "graphreader.extraction_max_new_tokens=32", "-q"]  # fmt: skip
    first = lcr(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    paid = build_stats(tmp_path / "s.idx", "graphreader")
    assert paid["llm_calls"] >= 3 and paid["llm_cached"] == 0
    last_word = text.rstrip().split()[-1]
    doc.write_text(text.rstrip()[: -len(last_word)] + "zeppelin.\n")
    assert lcr(*args, "--force", cwd=tmp_path).returncode == 0
    edited = build_stats(tmp_path / "s.idx", "graphreader")
    assert edited["llm_calls"] == 1 and edited["llm_cached"] == paid["llm_calls"] - 1, edited
    assert lcr(*args, "--force", cwd=tmp_path).returncode == 0
    again = build_stats(tmp_path / "s.idx", "graphreader")
    assert again["llm_calls"] == 0 and again["llm_cached"] == paid["llm_calls"]


def test_the_hint_of_an_index_without_methods_builds_them(two_docs: tuple[Path, Path]) -> None:
    a, _ = two_docs
    Index.create(a.parent / "empty.idx", pipeline_docs([a]))
    shown = lcr("info", "empty.idx", cwd=a.parent)
    fix = _hint(shown.stdout, "build the default ones with: ").rstrip(")")
    assert paste(fix, a.parent).returncode == 0
    assert sorted(Index.open(a.parent / "empty.idx").methods) == ["bm25", "mixpr"]


def pipeline_docs(paths: list[Path]) -> list[Any]:
    from lcr.pipeline import load_documents
    from lcr.text.inputs import expand_inputs

    return load_documents(expand_inputs(paths))
