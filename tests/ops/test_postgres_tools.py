"""The tools over a Postgres index: what a client does on SQLite works the same (a real
server, the fake embedder, the tools called as a client calls them)."""

from __future__ import annotations

from pathlib import Path

import anyio
from support.mcp_harness import until
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp.config import Config
from pocketmcp.plans import serving


def pg_config(tmp_path: Path, url: str, schema: str) -> Config:
    return make_config(tmp_path, {"STORE": "postgres", "DATABASE_URL": url,
                                  "PG_SCHEMA": schema})


async def test_a_folder_is_indexed_searched_read_and_deleted_on_postgres(
        tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    config = pg_config(tmp_path, pg_url, pg_schema)
    (config.watched.root / "dns.md").write_text(
        "# DNS outage\n\nThe resolver cache expired and every lookup failed. We fixed it by "
        "pinning the upstream servers.\n", encoding="utf-8")
    (config.watched.root / "garden.md").write_text(
        "# Garden\n\nTomatoes need sun, water and patience.\n", encoding="utf-8")
    async with running(config, serving(True), embedding=fake(config)) as rt:
        assert rt.pipeline is not None
        with anyio.fail_after(60):
            await rt.pipeline.scan_done.wait()
        tools = Tools(rt)
        # keywords come first: vector mode waits for the vectors
        await until(lambda: tools("status"), lambda s: s["chunks_waiting"] == 0, 60)
        for mode in ("hybrid", "vector", "keyword"):
            matches = await tools.search("how did we fix the DNS outage", mode=mode)
            assert matches and matches[0]["path"] == "dns.md", mode
            assert 0 < matches[0]["score"] <= 1
        top = (await tools.search("tomatoes", mode="keyword"))[0]
        assert top["path"] == "garden.md" and top["keyword_score"] > 0
        doc = await tools("get_document", doc_id=top["doc_id"])
        assert "Tomatoes need sun" in doc["text"]
        listed = await tools("list_documents")
        assert sorted(d["path"] for d in listed["documents"]) == ["dns.md", "garden.md"]
        added = await tools.add(("note-1", "Quarterly planning for the robotics club."))
        assert (await tools.search("robotics club", top_k=1))[0]["doc_id"] == added["note-1"]
        status = await tools("status")
        assert status["documents"] == 3 and pg_schema in status["index_path"]
        gone = await tools("delete_documents", doc_ids=[top["doc_id"]])
        assert gone["deleted_doc_ids"] == [top["doc_id"]]
        assert (await tools("list_libraries"))["libraries"][0]["documents"] == 2
        linked = await tools("links", doc_id=added["note-1"])
        assert (linked["outgoing"], linked["incoming"]) == ([], [])
        team = await tools("create_database", db_name="team")
        assert team["created"] and team["db_path"] == f"postgres schema {pg_schema}_db_team"
