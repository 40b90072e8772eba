"""Every pattern and filter a request carries costs bounded work and, when it cannot be
served, a coded error that says what to change: on the SQLite and the Postgres store."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pathspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.cli import run_cli
from support.runtime import fake, make_config, running
from support.tools import Tools, refused

from pocketmcp.errors import InvalidPattern, InvalidRequest, LimitExceeded

# -- globs: the same answers as before, in linear time ----------------------------------------

_PIECES = st.sampled_from(["a", "b", "/", "*", "**", "?", "[ab]", "[a-b]", ".", "\\*", "md"])
_PATTERNS = st.lists(_PIECES, min_size=1, max_size=8).map("".join)
_PATHS = st.lists(st.sampled_from(["a", "b", "a.b", "ab", ".a", "b.md", "a*"]),
                  min_size=1, max_size=4).map("/".join)


def _refused_as_documented(pattern: str) -> bool:
    """The patterns refused with a message (docs/reliability.md): a lone trailing backslash,
    an empty name (`a//b`, `/`), or nothing but `**` (which names nothing)."""
    if re.search(r"(?<!\\)(\\\\)*\\$", pattern):
        return True
    names = pattern.split("/")
    names = names[1:] if names[:1] == [""] else names  # a leading / anchors
    names = names[:-1] if names[-1:] == [""] else names  # a trailing / means a folder
    return not names or "" in names or all(name == "**" for name in names)


# A few hundred examples a run, new ones each run: within the one-second rule.
@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@example("a/**/", "a/a").via("git: a folder's pattern does not match a file")
@given(_PATTERNS, _PATHS)
def test_globs_match_as_gitignore_patterns_do(pattern: str, path: str) -> None:
    """The linear matcher agrees with the gitignore reader it replaces (pathspec), on every
    pattern but the documented refusals, which it refuses with a message."""
    from pocketmcp.core.globs import Glob, GlobError

    try:
        glob = Glob(pattern)
    except GlobError:
        assert _refused_as_documented(pattern), pattern
        return
    if pattern.endswith("/"):
        # A folder's pattern `X/` leaves out what is inside a folder that `X` matches, as
        # git does (`git status --ignored`): pathspec also lets `a/**/` match the file `a/a`.
        spec = pathspec.PathSpec.from_lines("gitignore", [pattern[:-1]])
        names = path.split("/")
        expected = any(spec.match_file("/".join(names[:n])) for n in range(1, len(names)))
    else:
        expected = pathspec.PathSpec.from_lines("gitignore", [pattern]).match_file(path)
    assert glob.match(path) == expected, (pattern, path)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 60), st.integers(10, 4000))
def test_any_pile_of_stars_matches_in_linear_time(stars: int, length: int) -> None:
    from pocketmcp.core.globs import Glob

    glob = Glob("*a" * stars + "b")
    started = time.perf_counter()
    assert not glob.match("a" * length)
    assert time.perf_counter() - started < 0.5


# -- through the tools, on both stores --------------------------------------------------------

BAD_FILTERS: list[tuple[dict[str, Any], type[InvalidRequest], str]] = [
    ({"path_glob": "\\"}, InvalidPattern, "lone backslash"),
    ({"path_glob": "a" * 1001}, InvalidPattern, "at most 1000"),
    ({"path_glob": "a//b"}, InvalidPattern, "empty name"),
    ({"modified_after": "3000y"}, InvalidRequest, "before the year 1"),
    ({"created_before": "999999y"}, InvalidRequest, "before the year 1"),
    ({"metadata": {"n": 2**70}}, InvalidRequest, "beyond the 64-bit integers"),
    ({"metadata": {"n": [1, -(2**63) - 1]}}, InvalidRequest, "beyond the 64-bit integers"),
    ({"metadata": {f"k{i}": i for i in range(10_000)}}, LimitExceeded, "at most 64"),
    ({"metadata": {"k" * 300: 1}}, LimitExceeded, "at most 200"),
    ({"metadata": {"k": "v" * 3000}}, LimitExceeded, "at most 2000"),
]


async def test_bad_filters_answer_coded_errors_on_both_stores(
        tmp_path: Path, store_env: dict[str, str]) -> None:
    config = make_config(tmp_path, store_env)
    async with running(config, embedding=fake(config)) as rt:
        tools = Tools(rt)
        await tools.add(("a", "Sourdough bread with a wild yeast starter."))
        for flt, error, message in BAD_FILTERS:
            with refused(error, match=message):
                await tools.search("bread", filter=flt)
            with refused(error, match=message):
                await tools("list_documents", filter=flt)
        # and a good filter on each still answers
        assert await tools.search("bread", filter={"metadata": {"n": 2**63 - 1},
                                                   "path_glob": "*"}) == []
        assert len(await tools.search("bread", filter={"path_glob": "a"},
                                      score_threshold=0)) == 1


@pytest.mark.timeout(90)
async def test_a_pathological_path_glob_answers_at_once(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)) as rt:
        tools = Tools(rt)
        await tools.add(*[("a" * 200 + f"-{i}", f"Note {i} about bread.") for i in range(50)])
        started = time.perf_counter()
        found = await tools.search("bread", filter={"path_glob": "*a" * 12 + "b"})
        took = time.perf_counter() - started
        assert found == [] and took < 5, took


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("processes")
def test_a_hostile_gitignore_neither_hangs_nor_stops_indexing(tmp_path: Path) -> None:
    """A .gitignore in the folder with a pile of stars and an unreadable line: the bad line
    is left out, the rest applies, and every name is matched at once."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / ".gitignore").write_text("*a" * 14 + "b\n\\\nsecret/\n")
    (kb / ("a" * 200 + ".md")).write_text("# Long\n\nA note with a long name about bread.\n")
    (kb / "secret").mkdir()
    (kb / "secret" / "x.md").write_text("# Secret\n\nNot indexed.\n")
    started = time.perf_counter()
    done = run_cli(tmp_path, "index", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["added"] == 1
    assert time.perf_counter() - started < 60
