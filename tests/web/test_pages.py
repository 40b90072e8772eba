"""The web page in a real headless Chromium against a real server on 127.0.0.1: signing in,
search, a document, the documents list, the live status, and refusals without the token."""

from __future__ import annotations

from pathlib import Path

import anyio
from playwright.async_api import BrowserContext, Page, expect
from support.web import Site, signed_in

MASK = "#e5e7eb"  # screenshots cover this run's temporary folders with it


async def search_for(page: Page, query: str) -> None:
    await page.get_by_role("searchbox").fill(query)
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/?q=*")


async def test_without_the_token_every_page_is_refused(context: BrowserContext,
                                                       site: Site) -> None:
    page = await context.new_page()
    response = await page.goto("/")
    assert response is not None and response.status == 401
    await expect(page.get_by_role("heading", level=1)).to_have_text("Sign in needed")
    await expect(page.locator("main")).to_contain_text("Run pocketmcp open")
    await expect(page.locator("main")).not_to_contain_text("index.db.token")
    for path in ("/?q=bread", "/doc/1", "/doc/1/file", "/documents", "/status",
                 "/status.json", "/tools"):
        assert (await context.request.get(path)).status == 401, path
    assert (await context.request.post("/doc/1/delete")).status in (401, 403)
    await context.add_cookies([{"name": "pocketmcp_session", "value": "forged",
                                "url": site.url}])
    assert (await context.request.get("/status.json")).status == 401
    assert (await context.request.get("/login?code=made-up")).status == 401


async def test_a_login_link_signs_in_once_leaving_no_code_in_history(
        context: BrowserContext, site: Site) -> None:
    link = site.login_url()
    page = await context.new_page()
    await page.goto(link)
    await page.wait_for_url(site.url + "/")
    await expect(page.get_by_role("searchbox")).to_be_visible()
    cdp = await context.new_cdp_session(page)
    history = await cdp.send("Page.getNavigationHistory")
    assert all("code=" not in entry["url"] for entry in history["entries"]), history
    cookies = await context.cookies()
    assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [
        ("pocketmcp_session", True, "Strict")]
    assert await page.evaluate("document.cookie") == ""
    # The link is spent: another browser cannot use it.
    other = await context.browser.new_context(base_url=site.url)  # type: ignore[union-attr]
    try:
        again = await (await other.new_page()).goto(link)
        assert again is not None and again.status == 401
    finally:
        await other.close()


async def test_a_login_link_opened_from_another_site_signs_in(context: BrowserContext,
                                                              site: Site) -> None:
    # localhost and 127.0.0.1 are different sites: a link clicked on a page of the one
    # that leads to the other.
    port = site.server.port
    page = await context.new_page()
    await page.route("http://localhost:9/", lambda route: route.fulfill(
        content_type="text/html", body=f'<a id="go" href="{site.login_url()}">open</a>'))
    await page.goto("http://localhost:9/")
    await page.click("#go")
    await page.wait_for_url(f"http://127.0.0.1:{port}/")
    await expect(page.get_by_role("searchbox")).to_be_visible()


async def test_the_bearer_header_reaches_the_pages(context: BrowserContext, site: Site) -> None:
    await context.set_extra_http_headers(site.server.auth)
    page = await context.new_page()
    response = await page.goto("/documents")
    assert response is not None and response.status == 200
    await expect(page.get_by_role("link", name="Sourdough", exact=True)).to_be_visible()


async def test_search_finds_a_known_file_and_opens_its_document(
        context: BrowserContext, site: Site, shots: Path) -> None:
    page = await signed_in(context, site)
    await search_for(page, "sourdough starter")
    first = page.locator(".result").first
    await expect(first.locator(".path")).to_have_text("bread.md")
    await expect(first.locator(".lines")).to_have_text("lines 1-3")  # where it is cited
    await expect(first.locator("mark").first).to_have_text("sourdough", ignore_case=True)
    await page.screenshot(path=shots / "web-search.png", full_page=True)

    await first.get_by_role("link").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Sourdough")
    await expect(page.locator(".chunk .boundary").first).to_contain_text("chunk 0")
    await expect(page.locator(".chunk pre").first).to_contain_text("wild yeast starter")
    await page.screenshot(path=shots / "web-document.png", full_page=True,
                          mask=[page.locator(".uri")], mask_color=MASK)

    original = await context.request.get(
        await page.get_by_role("link", name="Open the original file").get_attribute("href")
        or "")
    assert original.status == 200 and await original.text() == (
        site.server.root / "kb" / "bread.md").read_text()


async def test_search_filters_by_path_and_mode(context: BrowserContext, site: Site) -> None:
    page = await signed_in(context, site)
    await page.goto("/?q=stable+virtual+IP&mode=keyword&path=bread.md")
    await expect(page.locator("#count")).to_have_text("0 matches")
    await page.goto("/?q=stable+virtual+IP&mode=keyword&path=*.md")
    await expect(page.locator(".result .path").first).to_have_text("infra.md")


async def test_keyboard_alone_searches_and_opens_a_result(context: BrowserContext,
                                                          site: Site) -> None:
    page = await signed_in(context, site)
    assert await page.evaluate("document.activeElement.id") == "q"
    await page.keyboard.type("kubernetes service")
    await page.keyboard.press("Enter")
    await expect(page.locator(".result").first).to_be_visible()
    for _ in range(12):
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.closest('.result') !== null"):
            break
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Kubernetes")


async def test_a_narrow_window_needs_no_sideways_scrolling(context: BrowserContext,
                                                          site: Site) -> None:
    page = await signed_in(context, site)
    await page.set_viewport_size({"width": 390, "height": 800})
    for path in ("/?q=sourdough", "/documents", "/status", "/doc/1"):
        await page.goto(path)
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390, path


async def test_an_edit_shows_up_in_the_status_and_in_search(
        context: BrowserContext, site: Site, shots: Path) -> None:
    page = await signed_in(context, site)
    await page.goto("/status")
    indexed = page.locator('[data-field="files_indexed_since_start"]')
    before = int(await indexed.inner_text())
    (site.server.root / "kb" / "tardigrade.md").write_text(
        "# Tardigrades\n\nWater bears survive the vacuum of space and boiling water.\n")
    # No reload: the page's script polls the status.
    await expect(indexed).to_have_text(str(before + 1), timeout=30_000)
    # Its keywords first, its vector after: the page shows none waiting once it has it.
    await expect(page.locator('[data-field="chunks_waiting"]')).to_have_text(
        "0", timeout=30_000)
    await expect(page.locator('[data-field="vectors_eta"]')).to_have_text("done")
    await expect(page.locator("[data-updated]")).to_be_visible()
    await expect(page.locator('[data-field="phase_text"]')).to_have_text(
        "Ready: the index is up to date with the folder")
    (site.server.root / "kb" / "blob.md").write_bytes(b"\x00\x01binary\x00" * 10)
    await expect(page.locator("#skips")).to_contain_text("blob.md: binary content",
                                                         timeout=30_000)
    await page.screenshot(path=shots / "web-status.png", full_page=True,
                          mask=[page.locator("dd.path")], mask_color=MASK)
    await page.goto("/")
    await search_for(page, "water bears in space")
    await expect(page.locator(".result .path").first).to_have_text("tardigrade.md")


async def test_a_document_is_deleted_only_after_confirmation(
        context: BrowserContext, site: Site, shots: Path) -> None:
    page = await signed_in(context, site)
    (site.server.root / "kb" / "doomed.md").write_text("# Doomed\n\nShort-lived note.\n")
    with anyio.fail_after(30):
        while True:
            await page.goto("/documents?sort=modified")
            if await page.get_by_role("link", name="Doomed", exact=True).count():
                break
            await anyio.sleep(0.1)
    await expect(page.locator("table.libraries")).to_contain_text("default")
    await page.get_by_role("link", name="path", exact=True).click()
    paths = await page.locator("table.documents td.path").all_inner_texts()
    assert paths == sorted(paths) and "doomed.md" in paths
    await page.screenshot(path=shots / "web-documents.png", full_page=True)
    await page.get_by_role("link", name="Delete Doomed").click()
    await expect(page.get_by_role("heading", level=1)).to_contain_text("Delete")
    await page.get_by_role("link", name="Cancel").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Doomed")
    await page.goto("/documents")
    await page.get_by_role("link", name="Delete Doomed").click()
    await page.get_by_role("button", name="Delete").click()
    await expect(page.locator(".notice")).to_contain_text("was deleted")
    await expect(page.get_by_role("link", name="Doomed", exact=True)).to_have_count(0)
