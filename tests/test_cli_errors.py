"""What a user or a script meets when things go wrong (issue 37): a closed or full
stdout, exit codes with --debug, one-line messages, odd option values, running out of
memory, an eval data file pointing outside its folder. Through real processes where the
failure needs one (a closed descriptor, /dev/full, a memory limit)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "LCR_DEBUG": ""}
LCR = [sys.executable, "-m", "lcr"]


def lcr_sh(redirect: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lcr ARGS REDIRECT`` through the shell, for what only a shell can set up
    (``>&-`` closes stdout before Python starts)."""
    import shlex

    line = " ".join(shlex.quote(a) for a in [*LCR, *args]) + " " + redirect
    return subprocess.run(
        ["sh", "-c", line], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300
    )


def lcr(*args: str, cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [*LCR, *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300, **kwargs
    )


def one_line(stderr: str) -> str:
    """The single line of an error: no traceback, no second line, no internal error."""
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture()
def story(tmp_path: Path, cinderella: Path) -> Path:
    target = tmp_path / "story.txt"
    shutil.copy(cinderella, target)
    return target


@pytest.fixture()
def built(story: Path) -> Path:
    proc = lcr("index", story.name, "-q", "-m", "bm25", cwd=story.parent)
    assert proc.returncode == 0, proc.stderr
    return story.with_suffix(".idx")


# ------------------------------------------------------------ stdout closed or full
@pytest.mark.parametrize(
    "args", [["methods"], ["methods", "--json"], ["--version"], ["info", "story.idx"]]
)
def test_a_read_command_with_stdout_closed_says_so_in_one_line(
    args: list[str], built: Path
) -> None:
    proc = lcr_sh(">&-", *args, cwd=built.parent)
    assert proc.returncode == 1
    assert one_line(proc.stderr) == "lcr: cannot print the output: standard output is closed"


def test_retrieve_to_a_full_device_is_one_true_line_not_a_builds_wording(built: Path) -> None:
    proc = lcr_sh(
        "> /dev/full", "retrieve", "story.idx", "Where did the bird sit?", cwd=built.parent
    )
    assert proc.returncode == 1
    line = one_line(proc.stderr)
    assert line == (
        "lcr: cannot print the output: no space left on the device standard output goes to"
    )
    assert "committed" not in line


def test_ask_with_stdout_closed_is_refused_before_any_model_loads(built: Path) -> None:
    """The answers are the product: none is paid for when it cannot be printed (a missing
    model would be the first error otherwise)."""
    proc = lcr_sh(">&-", "ask", "story.idx", "Who?", "--llm", "no-such-model", cwd=built.parent)
    assert proc.returncode == 1
    assert one_line(proc.stderr).endswith("standard output is closed")


@pytest.mark.parametrize("redirect", [">&-", "> /dev/full"])
def test_a_build_whose_report_cannot_be_printed_still_succeeds_and_says_it_committed(
    redirect: str, story: Path
) -> None:
    proc = lcr_sh(
        redirect, "index", "story.txt", "--force", "-m", "bm25", "-m", "tfidf", cwd=story.parent
    )
    assert proc.returncode == 0, proc.stderr
    line = one_line(proc.stderr)
    assert line.startswith("lcr: warning: the build succeeded and is committed (story.idx: ")
    assert "bm25, tfidf" in line and "could not be printed" in line
    info = lcr("info", "story.idx", "--json", cwd=story.parent)
    assert set(json.loads(info.stdout)["methods"]) == {"bm25", "tfidf"}


def test_a_closed_stdout_never_lands_in_a_file_lcr_opens(story: Path) -> None:
    """With fd 1 closed, the next file opened would get it; a library printing to stdout
    would then write into the index. lcr puts /dev/null there first."""
    proc = lcr_sh(">&-", "index", "story.txt", "-m", "bm25", cwd=story.parent)
    assert proc.returncode == 0, proc.stderr
    verify = lcr("info", "story.idx", "--verify", cwd=story.parent)
    assert verify.returncode == 0, verify.stderr


def test_a_closed_or_full_stderr_keeps_the_exit_code(tmp_path: Path) -> None:
    for redirect in ("2>&-", "2> /dev/full"):
        proc = lcr_sh(redirect, "retrieve", "nothing.idx", "q", cwd=tmp_path)
        assert proc.returncode == 1 and proc.stdout == ""


# ------------------------------------------------------------------- exit codes
def test_debug_keeps_the_usage_exit_code_and_adds_the_traceback(story: Path) -> None:
    proc = lcr("--debug", "index", "story.txt", "--set", "bm25.nosuch=1", cwd=story.parent)
    assert proc.returncode == 2
    assert proc.stderr.startswith("Traceback") and "SettingError" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("lcr: unknown setting bm25.nosuch")
    proc = lcr("--debug", "index", cwd=story.parent)  # click's own usage error
    assert proc.returncode == 2
    proc = lcr("--debug", "retrieve", "nothing.idx", "q", cwd=story.parent)
    assert proc.returncode == 1 and proc.stderr.splitlines()[-1].startswith("lcr: no index at")


def test_an_interrupt_exits_130_with_one_line(built: Path) -> None:
    """SIGINT while a command runs: here, waiting for the next question on stdin after
    answering the first (so the signal surely lands inside the command)."""
    import signal

    proc = subprocess.Popen(
        [*LCR, "retrieve", "story.idx", "-", "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=built.parent,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("Where did the bird sit?\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["method"] == "bm25"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert one_line(err).startswith("lcr: interrupted")


# ------------------------------------------------------------- one-line messages
def test_two_files_with_one_default_index_are_refused_before_any_work(story: Path) -> None:
    other = story.with_suffix(".md")
    other.write_text("Another text entirely. It has two sentences.\n")
    for force in ([], ["--force"]):
        proc = lcr("index", "story.txt", "story.md", *force, cwd=story.parent)
        assert proc.returncode == 2
        line = one_line(proc.stderr)
        assert "story.txt and story.md would both be indexed into story.idx" in line
        assert "-o" in line
        assert not story.with_suffix(".idx").exists()


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    proc = lcr("index", "no\nsuch.txt", cwd=tmp_path)
    assert proc.returncode == 1
    assert "no\\nsuch.txt" in one_line(proc.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["index"],
        ["index", "story.txt", "--forc"],
        ["retrieve", "story.idx", "q", "-k", "zero"],
        ["nosuchcommand"],
        ["eval", "generate", "nosuchkind", "--length", "4k", "-o", "x.jsonl"],
    ],
)
def test_click_usage_errors_are_one_line_with_the_help_hint(args: list[str], story: Path) -> None:
    proc = lcr(*args, cwd=story.parent)
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert line.startswith("lcr: ") and line.endswith("--help')")


# ------------------------------------------------------------------ odd values
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["index", ""], 2, "empty path"),
        (["index", "story.txt", "-o", ""], 2, "'--output': an empty path"),
        (["retrieve", "", "q"], 2, "empty path"),
        (["ask", "x.idx", "q", "--llm", ""], 2, "'--llm': an empty model name"),
        (["retrieve", "x.idx", "q", "--embedder", " "], 2, "'--embedder': an empty model name"),
        (["eval", "generate", "vt", "--length", "4k", "-o", ""], 2, "empty path"),
        (["eval", "x.jsonl", "-m", "bm25", "--index-dir", ""], 2, "empty path"),
        (
            ["eval", "generate", "niah-single", "--length", "999999999999k", "-o", "g.jsonl"],
            2,
            "at most 16m",
        ),
        (["eval", "generate", "niah-single", "--length", "inf", "-o", "g.jsonl"], 2, "token count"),
        (
            ["eval", "generate", "niah-single", "--length", "1e400", "-o", "g.jsonl"],
            2,
            "token count",
        ),
        (
            [
                "eval",
                "generate",
                "niah-single",
                "--length",
                "4k",
                "--count",
                "99999999999999",
                "-o",
                "g.jsonl",
            ],
            2,
            "lower --count or --length",
        ),
        (
            ["eval", "generate", "hashhop", "--length", "4k", "--hops", "0", "-o", "g.jsonl"],
            2,
            "between 1 and 6",
        ),
        (
            ["eval", "generate", "vt", "--length", "4k", "--hops", "0", "-o", "g.jsonl"],
            2,
            "between 1 and 20",
        ),
        (["eval", "generate", "hashhop", "--length", "1k", "-o", "."], 2, ". is a folder"),
        (
            [
                "eval",
                "prepare",
                "babilong",
                "story.txt",
                "--filler",
                "story.txt",
                "--length",
                "999999999999k",
                "-o",
                "g.jsonl",
            ],
            2,
            "--length",
        ),
    ],
)
def test_odd_option_values_are_one_line_refusals(
    args: list[str], code: int, message: str, story: Path
) -> None:
    proc = lcr(*args, cwd=story.parent)
    assert proc.returncode == code
    assert message in one_line(proc.stderr)
    assert not (story.parent / "g.jsonl").exists()


@pytest.mark.parametrize("kind", ["squality", "qmsum", "babilong"])
def test_eval_prepare_on_a_binary_file_says_it_is_not_text(kind: str, story: Path) -> None:
    binary = story.parent / "qa1_test.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    extra = ["--filler", "story.txt"] if kind == "babilong" else []
    proc = lcr("eval", "prepare", kind, binary.name, *extra, "-o", "out.jsonl", cwd=story.parent)
    assert proc.returncode == 1
    assert "qa1_test.bin is not UTF-8 text" in one_line(proc.stderr)


def test_running_out_of_memory_is_one_line_with_what_to_try(tmp_path: Path) -> None:
    """A real limit (ulimit -v 256 MB) and a real allocation: four 16m-token documents."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (256 * 1024**2, 256 * 1024**2))

    proc = lcr(
        "eval",
        "generate",
        "niah-single",
        "--length",
        "16m",
        "--count",
        "4",
        "-o",
        "big.jsonl",
        cwd=tmp_path,
        preexec_fn=limit_memory,
    )
    assert proc.returncode == 1
    line = one_line(proc.stderr)
    assert line.startswith("lcr: out of memory") and "--count" in line
    assert not (tmp_path / "big.jsonl").exists()


# ------------------------------------------------------ eval documents stay inside
@pytest.mark.parametrize(
    "document", ["../outside.txt", "../../../../../../../etc/passwd", "/etc/passwd", "link.txt"]
)
def test_an_eval_document_outside_the_data_folder_is_refused_before_it_is_read(
    document: str, tmp_path: Path, cinderella: Path
) -> None:
    data = tmp_path / "set"
    data.mkdir()
    shutil.copy(cinderella, tmp_path / "outside.txt")
    (data / "link.txt").symlink_to(tmp_path / "outside.txt")
    line = {"id": "q1", "question": "Who?", "answers": ["x"], "documents": [document]}
    (data / "d.jsonl").write_text(json.dumps(line) + "\n")
    proc = lcr("eval", "d.jsonl", "-m", "bm25", "--retrieval-only", "-q", cwd=data)
    assert proc.returncode == 1
    message = one_line(proc.stderr)
    assert f"document {document!r} resolves outside" in message
    assert "--documents-root" in message
    assert sorted(p.name for p in data.iterdir()) == ["d.jsonl", "link.txt"]  # nothing made


def test_documents_root_lets_an_eval_read_documents_elsewhere(
    tmp_path: Path, cinderella: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(cinderella, corpus / "tale.txt")
    data = tmp_path / "set"
    data.mkdir()
    line = {"id": "q1", "question": "Where did the bird sit?", "answers": ["tree"],
            "documents": ["../corpus/tale.txt"]}  # fmt: skip
    (data / "d.jsonl").write_text(json.dumps(line) + "\n")
    args = ["eval", "d.jsonl", "-m", "bm25", "--retrieval-only", "-q", "--json"]
    refused = lcr(*args, cwd=data)
    assert refused.returncode == 1
    proc = lcr(*args, "--documents-root", str(corpus), cwd=data)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["questions"] == 1


def _at_most_1gb() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1024**3, 1024**3))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["d.jsonl", "--out", "/dev/full"], "--out /dev/full is not a regular file"),
        (["d.jsonl", "--out", "/proc/version"], "--out /proc/version cannot be appended to"),
        (["/dev/zero"], "/dev/zero is a device, not a JSONL dataset"),
    ],
)
def test_eval_refuses_a_device_for_its_data_or_results(
    args: list[str], message: str, tmp_path: Path
) -> None:
    """/dev/full and /dev/zero were read whole (memory without bound), /proc/version was
    an internal error. Under a 1 GB limit, so a regression cannot eat the machine."""
    made = lcr("eval", "generate", "vt", "--length", "1k", "--count", "1", "-o", "d.jsonl",
               "-q", cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stderr
    proc = lcr(
        "eval", *args, "-m", "bm25", "--retrieval-only", "-q",
        cwd=tmp_path,
        preexec_fn=_at_most_1gb,
    )  # fmt: skip
    assert proc.returncode == 1
    assert message in one_line(proc.stderr)


@pytest.mark.parametrize(
    "exc",
    [
        MemoryError(),
        OSError(12, "Cannot allocate memory"),
        RuntimeError("can't start new thread"),
        ImportError("libx.so: failed to map segment from shared object"),
    ],
)
def test_every_way_of_saying_out_of_memory_is_the_out_of_memory_line(
    exc: BaseException, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seen under ulimit -v: a build's thread pool and a compiled library's import fail
    this way before any MemoryError (they were "internal error")."""
    from lcr.cli.errors import report

    assert report(exc) == 1
    assert capsys.readouterr().err.startswith("lcr: out of memory")
