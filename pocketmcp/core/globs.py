"""Gitignore-style globs matched in time linear in the path, whatever the pattern. Pure.

A glob is compiled to a small automaton that is run on all its states at once (each state a
bit of an integer), so a pattern of many `*a` parts against a long path costs
O(len(path) x len(pattern) / word size) and never backtracks; Python's regular expressions,
which backtrack, never see user input here. The sets of states met are numbered as they are
first reached and each (set, character) step is remembered (a lazy DFA, at most MAX_STATES
sets per glob, forgotten all at once past that), so a path costs a dictionary look-up per
character. The common shapes (`*.md`, `**/*.md`, `name`, `name/`, `.*`, `a/b`, `docs/**`)
skip the automaton: they are string tests on the whole path.

Syntax, as in .gitignore: `*` any run of characters but `/`, `?` one such character,
`[abc]`, `[a-z]`, `[!a]` (or `[^a]`) a class, `\\x` the character x, `**` as a whole segment
any number of folders (`**/x`, `a/**/b`, `a/**`). A pattern without a `/` but at its end
matches a name at any depth; with one, it is anchored at the top (a leading `/` only
anchors). A pattern ending in `/` matches folders only. A pattern matching a folder matches
everything inside it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

MAX_GLOB = 1_000  # characters of one pattern
MAX_STATES = 2_048  # sets of automaton states one glob remembers
MAX_STEPS = 65_536  # (set, character) steps one glob remembers
_SPECIAL = frozenset("*?[\\")


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
        any_depth = not anchored or segments[0] == "**"
        if any_depth:
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
        self._fast = _shortcut(segments, any_depth=any_depth, trailing=trailing,
                               dir_only=self.dir_only)

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
        self._lock = threading.Lock()
        self._tables = _Tables(self._start, self._accept)

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
            if len(self._masks) < MAX_STATES:
                self._masks[c] = (advance, stay)
            found = (advance, stay)
        return found

    def _step(self, tables: _Tables, sid: int, c: str) -> tuple[_Tables, int]:
        """The set after `c` from set `sid` of `tables`, numbered (-1: no state left), and
        the tables it is numbered in (new ones when the old were full)."""
        bits = tables.bits[sid]
        advance, stay = self._mask(c)
        after = self._closure(((bits & advance) << 1) | (bits & stay))
        with self._lock:
            current = self._tables
            if current.steps >= MAX_STEPS or len(current.bits) >= MAX_STATES:
                current = self._tables = _Tables(self._start, self._accept)
            nid = current.number(after, self._accept)
            if current is tables:
                tables.rows[sid][c] = nid
                tables.steps += 1
        return current, nid

    # -- matching ---------------------------------------------------------------------------

    def match(self, path: str) -> bool:
        """Whether `path` (POSIX, relative) or one of the folders it lies in matches."""
        if self._fast is not None:
            return self._fast(path)
        tables = self._tables
        rows, accepts = tables.rows, tables.accepts
        sid = 0
        whole = self.whole
        last = len(path) - 1
        for at, c in enumerate(path):
            if c == "/" and accepts[sid] and (not whole or at == last):
                return True  # a folder above the path matches
            nid = rows[sid].get(c, -2)
            if nid < 0:
                if nid == -1:
                    return False
                tables, nid = self._step(tables, sid, c)
                if nid == -1:
                    return False
                rows, accepts = tables.rows, tables.accepts
            sid = nid
        return accepts[sid] and not self.dir_only


class _Tables:
    """The sets of states met so far, numbered from 0 (the start): each one's bits, whether
    it accepts, and its steps (character -> number, -1 for the empty set)."""

    def __init__(self, start: int, accept: int) -> None:
        self.ids: dict[int, int] = {}
        self.bits: list[int] = []
        self.accepts: list[bool] = []
        self.rows: list[dict[str, int]] = []
        self.steps = 0
        self.number(start, accept)

    def number(self, bits: int, accept: int) -> int:
        if not bits:
            return -1
        found = self.ids.get(bits)
        if found is None:
            found = self.ids[bits] = len(self.bits)
            self.bits.append(bits)
            self.accepts.append(bool(bits & accept))
            self.rows.append({})
        return found


def _literal(text: str) -> bool:
    return bool(text) and not _SPECIAL.intersection(text)


def _shortcut(segments: list[str], *, any_depth: bool, trailing: bool,
              dir_only: bool) -> Callable[[str], bool] | None:
    """A string test equal to the automaton for the common shapes; None for the others."""
    if not any_depth and all(_literal(s) for s in segments):
        lit = "/".join(segments)
        below = lit + "/"
        if trailing:
            if dir_only:
                return None
            return lambda path: path.startswith(below) and len(path) > len(below)
        if dir_only:
            return lambda path: path.startswith(below)
        return lambda path: path == lit or path.startswith(below)
    if not any_depth or trailing or len(segments) != 1:
        return None
    segment = segments[0]
    core = segment.strip("*")
    if not _literal(core):
        return None
    lead, tail = segment.startswith("*"), segment.endswith("*")
    if dir_only:
        return _named_folder(core, lead, tail)
    if lead and tail:  # *x*: x in some name
        return lambda path: core in path
    if lead:  # *x: some name ends with x
        ends = core + "/"
        return lambda path: path.endswith(core) or ends in path
    if tail:  # x*: some name starts with x
        starts = "/" + core
        return lambda path: path.startswith(core) or starts in path
    first, inner, end = core + "/", "/" + core + "/", "/" + core  # x: some name is x
    return lambda path: (path == core or path.startswith(first) or inner in path
                         or path.endswith(end))


def _named_folder(core: str, lead: bool, tail: bool) -> Callable[[str], bool]:
    """Some folder (a name followed by `/`) is `core`, ends with it, starts with it or holds
    it, as `lead` and `tail` say."""
    closed = core + "/"
    if not tail:
        if lead:  # *x/
            return lambda path: closed in path
        inner = "/" + closed  # x/
        return lambda path: path.startswith(closed) or inner in path

    def test(path: str) -> bool:
        if core not in path:
            return False
        names = path.split("/")[:-1]
        if lead:
            return any(core in name for name in names)
        return any(name.startswith(core) for name in names)

    return test


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

    def then(self, later: GlobSet) -> GlobSet:
        """These patterns followed by `later`'s (which win where both match)."""
        joined = GlobSet(())
        joined._globs = [*self._globs, *later._globs]
        joined.skipped = [*self.skipped, *later.skipped]
        return joined

    def match(self, path: str) -> bool:
        for glob, negate in reversed(self._globs):
            if glob.match(path):
                return not negate
        return False
