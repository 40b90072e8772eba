"""The log lines held back while `index` shows its bar (logs.Held): every line kept, and the
warnings and errors counted by event as they are logged, whatever the lines look like."""

from __future__ import annotations

import io
import logging

import pytest
import structlog

from pocketmcp import logs


@pytest.mark.parametrize("json", [True, False])
def test_warnings_and_errors_are_counted_by_event_as_logged(json: bool) -> None:
    kept = io.StringIO()
    held = logs.Held(kept)
    before = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logs.configure("info", json=json, out=held)  # type: ignore[arg-type]
    try:
        log = logs.get("pocketmcp.test")
        log.info("indexed", path="a.md")
        for path in ("bad.md", "worse.md"):
            log.warning("skipped", path=path, reason="binary content")
        log.error("writer_failed", index="i.db", error="disk full")
        logging.getLogger("pocketmcp.std").warning("a plain line")
    finally:  # the suite's logging as it was
        structlog.configure(**before)
        root.handlers[:] = handlers
        root.setLevel(level)
    assert held.problems == {
        ("warning", "skipped"): [2, "path=bad.md, reason=binary content"],
        ("error", "writer_failed"): [1, "index=i.db, error=disk full"],
        ("warning", "pocketmcp.std"): [1, "a plain line"]}
    lines = kept.getvalue().splitlines()
    assert len(lines) == 5 and "indexed" in lines[0] and "worse.md" in lines[2]
    assert held.summary()[0] == ("  warning skipped: path=bad.md, reason=binary content "
                                 "(and 1 more)")
