"""Gitignore-style globs matched in time linear in the path, whatever the pattern. Pure.

A glob is compiled to a small automaton that is run on all its states at once (each state a
bit of an integer), so a pattern of many `*a` parts against a long path costs
O(len(path) x len(pattern) / word size) and never backtracks; Python's regular expressions,
which backtrack, never see user input here.

Syntax, as in .gitignore: `*` any run of characters but `/`, `?` one such character,
`[abc]`, `[a-z]`, `[!a]` (or `[^a]`) a class, `\\x` the character x, `**` as a whole segment
any number of folders (`**/x`, `a/**/b`, `a/**`). A pattern without a `/` but at its end
matches a name at any depth; with one, it is anchored at the top (a leading `/` only
anchors). A pattern ending in `/` matches folders only. A pattern matching a folder matches
everything inside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

MAX_GLOB = 1_000  # characters of one pattern


class GlobError(ValueError):
    """A pattern that cannot be read (what is wrong is the message)."""


Pred = Callable[[str], bool]

_ONE, _MANY, _OPT, _DIRS = range(4)


def _not_slash(c: str) -> bool:
    return c != "/"


def _is(literal: str) -> Pred:
    return lambda ch: ch == literal


def _class(pattern: str, at: int) -> tuple[Pred, int] | None:
    """The class starting at pattern[at] == '[' and where it ends; None when unclosed."""
    i = at + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    if negate:
        i += 1
    items: list[tuple[str, str]] = []
    first = True
    while i < len(pattern) and (pattern[i] != "]" or first):
        first = False
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            i += 1
            c = pattern[i]
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            high = pattern[i + 2]
            items.append((c, high))
            i += 3
        else:
            items.append((c, c))
            i += 1
    if i >= len(pattern):
        return None

    def pred(ch: str) -> bool:
        if ch == "/":
            return False
        inside = any(low <= ch <= high for low, high in items)
        return inside != negate

    return pred, i + 1


class Glob:
    """One compiled pattern."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_GLOB:
            raise GlobError(f"the pattern is {len(pattern)} characters long; at most {MAX_GLOB}")
        if "\x00" in pattern:
            raise GlobError("the pattern holds a NUL character")
        self.pattern = pattern
        self.dir_only = pattern.endswith("/") and not pattern.endswith("\\/")
        body = pattern[:-1] if self.dir_only else pattern
        anchored = "/" in body.rstrip("/")
        body = body[1:] if anchored and body.startswith("/") else body
        segments = body.split("/")
        self._nodes: list[tuple[int, Pred | None]] = []
        if not anchored or segments[0] == "**":
            self._dirs()
        while segments and segments[0] == "**":
            segments.pop(0)
        trailing = bool(segments) and segments[-1] == "**" and len(segments) > 1
        while len(segments) > 1 and segments[-1] == "**":
            segments.pop()
        if not segments or "" in segments:
            raise GlobError("the pattern names nothing, or holds an empty name (//)")
        # A last segment of `*` alone matches one name, not what lies below it (`foo/*`
        # matches foo/a.md, not foo/bar/a.md).
        self.whole = segments[-1] == "*" and not trailing and not self.dir_only
        previous_dirs = False
        for n, segment in enumerate(segments):
            if segment == "**":
                if not previous_dirs:
                    self._one(_is("/"))
                    self._dirs()
                previous_dirs = True
                continue
            if n and not previous_dirs:
                self._one(_is("/"))
            previous_dirs = False
            if segment == "*":
                self._one(_not_slash)  # a whole segment is one name: not empty
            self._segment(segment)
        if trailing:
            self._one(_is("/"))
            self._one(lambda c: True)
            self._nodes.append((_MANY, lambda c: True))
        self._build()

    # -- compiling --------------------------------------------------------------------------

    def _one(self, pred: Pred) -> None:
        self._nodes.append((_ONE, pred))

    def _dirs(self) -> None:
        """`(?:.*/)?`: nothing, or any characters ending with a `/`."""
        self._nodes.append((_OPT, None))
        self._nodes.append((_DIRS, None))

    def _segment(self, segment: str) -> None:
        i = 0
        while i < len(segment):
            c = segment[i]
            if c == "*":
                while i < len(segment) and segment[i] == "*":
                    i += 1
                self._nodes.append((_MANY, _not_slash))
                continue
            if c == "?":
                self._one(_not_slash)
            elif c == "[" and (found := _class(segment, i)) is not None:
                pred, i = found
                self._one(pred)
                continue
            elif c == "\\":
                if i + 1 >= len(segment):
                    raise GlobError("the pattern ends with a lone backslash: write \\\\ for a "
                                    "backslash, or leave it out")
                i += 1
                self._one(_is(segment[i]))
            else:
                self._one(_is(c))
            i += 1

    def _build(self) -> None:
        self._size = len(self._nodes)
        self._accept = 1 << self._size
        self._eps1 = self._eps2 = 0
        for i, (kind, _) in enumerate(self._nodes):
            if kind == _MANY:
                self._eps1 |= 1 << i
            elif kind == _OPT:
                self._eps1 |= 1 << i
                self._eps2 |= 1 << i
        self._masks: dict[str, tuple[int, int]] = {}
        self._start = self._closure(1)

    def _closure(self, state: int) -> int:
        while True:
            grown = state | ((state & self._eps1) << 1) | ((state & self._eps2) << 2)
            if grown == state:
                return state
            state = grown

    def _mask(self, c: str) -> tuple[int, int]:
        """(states that consume `c` and move on, states that consume it and stay)."""
        found = self._masks.get(c)
        if found is None:
            advance = stay = 0
            for i, (kind, pred) in enumerate(self._nodes):
                if kind == _ONE and pred is not None and pred(c):
                    advance |= 1 << i
                elif kind == _MANY and pred is not None and pred(c):
                    stay |= 1 << i
                elif kind == _DIRS:
                    stay |= 1 << i
                    if c == "/":
                        advance |= 1 << i
            found = self._masks[c] = (advance, stay)
        return found

    # -- matching ---------------------------------------------------------------------------

    def match(self, path: str) -> bool:
        """Whether `path` (POSIX, relative) or one of the folders it lies in matches."""
        state = self._start
        accept = self._accept
        for at, c in enumerate(path):
            if c == "/" and state & accept and (not self.whole or at == len(path) - 1):
                return True  # a folder above the path matches
            advance, stay = self._mask(c)
            state = self._closure(((state & advance) << 1) | (state & stay))
            if not state:
                return False
        return bool(state & accept) and not self.dir_only


class GlobSet:
    """Patterns as in a .gitignore file: blank lines and `#` comments skipped, `!` negates,
    the last pattern that matches decides."""

    def __init__(self, lines: Iterable[str], *, skip_bad: bool = False) -> None:
        """GlobError for a line that cannot be read, unless `skip_bad`: then it is left out
        and listed in `skipped` as (line, why)."""
        self._globs: list[tuple[Glob, bool]] = []
        self.skipped: list[tuple[str, str]] = []
        for raw in lines:
            line = raw.rstrip("\n")
            if line.endswith(" ") and not line.endswith("\\ "):
                line = line.rstrip(" ")
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate or line.startswith("\\!") or line.startswith("\\#"):
                line = line[1:]
            if not line:
                continue
            try:
                self._globs.append((Glob(line), negate))
            except GlobError as exc:
                if not skip_bad:
                    raise GlobError(f"{line[:80]!r}: {exc}") from None
                self.skipped.append((line[:80], str(exc)))

    def match(self, path: str) -> bool:
        for glob, negate in reversed(self._globs):
            if glob.match(path):
                return not negate
        return False
