"""The official MCP Inspector (CLI mode) against the real server. scripts/setup.sh installs
it (node and npm with apt when they are missing, the inspector from npm into .cache/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.mcp_harness import start_http, stop_http
from support.processes import embedding_env

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".cache" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture(scope="module")
def inspector() -> Path:
    if not BIN.exists():  # skipped with the reason (under CI=true: failed)
        pytest.skip(f"the MCP Inspector is not installed ({BIN}): scripts/setup.sh "
                    "installs it, with node and npm")
    return BIN


def _cli(inspector: Path, tmp_path: Path, *method: str) -> dict:
    # The inspector gives the server only the variables named here (and PATH, HOME).
    embedding = [arg for key, value in embedding_env().items() for arg in ("-e", f"{key}={value}")]
    done = subprocess.run(
        [str(inspector), "--cli", *embedding, "-e", f"WATCH_DIR={tmp_path / 'kb'}",
         "-e", f"SQLITE_PATH={tmp_path / 'index.db'}", "-e", f"HOME={Path.home()}",
         # Its own server for each call, as the other tests run (tests/conftest.py): no
         # shared server left running after the test.
         "-e", "SHARE=off",
         sys.executable, "-m", "pocketmcp", *method],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.usefixtures("processes")
def test_the_inspector_lists_calls_and_reads(inspector: Path, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "herbs.md").write_text("# Herbs\n\nBasil wilts in the cold; keep it above 10 °C.\n")
    (kb / "bikes.md").write_text("# Bikes\n\nOil the chain after riding in the rain.\n")
    tools = _cli(inspector, tmp_path, "--method", "tools/list")
    assert {t["name"] for t in tools["tools"]} >= {"search", "status", "reindex"}
    # Each call below runs a server of its own that exits at once. `pocketmcp index` (which
    # returns once every chunk has its vector) fills the index first, so the search finds
    # the note by meaning (a chunk keeps its id when its vector comes: the link would hold
    # either way).
    indexed = subprocess.run(
        [sys.executable, "-m", "pocketmcp", "index", "--progress", "off"],
        env={**os.environ, "WATCH_DIR": str(kb), "SQLITE_PATH": str(tmp_path / "index.db")},
        capture_output=True, text=True, timeout=300)
    assert indexed.returncode == 0, indexed.stderr[-2000:]
    found = _cli(inspector, tmp_path, "--method", "tools/call", "--tool-name", "search",
                 "--tool-arg", "query=caring for basil", "--tool-arg", "top_k=2")
    top = found["structuredContent"]["matches"][0]
    assert top["path"] == "herbs.md"
    read = _cli(inspector, tmp_path, "--method", "resources/read", "--uri", top["resource"])
    chunk = json.loads(read["contents"][0]["text"])
    assert chunk["text"].startswith("# Herbs") and "Basil" in chunk["text"]
    templates = _cli(inspector, tmp_path, "--method", "resources/templates/list")
    assert {t["uriTemplate"] for t in templates["resourceTemplates"]} == {
        "mcp+doc://{doc_id}", "mcp+doc://{doc_id}#{chunk_id}"}


@pytest.mark.usefixtures("processes")
def test_the_inspector_calls_one_http_server_over_streamable_http_and_sse(
        inspector: Path, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "herbs.md").write_text("# Herbs\n\nBasil wilts in the cold; keep it above 10 °C.\n")
    (kb / "bikes.md").write_text("# Bikes\n\nOil the chain after riding in the rain.\n")
    served = start_http(tmp_path)
    (tmp_path / "home").mkdir()

    def cli(url: str, transport: str, token: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(inspector), "--cli", url, "--transport", transport, "--header",
             f"Authorization: Bearer {token}", "--stored-auth-only", "--method", "tools/call",
             "--tool-name", "search", "--tool-arg", "query=caring for basil",
             "--tool-arg", "top_k=2"],
            env={**os.environ, "HOME": str(tmp_path / "home")},  # the inspector's own state
            capture_output=True, text=True, timeout=120)

    try:
        for transport, path in (("http", "/mcp"), ("sse", "/sse")):
            done = cli(served.url + path, transport, served.token)
            assert done.returncode == 0, done.stderr[-2000:]
            assert json.loads(done.stdout)["structuredContent"]["matches"][0]["path"] == (
                "herbs.md")
            refused = cli(served.url + path, transport, "wrong")
            said = refused.stdout + refused.stderr
            assert refused.returncode != 0 and ("401" in said or "invalid_token" in said)
    finally:
        assert stop_http(served) == 0
