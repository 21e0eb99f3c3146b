"""Settings and arguments: every value is checked when parsed, with a message naming the range."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from lcr import api
from lcr.cli.main import main
from lcr.config import Setting, Settings, setting
from lcr.errors import SettingError

# lcr's own methods, whatever plugins are installed beside lcr
pytestmark = pytest.mark.usefixtures("builtin_methods")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, cinderella: Path) -> Path:
    folder = tmp_path_factory.mktemp("settings")
    story = folder / "cinderella.txt"
    shutil.copy(cinderella, story)
    with pytest.raises(SystemExit) as exc:
        main(["index", str(story), "-q", "-m", "bm25"])
    assert exc.value.code == 0
    return folder / "cinderella.idx"


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("mixpr.alpha_local=2", "mixpr.alpha_local must be between 0 and 1; got '2'"),
        ("mixpr.max_iter=-5", "mixpr.max_iter must be between 1 and 10000"),
        ("mixpr.max_iter=1000000000", "mixpr.max_iter must be between 1 and 10000"),
        ("mixpr.top_k=-3", "mixpr.top_k must be at least 1"),
        ("bm25.top_k=0", "bm25.top_k must be at least 1"),
        ("mixpr.sim_share=7", "mixpr.sim_share must be between 0 and 1"),
        ("mixpr.alpha_global=nan", "mixpr.alpha_global takes a finite number between 0 and 1"),
        ("mixpr.router_threshold=-1", "mixpr.router_threshold must be between 0 and 1"),
        ("raptor.top_k=0", "raptor.top_k must be at least 1"),
        ("hybrid.sparse_weight=1.5", "hybrid.sparse_weight must be between 0 and 1"),
    ],
)
def test_bad_query_setting_is_refused_before_any_work(
    assignment: str, message: str, index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # bm25 retrieval: a bad value for another method is refused all the same
    code, out, err = run(["retrieve", str(index), "q", "--set", assignment], capsys)
    assert code == 2 and out == ""
    assert message in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("mixpr.threshold=-1", "mixpr.threshold must be between 0 and 1"),
        ("bm25.k1=-3", "bm25.k1 must be at least 0"),
        ("bm25.b=2", "bm25.b must be between 0 and 1"),
        ("bm25.stemmer=klingon", "bm25.stemmer must be one of none, arabic"),
        ("bm25.stopwords=xx", "bm25.stopwords must be one of none, en"),
        ("bm25.chunk_tokens=-5", "bm25.chunk_tokens must be at least 1; got '-5'"),
        ("raptor.seed=-1", "raptor.seed must be between 0 and 4294967295"),
        ("bm25.k1=abc", "bm25.k1 takes a finite number at least 0, got 'abc'"),
    ],
)
def test_bad_build_setting_is_refused_and_nothing_is_built(
    assignment: str,
    message: str,
    tmp_path: Path,
    cinderella: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    story = tmp_path / "c.txt"
    shutil.copy(cinderella, story)
    code, _, err = run(["index", str(story), "-q", "--set", assignment], capsys)
    assert code == 2 and message in err, err
    assert "max_tokens" not in err  # no internal name leaks
    assert not (tmp_path / "c.idx").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-k", "0"], "invalid value for '-k': 0 is not in the range x>=1"),
        (["-k", "-1"], "invalid value for '-k': -1 is not in the range x>=1"),
    ],
)
def test_bad_k_is_a_usage_error(
    args: list[str], message: str, index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["retrieve", str(index), "q", *args], capsys)
    assert code == 2 and message in err, err


@pytest.mark.parametrize("question", ["", "   \t"])
def test_empty_question_is_a_usage_error(
    question: str, index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["retrieve", str(index), question], capsys)
    assert (code, out, err) == (2, "", "lcr: the question is empty\n")


def test_a_question_that_is_not_utf8_is_a_usage_error(index: Path) -> None:
    """Bytes that are not UTF-8, in the arguments or on stdin, exit 2 in one line: no
    JSON line carries them (it would not be UTF-8) and no model is handed them."""
    lcr = [sys.executable, "-m", "lcr", "retrieve", str(index)]
    given = subprocess.run([*lcr, b"caf\xe9 key", "--json"], capture_output=True, timeout=120)
    assert (given.returncode, given.stdout) == (2, b"")
    want = b"lcr: the question is not UTF-8 text (an undecodable byte at character 4)\n"
    assert given.stderr == want
    piped = subprocess.run(
        [*lcr, "-", "--json"], input=b"who?\ncaf\xe9 key\n", capture_output=True, timeout=120
    )
    assert piped.returncode == 2 and piped.stderr == want, piped.stderr
    lines = piped.stdout.decode("utf-8").splitlines()  # the line before it, whole
    assert [json.loads(line)["question"] for line in lines] == ["who?"]


def test_library_refuses_bad_k_and_empty_question_as_usage_errors(index: Path) -> None:
    from lcr.errors import UsageError
    from lcr.models.container import Models
    from lcr.models.spec import ModelSpec
    from lcr.store import Index

    idx = Index.open(index)
    models = Models(spec=ModelSpec(device="cpu"))
    with pytest.raises(UsageError, match="-k must be at least 1"):
        api.plan_and_retrieve(idx, "bm25", "who?", models, k=0)
    with pytest.raises(UsageError, match="the question is empty"):
        api.plan_and_retrieve(idx, "bm25", " ", models)
    assert len(api.plan_and_retrieve(idx, "bm25", "who?", models, k=1).evidence.items) == 1


def test_settings_list_shows_each_range(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["methods", "--settings"], capsys)
    assert code == 0
    assert "mixpr.alpha_local=0.6 (paper)" in out and "[between 0 and 1]" in out
    assert "bm25.chunk_tokens=128" in out and "[at least 1]" in out
    unwrapped = re.sub(r"\|\n\s+", "|", out)  # a long choice list wraps after a '|'
    assert "[one of auto|local|global]" in unwrapped
    assert "mixpr.mode=local (measured)" in out and "mixpr.question=last-chunks (paper)" in out


def test_range_check_is_inclusive() -> None:
    s = Setting("x", 0.5, "h", low=0, high=1)
    assert s.parse("0") == 0.0 and s.parse("1") == 1.0
    with pytest.raises(SettingError, match=r"x must be between 0 and 1; got '1\.0001'"):
        s.parse("1.0001")
    with pytest.raises(SettingError, match="finite"):
        s.parse("inf")


@dataclass(frozen=True)
class Example(Settings):
    size: int = setting(32, "chunk size in words (the paper's n)", low=1)
    mode: Literal["local", "global"] = setting("local", "which walk")
    stem: str = setting("english", "stemmer", choices=("none", "english"))
    seed: int | None = setting(None, "seed; none for a random one", low=0)


def test_typed_settings_derive_their_checks_from_the_declaration() -> None:
    by_name = Example.by_name()
    assert by_name["mode"].choices == ("local", "global")  # from the Literal
    assert by_name["size"].value_type is int and by_name["seed"].optional
    assert Example.build({"mode": "global"}, label="ex").mode == "global"
    with pytest.raises(SettingError, match=r"ex.mode must be one of local, global"):
        Example.build({"mode": "sideways"}, label="ex")
    with pytest.raises(SettingError, match=r"ex.size must be at least 1"):
        Example.build({"size": 0}, label="ex")
    with pytest.raises(SettingError, match=r"unknown setting ex.nope; valid: mode, seed, size"):
        Example.build({"nope": 1}, label="ex")
    assert Example.by_name()["seed"].parse("none", "ex.seed") is None
    with pytest.raises(ValueError, match="one line"):
        setting(1, "two\nlines")


def test_version_0_2_retires_legacy_values_and_old_names() -> None:
    """No setting keeps a value for old indexes, nor an old name: ``setting()`` takes
    neither, and an old name on the command line is an unknown setting (exit 2)."""
    from lcr.pipeline.plans import parse_sets

    for retired in ({"legacy": "none"}, {"renamed_from": ("words",)}):
        with pytest.raises(TypeError):
            setting("english", "stemmer", **retired)  # type: ignore[call-overload]
    with pytest.raises(SettingError, match=r"unknown setting graphreader\.extraction_max_tokens"):
        parse_sets(["graphreader.extraction_max_tokens=300"])
    with pytest.raises(SettingError, match=r"unknown setting mixpr\.max_words"):
        parse_sets(["mixpr.max_words=16"])


@pytest.mark.parametrize(
    ("assignment", "fixed_at"),
    [
        ("mixpr.tol_rule=total", "per-node"),
        ("bm25.chunking=windows", "paragraphs"),
        ("raptor.batch_size=2", "0"),
        ("pecan.fixed_nodes=3", "10"),
        ("lightpal.answer_words=50", "200"),
    ],
)
def test_a_setting_fixed_in_0_2_is_refused_in_one_line_saying_so(
    assignment: str, fixed_at: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A setting retired into a constant says so, with its value and why (exit 2), in
    Python as on the command line, and before any work."""
    from lcr.pipeline.plans import parse_sets, typed_sets

    key = assignment.split("=")[0]
    said = f"{key} is no longer a setting: lcr 0.2.0 fixed it at {fixed_at} ("  # then why
    code, out, err = run(["retrieve", str(tmp_path / "none.idx"), "q", "--set", assignment], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and said in err, err
    key, value = assignment.split("=")
    with pytest.raises(SettingError, match="no longer a setting"):
        parse_sets([assignment])
    with pytest.raises(SettingError, match="no longer a setting"):
        typed_sets({key: value})


def test_recorded_settings_read_as_written_with_new_keys_at_their_default() -> None:
    old = Example.from_stored({"size": 16, "mode": "global", "words": 8})
    assert old == Example(size=16, mode="global")  # stem added since: its default
    assert Example.from_stored(Example().to_json()) == Example()


def _old_manifest(index: Path, method: str, edit: dict[str, object], drop: str = "") -> None:
    """Write into ``index``'s manifest what an lcr before 0.2.0 recorded for ``method``."""
    path = index / "manifest.json"
    manifest = json.loads(path.read_text())
    entry = manifest["methods"][method]
    entry["lcr_version"] = "0.1.0"
    entry["settings"].pop(drop, None)
    entry["settings"].update(edit)
    path.write_text(json.dumps(manifest))


@pytest.fixture
def old_index(tmp_path: Path, cinderella: Path) -> Path:
    story = tmp_path / "cinderella.txt"
    story.write_text(cinderella.read_text(encoding="utf-8")[:2000], encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["index", str(story), "-q", "-m", "bm25", "-m", "mixpr"])
    assert exc.value.code == 0
    return tmp_path / "cinderella.idx"


@pytest.mark.parametrize(
    ("method", "edit", "drop"),
    [
        ("mixpr", {"max_words": 32}, "chunk_words"),  # an old name at the new one's default
        # settings 0.2.0 fixed, recorded at the value they are fixed at
        ("bm25", {"chunking": "paragraphs"}, ""),
    ],
)
def test_an_old_build_that_reads_truthfully_opens(
    old_index: Path,
    capsys: pytest.CaptureFixture[str],
    method: str,
    edit: dict[str, object],
    drop: str,
) -> None:
    """A build an older lcr recorded that reads as the truth (an old name at the new one's
    default, a retired setting at its constant) opens, answers as before, and is up to
    date."""
    args = ["retrieve", str(old_index), "glass slipper", "-m", method, "--json"]
    code, before, err = run(args, capsys)
    assert code == 0, err
    _old_manifest(old_index, method, edit, drop=drop)
    code, out, err = run(args, capsys)
    assert code == 0 and not err, err
    assert json.loads(out)["evidence"] == json.loads(before)["evidence"]  # ids, spans, scores
    story = str(old_index.with_suffix(".txt"))
    code, out, err = run(["index", story, "-m", method], capsys)
    assert code == 0 and f"{method} up to date" in out, out + err


@pytest.mark.parametrize(
    ("method", "edit", "drop", "said", "hint"),
    [
        # built before the stemmer existed: unstemmed, which no default is now
        ("bm25", {}, "stemmer", "bm25.stemmer=none", "--method bm25 --force"),
        # built under an old name with another value than the new name's default
        (
            "mixpr",
            {"max_words": 16},
            "chunk_words",
            "mixpr.max_words=16",
            "--set mixpr.chunk_words=16 --force",
        ),
        # a setting 0.2.0 fixed, recorded at another value: the hint leaves it out
        ("bm25", {"chunking": "windows"}, "", "bm25.chunking=windows", "--method bm25 --force"),
    ],
)
def test_an_old_build_that_cannot_read_truthfully_is_refused_naming_force(
    old_index: Path,
    capsys: pytest.CaptureFixture[str],
    method: str,
    edit: dict[str, object],
    drop: str,
    said: str,
    hint: str,
) -> None:
    _old_manifest(old_index, method, edit, drop)
    # its rebuild options, as that lcr recorded them
    path = old_index / "manifest.json"
    manifest = json.loads(path.read_text())
    unrecorded = drop == "stemmer"  # a setting that did not exist has no option to repeat
    manifest["methods"][method]["rebuild_args"] = [] if unrecorded else [f"--set {said}"]
    path.write_text(json.dumps(manifest))
    code, out, err = run(["retrieve", str(old_index), "glass slipper", "-m", method], capsys)
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert f"its {method} build was made by lcr 0.1.0 with {said}, which lcr" in err, err
    assert "no longer reads since 0.2.0" in err and hint in err, err
    if not drop:  # a fixed setting's old value is no option of the rebuild it suggests
        assert f"--set {said}" not in err, err
    # `lcr index` does not count it as up to date: it builds it again, as today's
    story = str(old_index.with_suffix(".txt"))
    code, out, err = run(["index", story, "-m", method], capsys)
    assert code == 0 and f"{method} built in" in out, out + err
    code, out, err = run(["retrieve", str(old_index), "glass slipper", "-m", method], capsys)
    assert code == 0 and out, err


def test_every_retired_reading_names_a_setting_of_its_method() -> None:
    """The table of what older builds recorded (lcr.pipeline.integrity) names, for each
    method, settings it declares, so no entry is dead."""
    from lcr.methods import get_method
    from lcr.pipeline.integrity import BUILT_UNRECORDED_BEFORE_0_2, OLD_NAMES_BEFORE_0_2

    for name, keys in BUILT_UNRECORDED_BEFORE_0_2.items():
        cls = get_method(name).build_settings
        now = {k: s.default for k, s in cls.by_name().items()}
        now.update({k: f.value for k, f in cls.fixed.items()})  # a setting fixed in 0.2.0
        for key, was in keys.items():
            assert key in now and now[key] != was, f"{name}.{key}"
    for name, names in OLD_NAMES_BEFORE_0_2.items():
        declared = get_method(name).build_settings.by_name()
        for old, new in names.items():
            assert new in declared and old not in declared, f"{name}.{old}"


def test_a_librarys_default_is_marked_with_the_library_and_is_its_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """bm25's k1, b and stop words are bm25s's own defaults: the label names the
    library, and the values are what bm25s itself would use."""
    import inspect

    import bm25s

    from lcr.methods.baselines import BM25Settings

    by_name = BM25Settings.by_name()
    ours = {n: by_name[n] for n in ("k1", "b", "stopwords")}
    assert {s.origin for s in ours.values()} == {"library"}
    assert {s.library for s in ours.values()} == {"bm25s"}
    theirs = inspect.signature(bm25s.BM25.__init__).parameters
    assert (ours["k1"].default, ours["b"].default) == (theirs["k1"].default, theirs["b"].default)
    tokenize_default = inspect.signature(bm25s.tokenize).parameters["stopwords"].default
    # bm25s reads "en" and its default "english" as one list
    same = bm25s.tokenize(["the cat and a dog"], stopwords=tokenize_default, return_ids=False)
    assert bm25s.tokenize(["the cat and a dog"], stopwords="en", return_ids=False) == same
    code, out, _ = run(["methods", "--settings"], capsys)
    assert code == 0 and "bm25.k1=1.5 (library: bm25s)" in out
    code, out, _ = run(["methods", "--settings", "--json"], capsys)
    k1 = json.loads(out.splitlines()[0])["build_settings"]["k1"]
    assert (k1["origin"], k1["library"]) == ("library", "bm25s")
    with pytest.raises(ValueError, match="a library"):
        setting(1.0, "x", paper=True, library="bm25s")


def test_a_defaults_origin_is_one_value() -> None:
    """Issue 71: where a default comes from is one :class:`Origin` (a source and what it
    names), not six flags; setting()'s keywords make it, and the listing's JSON keeps
    its shape (``paper``, ``reference_code``, ``origin``, and what the origin names)."""
    from lcr.config import Origin, Source
    from lcr.methods.mixpr import MixPRQuery

    sim_share = MixPRQuery.by_name()["sim_share"]
    measured = "docs/methods/mixpr.md#how-the-question-joins-the-graph"
    assert sim_share.source == Origin(Source.MEASURED, measured)
    assert (sim_share.origin, sim_share.library, sim_share.paper, sim_share.measured_in) == (
        "lcr, measured",
        "",
        False,
        measured,
    )
    assert Origin.declared(measured="a.md#b") == Origin(Source.MEASURED, "a.md#b")
    assert Origin.declared() == Origin(Source.LCR)
    with pytest.raises(ValueError, match="names one"):
        Origin(Source.MEASURED)  # a measurement names its page
    with pytest.raises(ValueError, match="names none"):
        Origin(Source.PAPER, "x")


def test_the_settings_json_keeps_its_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["methods", "--settings", "--json"], capsys)
    assert code == 0
    rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
    k1 = rows["bm25"]["build_settings"]["k1"]
    assert {k: k1[k] for k in ("paper", "reference_code", "origin", "library")} == {
        "paper": False,
        "reference_code": False,
        "origin": "library",
        "library": "bm25s",
    }
    seed = rows["raptor"]["build_settings"]["seed"]
    assert (seed["paper"], seed["reference_code"], seed["origin"]) == (
        False,
        True,
        "reference code",
    )
    for row in rows.values():
        for phase in ("build_settings", "query_settings"):
            for s in row[phase].values():
                assert {"default", "help", "paper", "reference_code", "origin", "valid"} <= set(s)


def test_labels_say_what_lcr_does() -> None:
    """Issue 71: raptor.seed seeds UMAP and the BIC search's mixtures in lcr (its help
    says so, and that the reference code seeds only the BIC search)."""
    import inspect

    from lcr.methods.raptor import clustering
    from lcr.methods.raptor.method import RaptorBuild

    help_text = RaptorBuild.by_name()["seed"].help
    assert "UMAP" in help_text and "only the BIC search" in help_text
    source = inspect.getsource(clustering)
    assert "random_state=seed" in source  # UMAP's and the mixtures' fits, both seeded


@pytest.mark.parametrize("method", ["raptor", "pecan"])
def test_embed_long_says_no_measurement_chose_it(method: str) -> None:
    """Issue 71: raptor.md and pecan.md say no measurement chose ``embed_long=pooled``
    (held out, ``truncated`` was within chance); the refusal of ``--set`` says the same,
    not that a measurement found ``truncated`` worse."""
    from lcr.pipeline.plans import parse_sets

    with pytest.raises(SettingError) as refused:
        parse_sets([f"{method}.embed_long=truncated"])
    said = str(refused.value)
    assert "no measurement chose it" in said and "within chance" in said, said
    page = Path(__file__).resolve().parents[1] / "docs" / "methods" / f"{method}.md"
    assert "no measurement chose it" in page.read_text(encoding="utf-8")


def test_a_seed_is_arbitrary_and_a_stand_in_names_the_papers_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GraphReader's seed is labelled arbitrary (no seed beats another) and LightPAL's
    scorer the nearest to the paper's Qwen2.5-0.5B: in the listing, the JSON and the
    man page; one default cannot claim two origins."""
    from lcr.cli import manpage
    from lcr.methods.graphreader.method import GraphReaderQuery
    from lcr.methods.lightpal.method import LightPALBuild

    seed = GraphReaderQuery.by_name()["seed"]
    scorer = LightPALBuild.by_name()["scorer"]
    assert (seed.origin, seed.arbitrary, seed.nearest) == ("arbitrary", True, "")
    assert (scorer.origin, scorer.nearest) == ("nearest the paper's", "Qwen2.5-0.5B")
    code, out, _ = run(["methods", "--settings"], capsys)
    assert code == 0
    assert "graphreader.seed=0 (arbitrary)" in out
    assert "lightpal.scorer=qwen2.5-coder-0.5b (nearest the paper's Qwen2.5-0.5B)" in out
    code, out, _ = run(["methods", "--settings", "--json"], capsys)
    rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
    got = rows["graphreader"]["query_settings"]["seed"]
    assert got["origin"] == "arbitrary" and "nearest" not in got
    got = rows["lightpal"]["build_settings"]["scorer"]
    assert (got["origin"], got["nearest"]) == ("nearest the paper's", "Qwen2.5-0.5B")
    page = manpage.render()
    assert "(query, arbitrary) seed of the random ablation" in page
    assert "(index, nearest the paper's: Qwen2.5\\-0.5B) scorer LLM" in page
    for mixed in ({"arbitrary": True, "paper": True}, {"nearest": "X", "measured": "a.md"}):
        with pytest.raises(ValueError, match="arbitrary"):
            setting(1, "x", **mixed)  # type: ignore[arg-type]


def test_the_defaults_still_plain_lcr_are_the_ones_the_pages_say(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 56: every method default is the paper's, the reference code's, a library's,
    arbitrary, the nearest to the paper's, or lcr's with a measurement; the few still
    plain "lcr" are exactly these (each named, with why, on its page: issue 71's, which
    no measurement chose or the paper does not state), and the ones measured on a real
    graph point at GraphReader's sections."""
    code, out, _ = run(["methods", "--settings", "--json"], capsys)
    assert code == 0
    plain, measured = set(), {}
    for row in map(json.loads, out.splitlines()):
        for phase in ("build_settings", "query_settings"):
            for key, s in row[phase].items():
                if s["origin"] == "lcr":
                    plain.add(f"{row['name']}.{key}")
                elif s["origin"] == "lcr, measured":
                    measured[f"{row['name']}.{key}"] = s["measured_in"]
    assert plain == {"pecan.top"}
    pecan = "docs/methods/pecan.md#"
    points = "information-points-replies-against-the-cap"
    assert measured["pecan.points_max_new_tokens"] == pecan + points
    page = "docs/methods/graphreader.md#"
    for key in ("agent_max_new_tokens",):
        assert measured[f"graphreader.{key}"] == page + "caps-and-the-fallback-on-two-real-graphs"
    from lcr.methods.pecan.settings import PecanBuild

    assert PecanBuild.by_name()["top"].origin == "lcr"  # the paper states no stopping rule
