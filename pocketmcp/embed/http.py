"""Reaching a remote provider over HTTP: where it is, how its answers look, and which of its
failures are worth sending a request again for.

Sent again: a timeout, a lost connection, 408, 409, 425, 429 and 5xx (but 501 and 505), after
what Retry-After (or retry-after-ms) asks, when it asks. Not sent again: a quota 429, 401/403
(the key), 404 (the model or the address), other 4xx; each names the setting to fix. 400, 413
and 422 may be one text's fault (embed/remote.py splits the request to find it).
"""

from __future__ import annotations

import email.utils
import time
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec

from pocketmcp.core.net import is_loopback as host_is_loopback
from pocketmcp.core.secret import Secret
from pocketmcp.embed.base import F32
from pocketmcp.errors import ProviderRejected

Kind = Literal["passage", "query"]
RETRY_STATUSES = frozenset({408, 409, 425, 429})
NOT_TRANSIENT_5XX = frozenset({501, 505})
QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
INPUT_STATUSES = frozenset({400, 413, 422})  # may be one text's fault: split to find it


class Api(Protocol):
    """How one provider's requests and answers look (embed/openai.py, embed/ollama.py)."""

    path: str  # appended to the base URL's path

    def body(self, texts: list[str], kind: Kind) -> dict[str, Any]: ...

    def vectors(self, answer: Any, count: int) -> tuple[F32, int | None]:
        """(one row per text, tokens the provider counted); ValueError, KeyError, TypeError
        or IndexError when the answer does not have the expected shape."""
        ...

    def error(self, answer: Any) -> tuple[str, str | None]:
        """(message, code) of an error answer's JSON."""
        ...


class Remote(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how to reach a provider."""

    provider: str
    model: str
    base_url: str
    timeout_s: float
    retries: int
    retry_base_s: float
    concurrency: int
    batch_size: int
    batch_tokens: int
    headers: dict[str, str]
    key_variable: str
    secret: Secret | None = None  # only to scrub it from messages

    @property
    def has_key(self) -> bool:
        return self.secret is not None

    def scrub(self, text: str) -> str:
        """`text` without the API key, should a server have echoed it."""
        return text.replace(self.secret.reveal(), "***") if self.secret else text


class Failed(Exception):
    """One request failed. `transient`: worth sending again; `input`: maybe one text's
    fault; `wait`: what Retry-After asked for; `rejected`: the error to report as it is;
    `slow`: no answer within the time limit."""

    def __init__(self, message: str, *, transient: bool = False, input: bool = False,
                 wait: float | None = None, rejected: ProviderRejected | None = None,
                 slow: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
        self.slow = slow
        self.input = input
        self.wait = wait
        self.rejected = rejected


def failure_of(response: httpx.Response, api: Api, remote: Remote, where: str | None
               ) -> Failed:
    """What an error answer means: sent again, split, or a refusal naming what to fix."""
    status = response.status_code
    try:
        message, code = api.error(response.json())
    except ValueError:
        message, code = response.text[:300] or response.reason_phrase, None
    said = f"HTTP {status}: {remote.scrub(message)[:500]}"
    if code in QUOTA_CODES:
        return refused(remote, where, f"{said}. The account's quota or billing limit is reached")
    if response.headers.get("x-should-retry") == "false":
        return Failed(said)
    if status in RETRY_STATUSES or (status >= 500 and status not in NOT_TRANSIENT_5XX):
        return Failed(said, transient=True, wait=retry_after(response.headers))
    if status in (401, 403):
        fix = (f"check the API key in {remote.key_variable}" if remote.has_key
               else f"no API key was sent: put it in {remote.key_variable} (or name another "
                    "variable with EMBED_API_KEY_ENV)")
        return refused(remote, where, f"{said}. {fix}")
    if status == 404:
        return refused(remote, where, f"{said}. Check EMBED_MODEL={remote.model!r} and "
                                      f"EMBED_BASE_URL ({where})")
    if status in INPUT_STATUSES:
        return Failed(said, input=True)
    return refused(remote, where, f"{said}. Check EMBED_PROVIDER and EMBED_BASE_URL ({where})")


def refused(remote: Remote, where: str | None, message: str) -> Failed:
    return Failed(message, rejected=ProviderRejected(
        f"refused by the {remote.provider} embedding provider at {where}: {message}"))


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the provider asked to wait: retry-after-ms, or Retry-After in seconds or as
    an HTTP date."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            continue
        return max(0.0, when.timestamp() - time.time())
    return None


def is_loopback(url: str) -> bool:
    """Whether `url` points at this machine."""
    return host_is_loopback(urlsplit(url).hostname or "")


def endpoint(base_url: str, path: str) -> str:
    """`path` appended to the base URL's path, its query string (Azure's api-version) kept."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


def shown(url: str) -> str:
    """A URL as logged and reported: no query string, no user or password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
