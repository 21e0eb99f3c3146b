"""`lcr info`'s plain output: the index, its sources and each method's figures."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from lcr.cli.output import WIDTH, counted, human, say

if TYPE_CHECKING:
    from lcr.store import Index


def print_info(index: Index, problems: dict[str, list[str]], *, verified: bool) -> None:
    from lcr.cli.collection import print_sources
    from lcr.config import value_text
    from lcr.models.backends import describe_configuration

    m = index.manifest
    methods = index.methods
    say(f"index   {index.path}")
    say(f"  {human(index.size_bytes())} in all; schema {m.schema_version}, lcr {m.lcr_version}")
    say(f"source  {m.source_chars:,} characters in {len(index.documents)} document(s)")
    print_sources(index)  # each with when it was added; the last change and its cost
    if "source" in problems:
        say("  DAMAGED  source.txt does not match its checksum")
    for name, found in problems.items():
        if name.startswith("cache/"):
            say(f"  UNTRUSTED  {found[0]}")
    if not methods and not m.broken:
        say(f"methods none built (build the default ones with: {index.index_command([])})")
    for name in m.broken:
        say(f"method  {name}: DAMAGED")
        field("damage", problems[name][0])
    source_bytes = max(sum(d.size for d in index.documents), 1)
    for name, e in methods.items():
        counts = ", ".join(counted(v, k) for k, v in e.counts.items())
        state = ""
        if name in problems:
            said = problems[name][0]
            state = "  DAMAGED"
            if "could not verify" in said or "no longer reads" in said:
                state = "  NOT VERIFIED"
        elif verified:
            state = "  verified" if e.sha256 else "  sizes ok (built without checksums)"
        size = index.size_bytes(name)
        header = f"method  {name}: {counts}; {human(size)} ({size / source_bytes:.1f}x the source)"
        say(textwrap.fill(header + state, WIDTH, subsequent_indent=" " * 12))
        say(f"  built     {e.built_at} in {e.build_seconds:.1f}s")
        if name in problems:
            field("damage", problems[name][0])
        if e.models:
            field("models", ", ".join(f"{k}={v}" for k, v in e.models.items()))
        if e.settings:
            field("settings", ", ".join(f"{k}={value_text(v)}" for k, v in e.settings.items()))
        config = e.stats.get("llm_configuration")
        if isinstance(config, dict):
            field("LLM ran", describe_configuration(config))
        stats = {k: v for k, v in e.stats.items() if k != "llm_configuration"}
        if stats:
            field("stats", ", ".join(f"{k}={value_text(v)}" for k, v in stats.items()))


def field(label: str, text: str) -> None:
    """``  label     text``, wrapped to :data:`WIDTH` under its text."""
    say(textwrap.fill(text, WIDTH, initial_indent=f"  {label:9} ", subsequent_indent=" " * 12))
