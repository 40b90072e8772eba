"""Login codes and the session cookie, and the helpers the templates use (no browser)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from support.mcp_harness import server_env
from support.records import IDENTITY
from support.web import Site

from pocketmcp.store.places import at_file
from pocketmcp.web import auth
from pocketmcp.web.auth import Logins
from pocketmcp.web.routes import is_web_path
from pocketmcp.web.text import highlight, human_bytes


def test_a_login_code_gives_the_session_once() -> None:
    logins = Logins("the-token")
    code = logins.issue()
    session = logins.redeem(code)
    assert session is not None and logins.session_ok(session)
    assert "the-token" not in session and code not in session
    assert logins.redeem(code) is None  # spent
    assert logins.redeem("made-up") is None
    assert not logins.session_ok("forged") and not logins.session_ok(None)


def test_the_session_is_void_under_another_token() -> None:
    first = Logins("token-one").redeem(Logins("token-one").issue())  # another process's code
    assert first is None
    one, two = Logins("token-one"), Logins("token-two")
    session = one.redeem(one.issue())
    assert session is not None and not two.session_ok(session)


def test_an_expired_code_opens_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    logins = Logins("t")
    monkeypatch.setattr(auth, "CODE_TTL_S", -1.0)
    code = logins.issue()
    assert logins.redeem(code) is None


def test_unspent_codes_are_bounded() -> None:
    logins = Logins("t")
    first = logins.issue()
    for _ in range(auth.MAX_CODES):
        logins.issue()
    assert logins.redeem(first) is None


def test_query_words_are_marked_and_the_rest_escaped() -> None:
    marked = str(highlight("Sourdough <b>starter</b> & bread", "sourdough starters"))
    assert marked == ("<mark>Sourdough</mark> &lt;b&gt;<mark>starter</mark>&lt;/b&gt; "
                      "&amp; bread")
    assert str(highlight("<i>x</i>", "")) == "&lt;i&gt;x&lt;/i&gt;"


def test_the_page_paths_are_told_from_the_mcp_paths() -> None:
    assert all(is_web_path(p) for p in ("/", "/doc/3", "/documents", "/status.json"))
    assert not any(is_web_path(p) for p in ("/mcp", "/sse", "/messages/", "/tools", "/x"))
    assert human_bytes(512) == "512 B" and human_bytes(3 * 1024 * 1024) == "3.0 MB"


def test_pocketmcp_open_prints_a_login_link_that_signs_in(site: Site) -> None:
    root = site.server.root
    done = subprocess.run([sys.executable, "-m", "pocketmcp", "open"], cwd=root,
                          env=server_env(root), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    link = done.stdout.strip()
    assert link.startswith(site.url + "/login?code=") and site.server.token not in link
    with httpx2.Client(trust_env=False, timeout=10) as client:
        signed = client.get(link)
        assert signed.status_code == 200 and "pocketmcp_session" in signed.cookies
        assert signed.headers["referrer-policy"] == "no-referrer"
        assert signed.headers["cache-control"] == "no-store"
        assert "httponly" in signed.headers["set-cookie"].lower()
        assert client.get(site.url + "/status.json").json()["phase"] == "ready"
        assert client.get(link).status_code == 401  # spent


@pytest.mark.usefixtures("processes")
def test_pocketmcp_open_without_a_server_says_how_to_start_one(tmp_path: Path) -> None:
    env = server_env(tmp_path)
    open_ = [sys.executable, "-m", "pocketmcp", "open"]
    done = subprocess.run(open_, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "no index at" in done.stderr  # nothing to serve yet
    at_file(Path(env["SQLITE_PATH"])).writer(IDENTITY).close()  # an index, no server
    done = subprocess.run(open_, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "pocketmcp serve --transport http" in done.stderr
