"""A first draft of a method, as an author might leave it: no summary, no paper, and a
setting declared as a plain field instead of with ``setting()``. tests/test_plugins.py
declares it as a plugin and checks that lcr refuses it in one line naming each gap."""

from __future__ import annotations

from dataclasses import dataclass

from lcr.config import Settings
from lcr.evidence import Evidence
from lcr.methods.base import BuildContext, Method, QueryContext


@dataclass(frozen=True)
class DraftQuery(Settings):
    top_k: int = 5  # not setting(...): --set draft.top_k would be "unknown setting"


class Draft(Method[Settings, DraftQuery]):
    name = "draft"
    query_settings = DraftQuery

    def build(self, ctx: BuildContext[Settings]) -> None:
        ctx.out.write_nodes([])

    def retrieve(self, ctx: QueryContext[Settings, DraftQuery], question: str) -> Evidence:
        return Evidence(self.name, [])
