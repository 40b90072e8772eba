"""The matcher's shortcuts and its remembered steps give the automaton's answers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmcp.core import globs
from pocketmcp.core.globs import Glob, GlobError

_PIECES = st.sampled_from(["a", "b", "/", "*", "**", "?", "[ab]", ".", "md", "\\*", "~"])
_PATTERNS = st.lists(_PIECES, min_size=1, max_size=8).map("".join)
_NAMES = st.sampled_from(["a", "b", "a.md", "ab", ".a", "b.md", "a*", "md", "~", "x~", ""])
_PATHS = st.lists(_NAMES, min_size=1, max_size=5).map("/".join)


def _automaton(pattern: str) -> Glob:
    glob = Glob(pattern)
    glob._fast = None
    return glob


# A few hundred examples a run, new ones each run: within the one-second rule.
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_PATTERNS, st.lists(_PATHS, min_size=1, max_size=6))
def test_the_shortcuts_answer_as_the_automaton(pattern: str, paths: list[str]) -> None:
    try:
        fast, slow = Glob(pattern), _automaton(pattern)
    except GlobError:
        return
    for path in paths:
        for asked in (path, path + "/"):  # a folder, as PathFilter.wants_dir asks
            assert fast.match(asked) == slow.match(asked), (pattern, asked)


@pytest.mark.parametrize("pattern", ["*.md", "**/*.md", "node_modules/", ".*", "*~", "4913",
                                     "~$*", "docs/**", "a/b.md", "/build/", "*draft*"])
def test_the_common_shapes_skip_the_automaton(pattern: str) -> None:
    assert Glob(pattern)._fast is not None


def test_past_the_bound_the_steps_are_forgotten_and_answers_stay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(globs, "MAX_STATES", 3)
    monkeypatch.setattr(globs, "MAX_STEPS", 5)
    pattern = "a*b*c*d?e"
    paths = ["aXbXcXdYe", "abcdxe", "abcde", "a/b/c/d/e", "zz/aabbccddxe", "abdce"]
    bounded = [Glob(pattern).match(p) for p in paths * 3]
    assert bounded == [p in {"aXbXcXdYe", "abcdxe", "zz/aabbccddxe"} for p in paths * 3]
    glob = Glob(pattern)
    for path in paths * 3:
        glob.match(path)
    assert len(glob._tables.bits) <= 3 and glob._tables.steps <= 5


def test_a_folder_filter_compiles_each_pattern_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from pocketmcp.core.paths import ALWAYS_IGNORED, PathFilter
    from pocketmcp.errors import ConfigError

    compiled: list[str] = []
    real = globs.Glob.__init__

    def counted(self: Glob, pattern: str) -> None:
        compiled.append(pattern)
        real(self, pattern)

    monkeypatch.setattr(globs.Glob, "__init__", counted)
    paths = PathFilter(["**/*.md", "**/*.txt"], ignore=["drafts/", "!drafts/keep.md"],
                       gitignore=["build/"])
    assert sorted(compiled) == sorted([*ALWAYS_IGNORED, "**/*.md", "**/*.txt", "build/",
                                       "drafts/", "drafts/keep.md"])
    assert paths.wants_file("drafts/keep.md") and not paths.wants_file("drafts/a.md")
    with pytest.raises(ConfigError, match="IGNORE_PATTERNS"):
        PathFilter(["**/*.md"], ignore=["a//b"])
