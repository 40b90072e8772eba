"""What a note says about itself: YAML front matter, tags, title, dates and links. Pure.

Front matter is the YAML block between `---` lines at the very start of a Markdown file. It
is read with PyYAML's safe loader (plain data only: nothing named in the YAML is ever
constructed or run), bounded in size and in nodes, and turned into JSON values (dates become
ISO strings, see core/dates.py). A block that does not parse is reported and the note is
indexed without it; its text is still the note's body. A field whose value does not parse as
its type (an impossible date such as `2024-04-31`, a time zone beyond a day, an integer
beyond 64 bits, a structure nested too deeply or with too many values) is left out on its
own, with a warning naming it (`Note.dropped`); the rest of the front matter is kept.

Tags are the front matter's `tags` (a list, or a string of words separated by commas or
spaces) and every inline `#tag` outside code. Links are wiki links (`[[Note]]`,
`[[folder/Note#Heading|shown text]]`, embeds `![[Note]]`) and Markdown links to relative
paths (`[text](../other.md)`); web links and images are not links between notes. Each link
has a key that names its target the way documents are named (`doc_keys`), so links can be
resolved when they are read, whichever note was indexed first.
"""

from __future__ import annotations

import datetime as dt
import math
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

import msgspec
import yaml

from pocketmcp.core import dates
from pocketmcp.core.paths import path_of
from pocketmcp.core.text import title_of
from pocketmcp.messages import DocFacts, Link

MAX_FRONT_MATTER = 65_536  # characters of YAML read at most
MAX_NODES = 5_000  # values in the front matter, anchors and aliases counted each time used
MAX_DEPTH = 20
MAX_TAGS = 200
MAX_LINKS = 2_000
# Files read as text whose content may be a note; converted formats are not.
TEXT_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".text", ".rst")

CREATED_KEYS = ("created", "date", "created_at", "creation_date", "date_created")
MODIFIED_KEYS = ("updated", "modified", "updated_at", "last_modified", "lastmod",
                 "date_modified")

_OPEN = re.compile(r"\A---[ \t]*\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$\n?", re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?(?:^ {0,3}\1[`~]*[ \t]*$|\Z)",
                    re.MULTILINE | re.DOTALL)
# Inline code spans may cross lines, not paragraphs.
# Repeats are bounded (a code span of at most 4,000 characters), so a line of a million
# backticks costs linear time, not quadratic.
_INLINE_CODE = re.compile(r"(`{1,32})(?!`)(?:(?!\n[ \t]{0,64}\n).){1,4000}?(?<!`)\1(?!`)",
                          re.DOTALL)
_TAG = re.compile(r"(?<!\S)#([\w/-]+)")
_WIKI = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
# A link's text and target hold no brackets, so no place in a text is scanned from more
# than one opening bracket.
_MARKDOWN = re.compile(r"(?<![!\\])\[[^\[\]\n]{0,1000}\]\(\s{0,64}<?([^()\[\]\s>]{1,2000})>?"
                       r"(?:\s{1,64}[\"'(][^()\[\]\n]{0,1000})?\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

INT_RANGE = (-(2**63), 2**63 - 1)  # integers a store keeps exactly

try:  # the C loader is several times faster; the pure-Python one is the same safe subset
    _Base: Any = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml
    _Base = yaml.SafeLoader


class _Bad:
    """A scalar that does not parse as the type YAML gives it; its field is dropped."""

    def __init__(self, text: str, why: str) -> None:
        self.text = text
        self.why = why


class _Loader(_Base):  # type: ignore[misc]
    """The safe loader, where a timestamp or integer that cannot be built becomes a _Bad
    value instead of an error that would drop the whole front matter."""


def _guarded(tag: str, kind: str) -> None:
    build = _Base.yaml_constructors[tag]

    def construct(loader: Any, node: Any) -> Any:
        try:
            value = build(loader, node)
        except (ValueError, OverflowError, TypeError) as exc:
            return _Bad(str(node.value), f"{str(node.value)[:60]!r} is not a valid {kind} "
                                         f"({exc})")
        if isinstance(value, int) and not isinstance(value, bool) and not (
                INT_RANGE[0] <= value <= INT_RANGE[1]):
            return _Bad(str(node.value), f"{str(node.value)[:60]!r} is beyond the 64-bit "
                                         "integers a field may hold")
        return value

    _Loader.add_constructor(tag, construct)


_guarded("tag:yaml.org,2002:timestamp", "date")
_guarded("tag:yaml.org,2002:int", "integer")
_guarded("tag:yaml.org,2002:float", "number")


class Note(msgspec.Struct, frozen=True):
    facts: DocFacts
    title: str | None  # the front matter's title, else the first heading of the body
    problem: str | None = None  # why the front matter was left out, when it was
    dropped: tuple[tuple[str, str], ...] = ()  # (field, why) of each field left out


class _TooComplex(Exception):
    pass


class _Dropped(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


def split_front_matter(text: str) -> tuple[str | None, int]:
    """(the YAML between the opening and closing `---`, where the body starts); (None, 0)
    when the text does not start with a front matter block."""
    opening = _OPEN.match(text)
    if not opening:
        return None, 0
    closing = _CLOSE.search(text, opening.end(), opening.end() + MAX_FRONT_MATTER + 8)
    if not closing:
        return None, 0
    return text[opening.end():closing.start()], closing.end()


def parse_front_matter(block: str) -> tuple[dict[str, Any], str | None]:
    """(the front matter as JSON values, None), or ({}, why it cannot be used). Fields
    whose values do not parse are left out silently here; `read_fields` names them."""
    fields, problem, _ = read_fields(block)
    return fields, problem


def read_fields(block: str) -> tuple[dict[str, Any], str | None, list[tuple[str, str]]]:
    """(the front matter as JSON values, why it cannot be used at all or None, (field, why)
    of each field left out because its value does not parse as its type)."""
    if len(block) > MAX_FRONT_MATTER:
        return {}, f"front matter longer than {MAX_FRONT_MATTER} characters", []
    try:
        data = yaml.load(block, Loader=_Loader)  # a safe loader: plain data only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        return {}, f"front matter is not valid YAML{where}: {problem}", []
    except (RecursionError, MemoryError):
        return {}, "front matter is nested too deeply", []
    if data is None:
        return {}, None, []
    if not isinstance(data, dict):
        return {}, f"front matter is a {type(data).__name__}, not a mapping of fields", []
    fields: dict[str, Any] = {}
    dropped: list[tuple[str, str]] = []
    budget = [MAX_NODES]
    for raw_key, raw_value in data.items():
        try:
            key = _key(raw_key)
        except _Dropped as exc:
            dropped.append((_shown(raw_key), exc.why))
            continue
        left = budget[0]
        try:
            fields[key] = _plain(raw_value, budget, 1)
            continue
        except _Dropped as exc:
            why = exc.why
        except (_TooComplex, RecursionError):
            why = (f"more than {MAX_NODES} values in the front matter, or nested deeper than "
                   f"{MAX_DEPTH}")
        budget[0] = left  # what a dropped field used counts for nothing
        dropped.append((key, why))
    return fields, None, dropped


def _shown(key: object) -> str:
    text = key.text if isinstance(key, _Bad) else str(key)
    return text[:80]


def _plain(value: Any, budget: list[int], depth: int) -> Any:
    """YAML data as JSON values, within the node budget (aliases are counted every time they
    are used, so a few lines of anchors cannot expand to millions of values). _Dropped when
    a value does not parse as its type."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise _TooComplex
    if isinstance(value, _Bad):
        raise _Dropped(value.why)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {_key(k): _plain(v, budget, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, budget, depth + 1) for v in value]
    when = dates.normalise(value)
    if when is not None:
        return when
    if isinstance(value, dt.date):
        raise _Dropped(f"{value!s} cannot be a stored date (it falls outside the years 1 to "
                       "9999 in UTC)")
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def _key(key: object) -> str:
    if isinstance(key, _Bad):
        raise _Dropped(f"its name {key.why}")
    when = dates.normalise(key)
    return when if when is not None else str(key)


def words(value: object, *, split: bool) -> list[str]:
    """The strings of a front-matter field that holds a list, or a string (cut at commas
    and, with `split`, spaces)."""
    if isinstance(value, str):
        parts = re.split(r"[,\s]+", value) if split else [value]
        return [p.strip() for p in parts if p.strip()]
    if isinstance(value, list):
        return [str(v).strip() for v in value
                if isinstance(v, str | int | float) and str(v).strip()]
    return []


def clean_tag(tag: str) -> str | None:
    """A tag without its `#` and trailing `/`; None when it is no tag (only digits, or
    characters tags cannot hold)."""
    tag = unicodedata.normalize("NFC", tag.strip().lstrip("#").rstrip("/"))
    if not tag or len(tag) > 200 or not re.fullmatch(r"[\w/-]+", tag):
        return None
    if not re.search(r"[^\d_/-]", tag):
        return None  # #2024 is a number, not a tag
    return tag


def merge_tags(*groups: Iterable[str]) -> tuple[str, ...]:
    """Tags in order of first appearance, without duplicates (tags ignore case)."""
    seen: dict[str, str] = {}
    for group in groups:
        for raw in group:
            tag = clean_tag(raw)
            if tag is not None and tag.lower() not in seen and len(seen) < MAX_TAGS:
                seen[tag.lower()] = tag
    return tuple(seen.values())


def field_tags(fields: Mapping[str, Any]) -> list[str]:
    """The tags a mapping of fields names: its `tags` or `tag` field."""
    return [*words(fields.get("tags"), split=True), *words(fields.get("tag"), split=True)]


def aliases(fields: Mapping[str, Any]) -> list[str]:
    return [*words(fields.get("aliases"), split=False), *words(fields.get("alias"), split=False)]


def _without_code(text: str) -> str:
    """The text with fenced code blocks and inline code taken out."""
    if "`" not in text and "~~~" not in text:  # no code: the text itself, without a scan
        return text
    return _INLINE_CODE.sub(" ", _FENCE.sub("\n", text))


def inline_tags(body: str) -> list[str]:
    """The `#tags` of a text outside code, each once as first written."""
    return _tags_in(_without_code(body))


def _tags_in(text: str) -> list[str]:
    if "#" not in text:
        return []
    return list(dict.fromkeys(m.group(1) for m in _TAG.finditer(text)))


def key_of(name: str) -> str:
    """How names are compared: NFC, lower case, no surrounding spaces or slashes."""
    return unicodedata.normalize("NFC", name).strip().strip("/").lower()


def links(body: str, folder: str) -> tuple[Link, ...]:
    """Wiki links and relative Markdown links outside code; `folder` is the note's own
    folder (POSIX), against which relative paths are resolved."""
    return _links_in(_without_code(body), folder)


def _links_in(text: str, folder: str) -> tuple[Link, ...]:
    if "[" not in text:  # neither kind of link
        return ()
    found: dict[tuple[str, str], Link] = {}
    seen: set[str] = set()
    for match in _WIKI.finditer(text):
        written = match.group(1)
        if written in seen or len(found) >= MAX_LINKS:
            continue
        seen.add(written)
        target = re.split(r"[|#^]", written, maxsplit=1)[0].strip()
        if target:
            found.setdefault(("wiki", key_of(target)), Link(target, key_of(target), "wiki"))
    for match in _MARKDOWN.finditer(text):
        target = match.group(1)
        if target in seen or len(found) >= MAX_LINKS:
            continue
        seen.add(target)
        if _SCHEME.match(target) or target.startswith(("#", "?")):
            continue  # a web link, mail address or anchor in the same note
        path = unquote(re.split(r"[#?]", target, maxsplit=1)[0])
        if not path:
            continue
        # A leading / starts from the top of the folder, as in Obsidian.
        resolved = posixpath.normpath(path.lstrip("/") if path.startswith("/")
                                      else posixpath.join(folder, path))
        found.setdefault(("markdown", key_of(resolved)),
                         Link(target, key_of(resolved), "markdown"))
    return tuple(found.values())


def first_date(fields: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        for name in (key, key.capitalize()):
            when = dates.normalise(fields.get(name))
            if when is not None:
                return when
    return None


def read_note(text: str, *, folder: str = "", modified: str | None = None) -> Note:
    """Everything a note's text says about itself. `folder` is the note's folder (for its
    relative links); `modified` the file's own modification time, used when the front matter
    names none."""
    block, body_start = split_front_matter(text)
    fields, problem, dropped = read_fields(block) if block is not None else ({}, None, [])
    if problem is not None:
        body_start = 0  # perhaps no front matter at all: every line of it stays searchable
    body = text[body_start:]
    fm_title = fields.get("title")
    title = fm_title.strip()[:200] if isinstance(fm_title, str) and fm_title.strip() else (
        title_of(body, "") or None)
    changed = first_date(fields, MODIFIED_KEYS) or modified
    created = first_date(fields, CREATED_KEYS) or changed
    prose = _without_code(body)  # once, for tags and links both
    facts = DocFacts(properties=fields, tags=merge_tags(field_tags(fields), _tags_in(prose)),
                     links=_links_in(prose, folder), created=created, modified=changed,
                     body_start=body_start)
    return Note(facts, title, problem, tuple(dropped))


def doc_keys(external_id: str, source: str, properties: Mapping[str, Any]) -> tuple[str, ...]:
    """The names a link may use for a document: for a file its path and file name, each with
    and without the extension; for other documents their external id; and any aliases."""
    keys: list[str] = []
    path = path_of(external_id, source)
    if path is not None:
        full = key_of(path)
        name = posixpath.basename(full)
        for key in (full, name):
            keys += [key, posixpath.splitext(key)[0]]
    else:
        keys.append(key_of(external_id))
    keys += [key_of(a) for a in aliases(properties)]
    return tuple(dict.fromkeys(k for k in keys if k))


def is_note_path(path: str) -> bool:
    """Whether a file's name says it is read as text (and so may be a note)."""
    return path.lower().endswith(TEXT_SUFFIXES)


def converted_facts(properties: Mapping[str, str], modified: str | None) -> DocFacts:
    """The facts of a converted document (PDF, Office, EPUB): its properties, and their
    dates, else the file's modification time `modified`."""
    changed = properties.get("modified") or modified
    return DocFacts(properties=dict(properties), created=properties.get("created") or changed,
                    modified=changed)
