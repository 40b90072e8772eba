"""Each client keeps its own settings through the shared server, with real processes: its
tool profile, title and instructions are what a process serving it alone would present,
whoever started the server; the index's own settings are checked; SHARE=off serves alone."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.cli import command_for
from support.mcp_harness import call, mcp_session, server_env, start_http, stop_http

from pocketmcp.mcp import discovery
from pocketmcp.mcp.settings import TOOL_NAMES, TOOL_SETS
from pocketmcp.store.places import at_file

pytestmark = pytest.mark.usefixtures("processes")

SHARED = {"SHARE": "on", "SERVER_IDLE_EXIT_S": "1"}
CORE = ("--title", "notes-core", "--inst", "Search the notes; nothing else.")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C.\n")
    return tmp_path


async def presented(session: ClientSession, init: Any) -> dict[str, Any]:
    """What a client is shown: the server's announcement, its tools, and what a call of a
    tool outside the core set answers."""
    listed = await session.list_tools()
    refused = await session.call_tool("upsert_documents", {"docs": [{"text": "x"}]})
    return {"init": init.model_dump(mode="json", by_alias=True),
            "tools": [t.model_dump(mode="json", by_alias=True) for t in listed.tools],
            "upsert": refused.model_dump(mode="json", by_alias=True)}


@asynccontextmanager
async def editor(root: Path, name: str, args: tuple[str, ...], **env: str
                 ) -> AsyncIterator[tuple[ClientSession, Any]]:
    """An editor's session with `pocketmcp` on stdio, and the answer to its `initialize`."""
    full_env = server_env(root, **env)
    command = command_for(full_env)
    params = StdioServerParameters(command=command[0], args=[*command[1:], *args],
                                   env=full_env, cwd=str(root))
    with open(root / f"{name}.err", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
                read, write) as session:
            yield session, await session.initialize()


async def seen(root: Path, name: str, args: tuple[str, ...], **env: str) -> dict[str, Any]:
    async with editor(root, name, args, **env) as (session, init):
        return await presented(session, init)


@pytest.mark.parametrize("first", ["core", "all"])
async def test_each_client_keeps_its_tool_profile_title_and_instructions(
        root: Path, first: str) -> None:
    """The first editor starts the shared server with its settings; an editor with the other
    profile (and the core one's own title and instructions) beside it is shown what a
    process serving it alone shows."""
    profiles = {"core": (CORE, {"TOOLS": "core"}), "all": ((), {})}
    other = "all" if first == "core" else "core"
    with anyio.fail_after(180):
        async with editor(root, "first", profiles[first][0], **SHARED,
                          **profiles[first][1]) as (starter, init):
            await call(starter, "status")
            shown = {first: await presented(starter, init)}
            shown[other] = await seen(root, "other", profiles[other][0], **SHARED,
                                      **profiles[other][1])
        alone = {name: await seen(root, f"alone-{name}", args, SHARE="off", **env)
                 for name, (args, env) in profiles.items()}
    for name in ("first", "other"):
        assert '"bridging"' in (root / f"{name}.err").read_text()
    for name in ("alone-core", "alone-all"):
        assert '"bridging"' not in (root / f"{name}.err").read_text()
    assert sorted(t["name"] for t in shown["core"]["tools"]) == sorted(TOOL_SETS["core"])
    assert sorted(t["name"] for t in shown["all"]["tools"]) == sorted(TOOL_NAMES)
    assert shown["core"]["init"]["serverInfo"]["name"] == "notes-core"
    assert shown["core"]["init"]["instructions"] == CORE[3]
    assert shown["all"]["init"]["serverInfo"]["name"] == "pocketmcp"
    assert shown["core"]["upsert"]["isError"] and not shown["all"]["upsert"]["isError"]
    for name in ("core", "all"):
        if name == "all":  # its upsert wrote through the shared server, alone's its own
            shown[name].pop("upsert")
            alone[name].pop("upsert")
        assert shown[name] == alone[name], name


async def test_share_off_serves_alone_beside_a_running_server(root: Path) -> None:
    served = start_http(root)
    try:
        with anyio.fail_after(90):
            async with mcp_session(root, stderr_name="off.err", SHARE="off") as session:
                status = await call(session, "status")
        assert status["sharing"]["serving"] == "alone"
        assert '"bridging"' not in (root / "off.err").read_text()
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]


async def test_an_editor_with_another_folder_than_the_servers_gets_a_coded_error(
        root: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    served = start_http(root)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    try:
        published = discovery.find(at_file(root / "data" / "index.db"))
        assert published is not None and published.folder == str((root / "kb").resolve())
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [sys.executable, "-m", "pocketmcp"], input=b"", check=False, cwd=root,
                env=server_env(root, SHARE="on", WATCH_DIR=str(elsewhere)))
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]
    said = done.stderr.decode()
    assert done.returncode == 1, said[-2000:]
    assert "SETTINGS_MISMATCH: WATCH_DIR is " + str(elsewhere.resolve()) in said
    assert said.count("SETTINGS_MISMATCH") == 1, said[-2000:]  # the code said once
    assert f"was started with {(root / 'kb').resolve()}" in said


@pytest.mark.parametrize("profile", ["core", "all"])
async def test_a_first_editor_is_answered_before_its_server_runs_as_alone(
        root: Path, profile: str) -> None:
    """No server runs: the editor's `initialize` and `tools/list` are answered by its bridge
    while the shared server starts (from the manifest), the same as by a process serving
    alone; its first search is answered by the server started meanwhile."""
    args, env = (CORE, {"TOOLS": "core"}) if profile == "core" else ((), {})
    with anyio.fail_after(180):
        async with editor(root, "first", args, **SHARED, **env) as (session, init):
            listed = await session.list_tools()
            early = {"init": init.model_dump(mode="json", by_alias=True),
                     "tools": [t.model_dump(mode="json", by_alias=True) for t in listed.tools]}
            found = await call(session, "search", {"query": "green tea"})
            assert found["matches"][0]["path"] == "tea.md"
            server = discovery.find(at_file(root / "data" / "index.db"))
            assert server is not None
        async with editor(root, "alone", args, SHARE="off", **env) as (session, init):
            listed = await session.list_tools()
            alone = {"init": init.model_dump(mode="json", by_alias=True),
                     "tools": [t.model_dump(mode="json", by_alias=True) for t in listed.tools]}
    text = (root / "first.err").read_text()
    assert text.index('"server_starting"') < text.index('"bridging"'), text[-3000:]
    assert early == alone
