"""The TOOLS setting: which tools the server offers."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp.errors import ConfigError
from pocketmcp.mcp.settings import TOOL_NAMES


@pytest.mark.parametrize("tools_setting", ["core", "search,status,core"])
async def test_the_tools_setting_offers_only_the_named_tools(
    tmp_path: Path, tools_setting: str
) -> None:
    config = make_config(tmp_path, tools=tools_setting)
    async with running(config, embedding=fake(config)) as rt:
        names = [t.name for t in await Tools(rt).list_tools()]
    assert sorted(names) == sorted(["search", "get_document", "list_documents", "list_libraries",
                                   "status"])


async def test_all_tools_are_offered_by_default(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)) as rt:
        names = {t.name for t in await Tools(rt).list_tools()}
    assert names == set(TOOL_NAMES) and len(names) == 15


def test_an_unknown_tool_name_is_a_clear_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"TOOLS.*search, get_document"):
        make_config(tmp_path, tools="search,serch")
