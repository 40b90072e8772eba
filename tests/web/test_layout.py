"""The page read as a person reads it, in a real Chromium at a desktop (1200 px) and a phone
(390 px) width: tables without words broken in the middle, the newest documents first, no
search hit under the score threshold, and the status said in plain words."""

from __future__ import annotations

import os

import anyio
import pytest
from playwright.async_api import BrowserContext, expect
from support.mcp_harness import until
from support.web import Site, signed_in

from pocketmcp.search.run import SCORE_THRESHOLD

# Long titles and nested paths, the kind that break a table's columns.
NOTES = {
    "projects/2026/quarterly-planning-retrospective.md":
        "# Quarterly planning retrospective for the infrastructure modernisation programme\n\n"
        "We moved the build farm to the new datacentre and retired the legacy queue.\n",
    "reference/networking/kubernetes-networking-troubleshooting-checklist.md":
        "# Kubernetes networking troubleshooting checklist\n\n"
        "Check the Service selector, the endpoints, then the network policies.\n",
}
NOTES_TITLE = "Kubernetes networking troubleshooting checklist"
NEWEST = "journal/written-last.md"

# Every word of the cells (split at spaces, slashes and hyphens, where lines may break) that
# the browser laid out on more than one line.
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/[^\\s\\/\\-]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0)
                                .map((r) => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""


@pytest.fixture(scope="module")
async def notes(site: Site) -> Site:
    """The site with the long-named notes indexed (their vectors too), and one written after
    them (a modification time a minute later)."""
    kb = site.server.root / "kb"
    for rel, text in NOTES.items():
        (kb / rel).parent.mkdir(parents=True, exist_ok=True)
        (kb / rel).write_text(text)
    (kb / NEWEST).parent.mkdir(parents=True, exist_ok=True)
    (kb / NEWEST).write_text("# Written last\n\nThe most recently changed note.\n")
    later = max((kb / rel).stat().st_mtime for rel in NOTES) + 60
    os.utime(kb / NEWEST, (later, later))
    await until(lambda: anyio.to_thread.run_sync(site.status),
                lambda s: s["documents"] == 5 and s["queued"] == 0 and s["chunks_waiting"] == 0,
                seconds=60)
    return site


@pytest.mark.parametrize("width", [1200, 390])
async def test_the_documents_tables_break_no_word(context: BrowserContext, notes: Site,
                                                  width: int) -> None:
    page = await signed_in(context, notes)
    await page.set_viewport_size({"width": width, "height": 900})
    await page.goto("/documents")
    await expect(page.get_by_role("link", name=NOTES_TITLE, exact=True)).to_be_visible()
    assert await page.evaluate(BROKEN_WORDS, "table th, table td") == []
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
    # Every row keeps its title, path and date readable at this width.
    row = page.locator("table.documents tbody tr", has=page.get_by_role(
        "link", name=NOTES_TITLE, exact=True))
    for part in ("td.path", "td time"):
        box = await row.locator(part).bounding_box()
        assert box is not None and box["width"] > 0 and box["x"] + box["width"] <= width, part



async def test_the_documents_list_shows_the_newest_first(context: BrowserContext,
                                                         notes: Site) -> None:
    page = await signed_in(context, notes)
    await page.goto("/documents")
    paths = await page.locator("table.documents td.path").all_inner_texts()
    assert paths[0] == NEWEST, paths
    await expect(page.locator(".sorting strong")).to_have_text("newest first")
    changed = await page.locator("table.documents td time").evaluate_all(
        "(els) => els.map((e) => e.getAttribute('datetime'))")
    assert changed == sorted(changed, reverse=True), changed


async def test_search_shows_no_hit_under_the_threshold(context: BrowserContext,
                                                       notes: Site) -> None:
    page = await signed_in(context, notes)
    # Unrelated to every note: each hit would score near 0.
    await page.goto("/?q=which+vintage+car+won+the+rally+in+Monaco&mode=vector")
    await expect(page.locator("#count")).to_have_text("0 matches")
    await expect(page.locator(".empty")).to_contain_text(f"{SCORE_THRESHOLD:.2f}")
    await page.goto("/?q=kubernetes+service+selector+endpoints")
    scores = await page.locator(".result .score").all_inner_texts()
    assert scores, "a related query finds its note"
    for text in scores:
        label, value = text.split()
        assert label == "score" and float(value) >= SCORE_THRESHOLD, text


async def test_the_status_is_said_in_plain_words(context: BrowserContext, notes: Site) -> None:
    page = await signed_in(context, notes)
    await page.goto("/status")
    live = page.locator(".live")
    await expect(live).to_contain_text("Ready: the index is up to date with the folder")
    await expect(page.locator("[data-updated]")).to_be_visible()  # the script polled
    text = await live.inner_text()
    assert "Phase" not in text and "updated live" not in text and "_" not in text, text
