"""The real server over stdio with a remote provider that fails and recovers: it stays up,
searches say they fell back to keywords, and the API key never reaches its logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.cli import fields
from support.mcp_harness import call, mcp_session, until
from support.processes import provider_settings
from support.provider_server import Fault, ProviderServer

SECRET = "sk-test-0123456789abcdef"


@pytest.mark.usefixtures("processes")
async def test_the_server_outlives_a_failing_provider_and_never_logs_the_key(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "owls.md").write_text("# Owls\n\nOwls hunt at night in the forest.", encoding="utf-8")
    env = {**provider_settings(provider.url), "OPENAI_API_KEY": SECRET, "LOG_LEVEL": "debug",
           **fields(embed={"timeout_s": 1, "retries": 1, "retry_base_s": 0.01})}
    async with mcp_session(tmp_path, **env) as session:
        async def status() -> dict[str, Any]:
            return await call(session, "status")

        await until(status, lambda s: s["documents"] == 1)
        assert provider.requests()[0].headers["Authorization"] == f"Bearer {SECRET}"
        provider.always = Fault(500)
        found = await call(session, "search", {"query": "owls in the forest"})
        assert "only keyword results" in found["notice"] and "500" in found["notice"]
        assert found["matches"][0]["path"] == "owls.md"
        embedding = (await status())["embedding"]
        assert embedding["failures"] >= 1 and "500" in embedding["last_error"]
        provider.always = None
        back = await until(lambda: call(session, "search", {"query": "owls in the forest"}),
                           lambda r: r["notice"] is None)
        assert back["matches"][0]["vector_score"] is not None
        assert (await status())["embedding"]["available"]
    logged = (tmp_path / "server.err").read_text(encoding="utf-8")
    assert "embedding_failed" in logged  # the logs are there, and hold no key
    assert SECRET not in logged
