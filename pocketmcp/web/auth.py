"""Signing in to the web page without the token reaching a URL, a log or browser history.

The server hands out one-time login links (`/login?code=...`): printed at start to a terminal,
or made on request by any client holding the bearer token (`POST /login/link`). Opening one
spends its code and sets a session cookie (HttpOnly, SameSite=Strict) whose value is derived
from the token, so it is void once the token changes. The code is not the token: a link left
in history or a log is spent and opens nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

COOKIE = "pocketmcp_session"
CODE_TTL_S = 600.0  # a login link is good for ten minutes
MAX_CODES = 64  # unspent codes kept; the oldest go first


class Logins:
    """One-time login codes and the session cookie they give."""

    def __init__(self, token: str) -> None:
        self._session = hmac.new(token.encode(), b"pocketmcp web session",
                                 hashlib.sha256).hexdigest()
        self._codes: dict[str, float] = {}

    def issue(self) -> str:
        """A new one-time code for a login link."""
        now = time.monotonic()
        self._codes = {c: t for c, t in self._codes.items() if t > now}
        while len(self._codes) >= MAX_CODES:
            self._codes.pop(next(iter(self._codes)))
        code = secrets.token_urlsafe(24)
        self._codes[code] = now + CODE_TTL_S
        return code

    def redeem(self, code: str) -> str | None:
        """The session cookie's value when `code` is a live code (spent now), else None."""
        for known in list(self._codes):
            if hmac.compare_digest(known.encode(), code.encode()):
                expires = self._codes.pop(known)
                return self._session if expires > time.monotonic() else None
        return None

    def session_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(),
                                                          self._session.encode())
