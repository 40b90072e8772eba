"""A small vault of notes written by the tests: front matter, tags, links, a malformed
block, and dated files."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

NOW = dt.datetime.now(dt.UTC)
VAULT = {
    "projects/apollo.md": (
        "---\ntitle: Apollo launch plan\ntags: [project/apollo, decision]\n"
        "created: 2024-01-10\nupdated: 2024-03-01\nstatus: active\npriority: 3\n"
        "aliases: [Moonshot]\n---\n# Apollo\n\nWe chose the Friday launch window. "
        "Costs are in [[Budget]], risks in [the risk list](../risks.md).\n", None),
    "budget.md": ("# Budget\n\nThe launch costs forty thousand. #money #decision\n",
                  NOW - dt.timedelta(days=1)),
    "risks.md": ("---\ndate: 2023-12-01\ntags: risk\npriority: 1\nstatus: active\n---\n"
                 "# Risks\n\nWeather may delay the launch.\n", None),
    "journal/2024-03-10.md": (
        "---\ndate: 2024-03-10\ntags: [journal]\nstatus: done\n---\n# Tuesday\n\n"
        "Talked about [[Moonshot]] and [[Apollo#Costs|the costs]]; also [[Nowhere]].\n", None),
    "broken.md": ("---\ntitle: [unclosed\n---\n# Broken\n\nThe zebra crossing note. #misc\n",
                  None),
    "old.md": ("# Old\n\nAn old note about launch checklists.\n",
               dt.datetime(2020, 5, 1, tzinfo=dt.UTC)),
}
DEFAULT_TIME = NOW - dt.timedelta(days=30)


def write_vault(kb: Path) -> None:
    for rel, (text, when) in VAULT.items():
        path = kb / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        stamp = (when or DEFAULT_TIME).timestamp()
        os.utime(path, (stamp, stamp))
