"""The server the browser tests drive, and how they sign in (a module of its own: test
modules must not import a conftest)."""

from __future__ import annotations

import httpx2

from support.mcp_harness import HttpServer

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
