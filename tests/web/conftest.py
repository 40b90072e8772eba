"""Browser tests: the web page of a real HTTP server, driven in Debian's Chromium by
Playwright's async API, offline.

Chromium comes from Debian (scripts/setup.sh installs it as root with apt), never from
`playwright install`. Without it these tests skip with the reason, except under CI=true,
where a missing browser is a broken setup and fails instead of passing as all-skipped.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, async_playwright
from support.mcp_harness import start_http, stop_http
from support.web import CHROMIUM_ARGS, SKIP_REASON, A, B, Site, find_chromium

CHROMIUM = find_chromium()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if here in item.path.parents
            and "browser" in getattr(item, "fixturenames", ())]
    if CHROMIUM is not None or not mine:
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"CI=true but {SKIP_REASON}")
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-wide, so the browser (a module fixture) and the tests share one event loop."""
    return "asyncio"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, module_processes: dict[str, str]
         ) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web")
    (root / "kb").mkdir()
    (root / "kb" / "bread.md").write_text(A)
    (root / "kb" / "infra.md").write_text(B)
    served = start_http(root)
    try:
        yield Site(served)
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]
        assert served.token not in served.stderr()
        assert "code=" not in served.stderr()  # login links never reach the log


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    assert CHROMIUM is not None
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                            args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def context(browser: Browser, site: Site) -> AsyncIterator[BrowserContext]:
    """A fresh browser profile on the site: no cookie yet."""
    ctx = await browser.new_context(base_url=site.url, locale="en-US", service_workers="block")
    ctx.set_default_timeout(15_000)
    try:
        yield ctx
    finally:
        await ctx.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: $WEB_SHOTS when set, else a tmp dir."""
    path = Path(os.environ.get("WEB_SHOTS", tmp_path))
    path.mkdir(parents=True, exist_ok=True)
    return path
