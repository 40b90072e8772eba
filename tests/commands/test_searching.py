"""`pocketmcp search` (commands/searching.py): it asks the HTTP server of the same index when
one runs, and opens the index itself otherwise (the same hits either way); its JSON carries
the search tool's fields, filtered by flags; before any indexing it says what to do."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import A, B, run_as_user, run_cli
from support.mcp_harness import server_env, start_http, stop_http
from support.processes import provider_settings
from support.provider_server import ProviderServer


def _search(root: Path, *args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "pocketmcp", "search", *args, "--json"],
                          capture_output=True, text=True, env=server_env(root), cwd=root,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout)
    return found


@pytest.mark.usefixtures("processes")
def test_search_asks_the_running_server_and_finds_what_a_local_search_finds(
        tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C.\n")
    (tmp_path / "kb" / "bike.md").write_text("# Bikes\n\nA flat tyre needs a new tube.\n")
    server = start_http(tmp_path)
    try:
        remote = _search(tmp_path, "brewing green tea", "-k", "2", "--unique-docs")
        local = _search(tmp_path, "brewing green tea", "-k", "2", "--unique-docs", "--local")
    finally:
        assert stop_http(server) == 0
    assert remote["via"] == server.url and local["via"] == "local"
    assert [h["path"] for h in remote["hits"]] == [h["path"] for h in local["hits"]]  # type: ignore[index]
    assert remote["hits"][0]["path"] == "tea.md"  # type: ignore[index]
    # The server gone, its discovery file is ignored: the search is made here.
    assert _search(tmp_path, "flat tyre", "-k", "1")["via"] == "local"


@pytest.mark.usefixtures("processes")
def test_searching_before_indexing_says_what_to_do(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "search", "anything")
    assert done.returncode == 1
    assert "pocketmcp index" in done.stderr


@pytest.mark.usefixtures("processes")
def test_check_search_before_indexing_says_what_search_says(tmp_path: Path) -> None:
    """Both name the index that is missing and the command that makes it (the file named
    by SQLITE_PATH: `--db` with it; none named: the folders' indexes there are)."""
    for run in (lambda *a: run_cli(tmp_path, *a),
                lambda *a: run_as_user(tmp_path / "home", tmp_path, *a)):
        searched, checked = run("search", "anything"), run("check-search")
        assert searched.returncode == checked.returncode == 1
        assert checked.stderr == searched.stderr
        assert "makes" in checked.stderr


@pytest.mark.usefixtures("processes")
def test_search_json_carries_the_tool_fields_and_filters_by_flags(tmp_path: Path) -> None:
    from pocketmcp.search.results import SearchMatch

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("---\ntags: [bread]\n---\n" + A)
    (kb / "b.md").write_text(B)
    assert run_cli(tmp_path, "index").returncode == 0
    found = run_cli(tmp_path, "search", "sourdough", "--json", "--tag", "bread")
    assert found.returncode == 0, found.stderr
    [hit] = json.loads(found.stdout)["hits"]
    assert set(hit) == {"rank", *SearchMatch.model_fields}
    assert (hit["path"], hit["tags"], hit["stale"]) == ("a.md", ["bread"], False)
    assert hit["modified_at"] and hit["indexed_at"]
    none = run_cli(tmp_path, "search", "sourdough", "--json", "--modified-before", "2000-01-01")
    assert json.loads(none.stdout)["hits"] == []
    bad = run_cli(tmp_path, "search", "sourdough", "--modified-after", "someday")
    assert bad.returncode == 1 and "modified_after" in bad.stderr


@pytest.mark.parametrize("command", [["search", "anything"], ["check-search"], ["doctor"]])
def test_the_indexes_are_looked_through_once_to_say_none_is_there(
        command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The indexes looked at to choose the index a command means are the ones it lists when
    none is found: each is opened once, not again for the message."""
    from pocketmcp import cli, indexes, logs

    # main() in this process: its logs are not bound to this test's captured stderr
    monkeypatch.setattr(logs, "configure", lambda level: None)
    for name in ("SQLITE_PATH", "WATCH_DIR", "POCKETMCP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    looks: list[int] = []
    known = indexes.known

    def counted() -> list[Path]:
        looks.append(1)
        return known()

    monkeypatch.setattr(indexes, "known", counted)
    assert cli.main([*command, "--client", "cursor"] if command == ["doctor"]
                    else command) == 1
    assert f"no index found for {tmp_path} (nor any other)" in "".join(capsys.readouterr())
    assert len(looks) == 1


@pytest.mark.usefixtures("processes")
def test_when_no_hit_passes_one_search_names_the_best_locally_and_through_the_server(
        tmp_path: Path) -> None:
    """The search is asked without a strict threshold: the best match under it, which the
    same reply carries, says why none is shown (no second search for it), and the reply's
    own notice of the threshold is not printed beside that sentence."""
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text(A)
    (tmp_path / "kb" / "b.md").write_text(B)

    def said(*flags: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        query = ("search", "zqxv flurbo gnarp", *flags)
        shown = subprocess.run([sys.executable, "-m", "pocketmcp", *query], capture_output=True,
                               text=True, env=server_env(tmp_path), cwd=tmp_path, timeout=120)
        assert shown.returncode == 0, shown.stderr
        return shown, _search(tmp_path, *query[1:])

    server = start_http(tmp_path)
    try:
        # Ready is keyword-searchable; the best score needs the vectors, which follow.
        waiting = "still wait for their vectors"
        deadline = time.monotonic() + 60
        while waiting in (shown := said()[0]).stderr:
            assert time.monotonic() < deadline, shown.stderr
            time.sleep(0.2)
        remote = said()
    finally:
        assert stop_http(server) == 0
    local = said("--local")
    for shown, found in (remote, local):
        assert "no matches scoring 0.20 or more (the search tool's default threshold); the " \
               "best scored 0.0" in shown.stdout
        assert not re.search(r"^ ?\d+\. score", shown.stdout, re.MULTILINE)  # none shown
        assert "score_threshold" not in shown.stderr  # the floor's notice: said in stdout
        assert found["hits"] == [] and "the best scored 0.0" in str(found["notice"])
    assert remote[1]["via"] == server.url and local[1]["via"] == "local"


def test_a_search_with_no_hit_passing_is_one_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], fake_provider: ProviderServer) -> None:
    from pocketmcp import cli, logs
    from pocketmcp.commands.searching import Searcher

    monkeypatch.setattr(logs, "configure", lambda level: None)
    for key, value in provider_settings(fake_provider.url).items():  # not the real model
        monkeypatch.setenv(key, value)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text(A)
    monkeypatch.setenv("SQLITE_PATH", str(tmp_path / "idx" / "index.db"))
    monkeypatch.setenv("WATCH_DIR", str(tmp_path / "kb"))
    assert cli.main(["index", "--progress", "off"]) == 0
    searches: list[float] = []
    searched = Searcher.__call__

    async def counted(self: Searcher, threshold: float, **kwargs: Any) -> Any:
        searches.append(threshold)
        return await searched(self, threshold, **kwargs)

    monkeypatch.setattr(Searcher, "__call__", counted)
    capsys.readouterr()
    assert cli.main(["search", "zqxv flurbo gnarp", "--local"]) == 0
    assert "the best scored 0.0" in capsys.readouterr().out
    assert searches == [0.2]


def test_the_floor_notice_is_taken_out_and_the_rest_of_the_notice_kept() -> None:
    """What `search` prints when it says why no hit passed: the reply's other notices."""
    from pocketmcp.search import floor

    removed = floor.Removed(0.2, [(1, 0.05), (2, 0.01), (3, 0.002)])
    other = "3 files are still waiting for their vectors; keyword matches only for them"
    for shown in (0, 1, 3):
        own = floor.notice(removed, shown)
        assert floor.others(own) is None
        assert floor.others(floor.joined(own, other)) == other
        assert floor.others(floor.joined(other, own, "the provider is down")) == (
            f"{other}; the provider is down")
    assert floor.others(other) == other and floor.others(None) is None
