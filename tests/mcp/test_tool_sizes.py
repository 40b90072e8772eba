"""The tool definitions a client lists: small enough for a model's context on every turn,
self-contained (no `$ref`), still checking what they checked, still describing the results
they return; and docs/tools.md made from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from support.runtime import fake, make_config, running
from support.tools import Tools, refused_by_schema

from pocketmcp.core.argdoc import DOC
from pocketmcp.mcp import reference
from pocketmcp.mcp.server import build_server

ROOT = Path(__file__).resolve().parents[2]


async def listed(tmp_path: Path, tools: str) -> reference.Listed:
    """The tools of a server with TOOLS=`tools`, as its client lists them."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = make_config(tmp_path, tools=tools)
    async with running(config, embedding=fake(config)) as rt:
        return reference.wire(await Tools(rt).list_tools())


@pytest.mark.parametrize("tools", ["all", "core"])
async def test_the_tool_list_fits_its_limits(tmp_path: Path, tools: str) -> None:
    size = reference.sizes(await listed(tmp_path, tools))
    for part, limit in reference.LIMITS[tools].items():
        assert size[part] <= limit, (tools, part, size)


async def test_every_schema_is_self_contained_and_valid(tmp_path: Path) -> None:
    for tool in await listed(tmp_path, "all"):
        text = json.dumps(tool)
        assert "$ref" not in text and "$defs" not in text, tool["name"]
        assert DOC not in text, tool["name"]  # what only the docs say
        for key in ("inputSchema", "outputSchema"):
            Draft202012Validator.check_schema(tool[key])
            assert tool[key]["type"] == "object"
        assert "\n" not in tool["description"], tool["name"]


async def test_what_the_published_schema_leaves_out_is_still_checked(fake_tools: Tools
                                                                      ) -> None:
    tools = fake_tools
    search = next(t for t in await tools.list_tools() if t.name == "search")
    assert "maxLength" not in search.input_schema["properties"]["query"]
    with refused_by_schema("query"):
        await tools("search", query="x" * 4001)
    with refused_by_schema("doc_id"):
        await tools("get_document", doc_id=2**63)
    # A client may still send null for an optional argument the schema gives one type.
    assert await tools("search", query="birds", library=None, filter=None) == {
        "matches": [], "notice": None}


async def test_results_with_nulls_fit_the_published_output_schemas(fake_tools: Tools) -> None:
    """The client validates each structured result against the tool's output schema (a
    mismatch raises); these results hold the null fields a given text has."""
    tools = fake_tools
    ids = await tools.add(("n1", "Storks migrate to Africa in autumn."),
                          ("n2", "See [[Storks]] for the birds."))
    match = (await tools.search("storks migrate", score_threshold=0))[0]
    assert match["path"] is None and match["stale"] is None
    document = await tools("get_document", doc_id=ids["n1"])
    assert document["path"] is None and document["uri"] is None
    assert (await tools("list_documents", filter={"tags": ["none"]}))["documents"] == []
    assert (await tools("links", doc_id=ids["n2"]))["outgoing"][0]["target"] == "Storks"
    assert (await tools("find_similar_documents", text="storks"))["results"]
    status = await tools("status")
    assert status["documents"] == 2 and status["last_error"] is None


async def test_a_tool_removed_or_added_after_a_listing_is_listed_so(fake_service: Any
                                                                    ) -> None:
    server = build_server(fake_service)
    tools = Tools(fake_service, server)
    assert "links" in {t.name for t in await tools.list_tools()}
    server.remove_tool("links")
    assert "links" not in {t.name for t in await tools.list_tools()}

    async def echo(text: str) -> str:
        """Says it back."""
        return text

    server.add_tool(echo, name="echo")
    echoed = next(t for t in await tools.list_tools() if t.name == "echo")
    assert echoed.description == "Says it back." and "title" not in echoed.input_schema[
        "properties"]["text"]


async def test_docs_tools_md_is_what_the_definitions_say(tmp_path: Path) -> None:
    """Fails when a tool's definition changed and the page was not made again: run
    `.venv/bin/python scripts/gen_docs.py`."""
    listings = {name: await listed(tmp_path / name, name) for name in ("all", "core")}
    (tmp_path / "sdk").mkdir()
    config = make_config(tmp_path / "sdk")
    async with running(config, embedding=fake(config)) as rt:
        sdk = reference.wire(await build_server(rt).sdk_tools())
    page = reference.tools_page(listings, sdk)
    assert (ROOT / "docs" / "tools.md").read_text() == page, "run scripts/gen_docs.py"
    for tool in listings["all"]:
        assert f"## {tool['name']}\n" in page
    assert "0.3 keeps close matches only" in page  # what only the docs say of an argument
    assert "| `filter` | object |  | As search's. |" in page  # said once, in search's


async def test_a_shared_argument_points_to_search_only_when_search_is_listed(
        tmp_path: Path) -> None:
    def filter_of(tools: reference.Listed) -> dict[str, Any]:
        listing = next(t for t in tools if t["name"] == "list_documents")
        spelled: dict[str, Any] = listing["inputSchema"]["properties"]["filter"]
        return spelled

    assert filter_of(await listed(tmp_path / "a", "all")) == {
        "type": "object", "description": "As search's."}
    alone = filter_of(await listed(tmp_path / "b", "list_documents"))
    assert {"tags", "modified_after", "metadata"} <= set(alone["properties"])


def test_unions_and_nested_models_are_published_whole_and_still_validate() -> None:
    """What no tool has today but a new field may bring: a nested model used twice, a
    union of several types with null."""
    from pydantic import BaseModel, Field

    from pocketmcp.mcp import schemas

    class Span(BaseModel):
        start: int = Field(description="First\n        offset.")
        end: int | None = None

    class Args(BaseModel):
        first: Span
        others: list[Span] = Field(default_factory=list)
        key: int | str | None = None

    inputs = schemas.input_schema(Args.model_json_schema())
    outputs = schemas.output_schema(Args.model_json_schema())
    assert outputs is not None
    assert "$ref" not in json.dumps(inputs) + json.dumps(outputs)
    assert inputs["properties"]["first"]["properties"]["start"]["description"] == (
        "First offset.")
    assert inputs["properties"]["key"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert inputs["required"] == ["first"]
    value = Args(first=Span(start=1), others=[Span(start=2, end=3)]).model_dump(mode="json")
    Draft202012Validator(outputs).validate(value)  # `end` and `key` are null
    assert outputs["properties"]["key"]["anyOf"][-1] == {"type": "null"}
    assert outputs["properties"]["first"]["properties"]["end"]["type"] == ["integer", "null"]
