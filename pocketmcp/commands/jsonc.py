"""JSON with comments, as editors write their settings (VS Code's `mcp.json` is JSONC): read
it, and change one member of one object in place so that every comment, blank line and
trailing comma elsewhere stays as the user left it.

`blank` turns JSONC into JSON of the same length (comments and trailing commas become
spaces, newlines stay), so positions found in the JSON are positions in the user's text.
"""

from __future__ import annotations

import json
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


def blank(text: str) -> str:
    """`text` with `//` and `/* */` comments and trailing commas replaced by spaces."""
    out = list(text)
    i, n = 0, len(text)
    last_comma = -1  # a comma not yet followed by a value
    while i < n:
        ch = text[i]
        if ch == '"':
            i = _string_end(text, i)
            last_comma = -1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = [c if c == "\n" else " " for c in text[i:end]]
            i = end
            continue
        if ch == ",":
            last_comma = i
        elif ch in "}]":
            if last_comma >= 0:
                out[last_comma] = " "
            last_comma = -1
        elif ch not in _SPACE:
            last_comma = -1
        i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)


def loads(text: str) -> Any:
    """The value of a JSONC text (json.JSONDecodeError when it is not JSONC)."""
    return json.loads(blank(text))


def has_extras(text: str) -> bool:
    """Whether `text` holds comments or trailing commas (plain JSON would drop them)."""
    return blank(text) != text


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _members(json_text: str, start: int) -> tuple[dict[str, tuple[int, int]], int]:
    """The members of the object whose `{` is at `start`: key -> (value start, value end),
    and the position of its `}`."""
    spans: dict[str, tuple[int, int]] = {}
    i = _skip(json_text, start + 1)
    while json_text[i] != "}":
        key, i = _DECODER.raw_decode(json_text, i)
        i = _skip(json_text, i)
        i = _skip(json_text, i + 1)  # past ':'
        _, end = _DECODER.raw_decode(json_text, i)
        spans[key] = (i, end)
        i = _skip(json_text, end)
        if json_text[i] == ",":
            i = _skip(json_text, i + 1)
    return spans, i


def _indent_of(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    line = text[line_start:pos]
    return line[: len(line) - len(line.lstrip())]


def _block(value: Any, indent: str) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def set_member(text: str, path: tuple[str, str], value: Any) -> str:
    """`text` (a JSONC object) with `text[path[0]][path[1]] = value`, changed in place.
    The outer member is created when missing; it must be an object when present."""
    json_text = blank(text)
    top = _skip(json_text, 0)
    outer, inner = path
    spans, close = _members(json_text, top)
    if outer not in spans:
        return _insert(text, json_text, top, close, outer, {inner: value}, _last(spans))
    start, _ = spans[outer]
    if json_text[start] != "{":
        raise ValueError(f"{outer!r} is not an object")
    inner_spans, inner_close = _members(json_text, start)
    if inner in inner_spans:
        begin, end = inner_spans[inner]
        return text[:begin] + _block(value, _indent_of(text, begin)) + text[end:]
    return _insert(text, json_text, start, inner_close, inner, value, _last(inner_spans))


def _last(spans: dict[str, tuple[int, int]]) -> int | None:
    return max((end for _, end in spans.values()), default=None)


def _insert(text: str, json_text: str, brace: int, close: int, key: str, value: Any,
            last_end: int | None) -> str:
    """`key: value` as the last member of the object whose braces are at `brace` and `close`
    (`last_end`: where its last member's value ends, None when it is empty)."""
    if last_end is None:  # an empty object: the member on its own line
        outer = _indent_of(text, brace)
        indent = outer + "  "
        member = f"\n{indent}{json.dumps(key)}: {_block(value, indent)}\n{outer}"
        return text[: brace + 1] + member + text[close:]
    after = last_end
    while text[after] in " \t":
        after += 1
    comma = text[after] == ","  # a trailing comma already there
    head = text[: after + 1] if comma else text[:last_end] + ","
    rest = text[after + 1:] if comma else text[last_end:]
    line_end = rest.find("\n")
    if line_end < 0 or len(text) - len(rest) + line_end > close:  # all on one line
        return f"{head} {json.dumps(key)}: {_block(value, '')}{rest}"
    indent = _indent_of(text, _key_start(json_text, last_end))
    member = f"\n{indent}{json.dumps(key)}: {_block(value, indent)}"
    return head + rest[:line_end] + member + rest[line_end:]


def _key_start(json_text: str, value_end: int) -> int:
    """Where the line of the member whose value ends at `value_end` starts its text."""
    line_start = json_text.rfind("\n", 0, value_end) + 1
    return _skip(json_text, line_start)
