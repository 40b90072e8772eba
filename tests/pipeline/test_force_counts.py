"""A folder re-read by force: every file is written again (updated, as the tools report a
forced reindex), and the pipeline's own counters tell which of them had the same text."""

from __future__ import annotations

from support.index import Index


async def test_a_forced_rescan_counts_the_same_text_unchanged(fake_index: Index) -> None:
    kb = fake_index.kb
    (kb / "bread.md").write_text("# Bread\n\nSourdough needs a starter.\n")
    (kb / "tea.md").write_text("# Tea\n\nGreen tea is brewed cooler than coffee.\n")
    first = await fake_index.index_once()
    assert (first.stats.added, first.stats.updated, first.stats.unchanged) == (2, 0, 0)
    (kb / "tea.md").write_text("# Tea\n\nBlack tea is brewed with boiling water.\n")
    forced = await fake_index.index_once(force=True)
    # Both re-read and written again; only tea.md changed.
    s = forced.stats
    assert (s.added, s.updated, s.unchanged, s.rechecked) == (0, 2, 0, 1)
    statuses = {e["path"]: e["status"] for e in fake_index.events
                if e["event"] in ("inserted", "updated")}
    assert statuses == {"bread.md": "unchanged", "tea.md": "updated"}
