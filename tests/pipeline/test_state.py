"""The pipeline's counters."""

from __future__ import annotations

from pocketmcp.pipeline.state import RECENT_SKIPS, Stats


def test_skipped_files_are_counted_and_the_latest_kept_with_why() -> None:
    stats = Stats()
    for i in range(RECENT_SKIPS + 5):
        stats.skip(f"f{i}.md", "binary content")
    assert stats.skipped == RECENT_SKIPS + 5
    assert len(stats.recent_skips) == RECENT_SKIPS
    assert stats.recent_skips[-1] == (f"f{RECENT_SKIPS + 4}.md", "binary content")
    assert stats.recent_skips[0] == ("f5.md", "binary content")
