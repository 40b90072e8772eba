"""Takes the web page's screenshots in docs/ (docs/web.md shows them) in the real browser.

    .venv/bin/python scripts/screenshots.py [OUT_DIR]

Starts `pocketmcp serve --transport http` on a copy of examples/kb (with the built-in model),
signs in with a one-time link as a person would, and saves search, a document, the documents
list and the status at a desktop width (1200 px), and the documents list at a phone's
(390 px). Needs Debian's Chromium, as the browser tests do (scripts/setup.sh installs it).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from playwright.sync_api import Page, sync_playwright  # noqa: E402
from support.mcp_harness import start_http, stop_http  # noqa: E402
from support.web import CHROMIUM_ARGS, SKIP_REASON, Site, find_chromium  # noqa: E402

DESKTOP, PHONE = {"width": 1200, "height": 800}, {"width": 390, "height": 844}


def shoot(page: Page, out: Path, name: str) -> None:
    page.screenshot(path=out / name, full_page=True)
    print(f"screenshots: {out / name}", file=sys.stderr)


def main(out: Path) -> None:
    chromium = find_chromium()
    if chromium is None:
        sys.exit(SKIP_REASON)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pocketmcp-") as tmp:
        root = Path(tmp)
        shutil.copytree(ROOT / "examples" / "kb", root / "kb")
        server = start_http(root)
        try:
            site = Site(server)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                             args=CHROMIUM_ARGS)
                context = browser.new_context(base_url=site.url, locale="en-US",
                                              viewport=DESKTOP, service_workers="block")
                page = context.new_page()
                page.goto(site.login_url())
                page.wait_for_url(site.url + "/")
                page.goto("/?q=how+do+I+keep+a+sourdough+starter+alive")
                page.locator(".result").first.wait_for()
                page.evaluate("document.activeElement.blur()")  # no focus ring in the picture
                shoot(page, out, "web-search.png")
                page.locator(".result h2 a").first.click()
                page.locator(".chunk").first.wait_for()
                shoot(page, out, "web-document.png")
                page.goto("/documents")
                shoot(page, out, "web-documents.png")
                page.goto("/status")
                page.locator("[data-updated]").wait_for()  # the script has polled once
                shoot(page, out, "web-status.png")
                page.set_viewport_size(PHONE)
                page.goto("/documents")
                shoot(page, out, "web-documents-phone.png")
                browser.close()
        finally:
            stop_http(server)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
