"""The server the browser tests drive, and how they sign in (a module of its own: test
modules must not import a conftest)."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

import httpx2

from support.mcp_harness import HttpServer

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

# The headless build first (quicker to start, no background lookups), then the full
# browser's binary; /usr/bin/chromium is a wrapper script that adds flags of its own.
_CANDIDATES = ("/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium",
               "chromium-headless-shell", "chromium")
# Playwright already passes --no-sandbox (needed as root), --headless and the flags that
# turn off background networking; the resolver rule stops every DNS lookup but loopback's.
CHROMIUM_ARGS = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
                 "--no-proxy-server"]
SKIP_REASON = ("no Chromium: apt-get install -y --no-install-recommends "
               "chromium-headless-shell (or chromium; or set POCKETMCP_CHROMIUM)")


def find_chromium() -> str | None:
    """$POCKETMCP_CHROMIUM if set, else Debian's binary, else a chromium on PATH."""
    env = os.environ.get("POCKETMCP_CHROMIUM")
    for name in [env] if env else _CANDIDATES:
        if name and (path := shutil.which(name)):
            return path
    return None


A = "# Sourdough\n\nA wild yeast starter leavens sourdough bread; feed it flour and water.\n"
B = "# Kubernetes\n\nA Service gives pods a stable virtual IP address and a DNS name.\n"


class Site:
    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.url = server.url

    def login_url(self) -> str:
        """A fresh one-time login link, asked for with the bearer token as a script would."""
        response = httpx2.post(self.url + "/login/link", headers=self.server.auth,
                               trust_env=False, timeout=10)
        assert response.status_code == 200, response.text
        url = response.json()["url"]
        assert isinstance(url, str) and url.startswith(self.url + "/login?code=")
        return url

    def status(self) -> dict[str, object]:
        """The server's /status.json, asked with the bearer token."""
        response = httpx2.get(self.url + "/status.json", headers=self.server.auth,
                              trust_env=False, timeout=10)
        assert response.status_code == 200, response.text
        data = response.json()
        assert isinstance(data, dict)
        return data


async def signed_in(context: BrowserContext, site: Site) -> Page:
    """A new page of `context`, signed in to `site` through a fresh login link."""
    page = await context.new_page()
    response = await page.goto(site.login_url())
    assert response is not None and response.status == 200
    await page.wait_for_url(site.url + "/")
    return page
