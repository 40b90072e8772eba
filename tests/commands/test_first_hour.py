"""What a new user meets first, run as they run it (real processes, files and servers; the
real model in the first hour's own test, the test provider elsewhere): one index per folder
that every command and the editor's entry find, no false stale marks from another directory,
nothing left in the current directory, `doctor FOLDER`, and plain words when a running server
refuses this shell's token."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.cli import A, B, run_as_user, run_cli
from support.mcp_harness import start_http, stop_http, until
from support.processes import embedding_env


def _notes(root: Path) -> Path:
    notes = root / "notes"
    notes.mkdir()
    (notes / "a.md").write_text(A)
    (notes / "b.md").write_text(B)
    return notes


def _index_files(home: Path) -> list[Path]:
    """The index files in the user data folder of `home`."""
    data = home / ".local" / "share" / "pocketmcp"
    return sorted(p for p in data.rglob("*.db") if p.parent.name != "databases")


@pytest.mark.usefixtures("processes")
def test_a_search_from_another_directory_marks_no_file_stale_until_one_changes(
        tmp_path: Path) -> None:
    notes = _notes(tmp_path)
    index = str(tmp_path / "i.db")
    (tmp_path / "elsewhere").mkdir()
    done = run_as_user(tmp_path / "home", tmp_path, "index", "notes",
                       env={"SQLITE_PATH": index})
    assert done.returncode == 0, done.stderr
    query = ("search", "a wild yeast starter leavens sourdough bread", "-k", "2")
    found = run_as_user(tmp_path / "home", tmp_path / "elsewhere", *query, "--json",
                        env={"SQLITE_PATH": index})
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert hits and hits[0]["path"] == "a.md"
    assert [h["stale"] for h in hits] == [False] * len(hits)
    shown = run_as_user(tmp_path / "home", tmp_path / "elsewhere", *query,
                        env={"SQLITE_PATH": index})
    assert "a.md" in shown.stdout and "changed since indexed" not in shown.stdout
    (notes / "a.md").write_text(A + "\nRye flour helps.\n")
    os.utime(notes / "a.md", ns=(1, 1))
    found = run_as_user(tmp_path / "home", tmp_path / "elsewhere", *query, "--json",
                        env={"SQLITE_PATH": index})
    stale = {h["path"]: h["stale"] for h in json.loads(found.stdout)["hits"]}
    assert stale["a.md"] is True


async def _editors_server(entry: dict[str, Any], home: Path, cwd: Path) -> str:
    """Start the server as the editor would from its entry, wait for its first scan, stop
    it; its log."""
    # SHARE=off: this process serves itself, its log the one read here, and no shared server
    # is left running after the test (the relay to one has its own tests, test_sharing.py).
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
           "XDG_DATA_HOME": str(home / ".local" / "share"), "SHARE": "off",
           **embedding_env(), **entry.get("env", {})}
    for key in ("XDG_CACHE_HOME", "PYTHONPATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    params = StdioServerParameters(command=entry["command"], args=entry.get("args", []),
                                   env=env, cwd=str(cwd))
    log = cwd / "server.err"
    with open(log, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
                read, write) as session:
            await session.initialize()
            await until(anyio.Path(log).read_text, lambda text: "initial_indexing_done" in text,
                        seconds=90)
            status = await session.call_tool("status", {})
            assert status.structured_content is not None
            assert status.structured_content["documents"] == 2
    return log.read_text()


@pytest.mark.usefixtures("model_processes")
async def test_index_search_elsewhere_init_and_the_editors_server_share_one_index(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    notes = _notes(tmp_path)
    start, other = tmp_path / "start", tmp_path / "other"
    start.mkdir()
    other.mkdir()
    done = run_as_user(home, start, "index", str(notes), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["chunks_embedded"] == 2
    [index] = _index_files(home)
    found = run_as_user(home, other, "search", "borrow checker ownership", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["path"] == "b.md"
    printed = run_as_user(home, other, "init", str(notes), "--print", "--client", "cursor")
    assert printed.returncode == 0, printed.stderr
    entry = json.loads(printed.stdout.split("\n", 1)[1])["mcpServers"]["notes"]
    assert entry["env"] == {"WATCH_DIR": str(notes), "SQLITE_PATH": str(index)}
    log = await _editors_server(entry, home, other)
    [scan] = [json.loads(line) for line in log.splitlines()
              if '"initial_indexing_done"' in line]
    assert (scan["unchanged"], scan["chunks_embedded"]) == (2, 0)  # each chunk embedded once
    assert _index_files(home) == [index]
    assert list(start.iterdir()) == [] and sorted(p.name for p in other.iterdir()) == [
        "server.err"]
    # A bare `pocketmcp` started inside the folder serves (and watches) that same index.
    log = await _editors_server({"command": sys.executable, "args": ["-m", "pocketmcp"]},
                                home, notes)
    serving = next(json.loads(line) for line in log.splitlines() if '"serving"' in line)
    assert (serving["index"], serving["watch_dir"]) == (str(index), str(notes))
    assert _index_files(home) == [index]
    (notes / "server.err").unlink()
    # A second folder indexed: from elsewhere the folder must be named; inside one, it is
    # that folder's index.
    tea = tmp_path / "tea"
    tea.mkdir()
    (tea / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 degrees.\n")
    assert run_as_user(home, start, "index", str(tea)).returncode == 0
    which = run_as_user(home, other, "search", "green tea")
    assert which.returncode == 1
    assert f"there are 2: {notes} -> {index}; {tea} -> " in which.stderr
    assert "--data-folder FOLDER" in which.stderr
    inside = run_as_user(home, tea, "search", "green tea", "--json")
    assert json.loads(inside.stdout)["hits"][0]["path"] == "tea.md"
    named = run_as_user(home, other, "search", "green tea", "--data-folder", str(notes),
                        "--json", "--min-score", "0")
    assert {h["path"] for h in json.loads(named.stdout)["hits"]} == {"a.md", "b.md"}


@pytest.mark.usefixtures("processes")
def test_a_bare_pocketmcp_in_an_empty_folder_leaves_nothing_there(tmp_path: Path) -> None:
    """Typed at a terminal (stdin a terminal, Ctrl-D typed): it says what it is and what to
    type instead, ends at Ctrl-D, and leaves nothing in the folder."""
    import pty  # POSIX alone

    empty = tmp_path / "empty"
    empty.mkdir()
    typed, terminal = pty.openpty()
    try:
        os.write(typed, b"\x04")  # Ctrl-D, read as the end of input
        done = run_as_user(tmp_path / "home", empty, stdin=terminal)
    finally:
        os.close(typed)
        os.close(terminal)
    assert done.returncode == 0, done.stderr
    assert "this is the MCP server an editor starts" in done.stderr
    assert "`pocketmcp index FOLDER`" in done.stderr
    assert list(empty.iterdir()) == []


@pytest.mark.usefixtures("processes")
def test_doctor_checks_a_folders_index_and_each_client_entry_with_its_own(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    notes = _notes(tmp_path)
    (tmp_path / "other").mkdir()
    unindexed = doctor = run_as_user(home, tmp_path / "other", "doctor", str(notes))
    assert unindexed.returncode == 1
    assert "FAIL  index" in doctor.stdout and f"-> `pocketmcp index {notes}`" in doctor.stdout
    assert run_as_user(home, tmp_path, "index", str(notes)).returncode == 0
    doctor = run_as_user(home, tmp_path / "other", "doctor", str(notes))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "FAIL" not in doctor.stdout and doctor.stdout.endswith("all good\n")
    assert f"ok    folder {notes}: 2 files" in doctor.stdout
    assert run_as_user(home, tmp_path, "init", str(notes), "--client", "cursor").returncode == 0
    cursor = home / ".cursor" / "mcp.json"
    doctor = run_as_user(home, tmp_path / "other", "doctor", str(notes), "--client", "cursor")
    assert doctor.returncode == 0, doctor.stdout
    [index] = _index_files(home)
    assert f"folder {notes}, index {index} (there)" in doctor.stdout
    # An entry for this folder on another index would index it again: named, with the fix.
    config = json.loads(cursor.read_text())
    config["mcpServers"]["notes"]["env"]["SQLITE_PATH"] = str(tmp_path / "elsewhere.db")
    cursor.write_text(json.dumps(config))
    doctor = run_as_user(home, tmp_path / "other", "doctor", str(notes), "--client", "cursor")
    assert doctor.returncode == 1
    assert "FAIL  Cursor: server 'notes' indexes" in doctor.stdout
    assert f"-> `pocketmcp init {notes} --client cursor`" in doctor.stdout


@pytest.mark.usefixtures("processes")
def test_a_server_that_refuses_this_shells_token_is_named_with_what_to_set(
        tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text(A)
    server = start_http(tmp_path, POCKETMCP_TOKEN="the-servers-own-token")
    try:
        at = {"SQLITE_PATH": str(tmp_path / "data" / "index.db")}
        unset = run_cli(tmp_path, "open", env=at)
        assert unset.returncode == 1
        assert f"the HTTP server at {server.url}" in unset.stderr
        assert "POCKETMCP_TOKEN is not set here" in unset.stderr
        no_client = ("--client", "cursor", "--config-file", str(tmp_path / "none.json"))
        doctor = run_cli(tmp_path, "doctor", *no_client, env=at)
        assert doctor.returncode == 1
        assert f"FAIL  the HTTP server at {server.url}" in doctor.stdout
        assert "-> set POCKETMCP_TOKEN to that server's token" in doctor.stdout
        wrong = {**at, "POCKETMCP_TOKEN": "another-token"}
        refused = run_cli(tmp_path, "open", env=wrong)
        assert refused.returncode == 1
        assert "runs but refused the POCKETMCP_TOKEN set here (HTTP 401)" in refused.stderr
        found = run_cli(tmp_path, "search", "sourdough starter", "--json", env=wrong)
        assert found.returncode == 0, found.stderr
        assert "refused the POCKETMCP_TOKEN set here" in found.stderr
        assert json.loads(found.stdout)["via"] == "local"
        right = run_cli(tmp_path, "open", env={**at, "POCKETMCP_TOKEN": server.token})
        assert right.returncode == 0 and right.stdout.startswith(server.url), right.stderr
        doctor = run_cli(tmp_path, "doctor", *no_client,
                         env={**at, "POCKETMCP_TOKEN": server.token})
        assert doctor.returncode == 0, doctor.stdout
        assert f"ok    HTTP server at {server.url}" in doctor.stdout
        page = httpx2.get(server.url + "/", headers={"Accept": "text/html"}, trust_env=False)
        assert page.status_code == 401 and "pocketmcp open" in page.text
    finally:
        assert stop_http(server) == 0


TERMINAL_RUN_S = 120  # one `pocketmcp index` of a small folder, on a busy machine


def _on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (as in a shell); (exit code, stdout, what the
    terminal showed)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    process = subprocess.Popen([sys.executable, "-m", "pocketmcp", *args], env=env, cwd=cwd,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=follower)
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + TERMINAL_RUN_S
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                process.kill()
                process.wait(10)
                raise AssertionError(f"no end within {TERMINAL_RUN_S} s: "
                                     f"{shown.decode(errors='replace')[-2000:]}")
            if not select.select([leader], [], [], left)[0]:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the process closed its end
                break
            if not chunk:
                break
            shown += chunk
        assert process.stdout is not None
        with process.stdout:
            out = process.stdout.read().decode()
    finally:
        os.close(leader)
    return process.wait(60), out, shown.decode(errors="replace")


@pytest.mark.usefixtures("processes")
def test_index_on_a_terminal_shows_the_bar_then_a_summary_of_warnings_not_log_lines(
        tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "bad.md").write_bytes(b"\x00\x01 not text \x00" * 20)
    env = {**os.environ, "SQLITE_PATH": str(tmp_path / "i.db"), "WATCH_DIR": str(kb)}
    code, out, shown = _on_a_terminal(["index", "--log-file", str(tmp_path / "log.jsonl")],
                                      env, tmp_path)
    assert code == 3, shown
    assert "100%" in shown and "1 added" in out
    assert '{"' not in shown  # no JSON log line on the terminal
    assert "1 warning(s) or error(s) while indexing" in shown
    assert "warning skipped: path=bad.md, reason=binary content" in shown
    logged = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert {"skipped", "initial_indexing_done"} <= {line["event"] for line in logged}
    # -v: every line, above the bar
    code, _, shown = _on_a_terminal(["index", "--force", "-v"], env, tmp_path)
    assert code == 3, shown  # bad.md skipped again
    assert '"event": "initial_indexing_done"' in shown and "while indexing" not in shown
    # Off a terminal: the JSON lines on stderr, as they come.
    piped = run_cli(tmp_path, "index", "--force", env={"SQLITE_PATH": str(tmp_path / "i.db")})
    assert '"event": "skipped"' in piped.stderr and "while indexing" not in piped.stderr


@pytest.mark.usefixtures("processes")
def test_search_leaves_out_weak_hits_labels_the_score_and_says_why_none_passed(
        tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "b.md").write_text(B)
    assert run_cli(tmp_path, "index").returncode == 0
    found = run_cli(tmp_path, "search", "the borrow checker and ownership rules")
    assert found.returncode == 0, found.stderr
    lines = [ln for ln in found.stdout.splitlines() if ln[:3].strip().rstrip(".").isdigit()]
    assert lines and lines[0].startswith(" 1. score 0.") and "b.md" in lines[0]
    assert all(float(ln.split("score ")[1].split()[0]) >= 0.2 for ln in lines)
    none = run_cli(tmp_path, "search", "zqxv flurbo gnarp")
    assert none.returncode == 0
    assert "no matches scoring 0.20 or more (the search tool's default threshold)" in (
        none.stdout)
    assert "the best scored 0.0" in none.stdout and "`--min-score 0`" in none.stdout
    every = run_cli(tmp_path, "search", "zqxv flurbo gnarp", "--min-score", "0", "--json")
    assert len(json.loads(every.stdout)["hits"]) == 2
