"""Bad numbers and library names get clear coded errors."""

from __future__ import annotations

import math

import pytest
from support.tools import Tools, refused_by_schema

from pocketmcp.errors import InvalidRequest
from pocketmcp.ops.checks import check_library, check_score
from pocketmcp.runtime import Runtime


@pytest.mark.parametrize("name", ["../../etc", "a/b", "a\\b", ".", "..", "..."])
def test_a_library_name_that_no_folder_could_have_is_refused(name: str) -> None:
    with pytest.raises(InvalidRequest, match="library"):
        check_library(name, "default")


def test_library_names_a_folder_could_have_are_kept() -> None:
    assert check_library("Meeting notes", "default") == "Meeting notes"
    assert check_library("v1.2", "default") == "v1.2"
    assert check_library(None, "default") == "default"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_score_threshold_must_be_finite(value: float) -> None:
    with pytest.raises(InvalidRequest, match="finite"):
        check_score(value)
    assert check_score(0.3) == 0.3 and check_score(None) is None


async def test_search_refuses_a_nan_threshold_and_goes_on(fake_service: Runtime) -> None:
    tools = Tools(fake_service)
    for bad in (math.nan, math.inf, 1e308, -0.5):  # the schema's range (0..1) refuses each
        with refused_by_schema("score_threshold"):
            await tools.search("anything", score_threshold=bad)
    assert await tools.search("anything", score_threshold=0.0) == []
