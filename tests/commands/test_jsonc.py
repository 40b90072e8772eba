"""JSON with comments as editors write it: read, and one member changed in place."""

from __future__ import annotations

import json

import pytest

from pocketmcp.commands import jsonc


def test_comments_and_trailing_commas_read_but_strings_that_look_like_them_stay() -> None:
    text = '{"url": "http://a//b /* c */", // note\n "n": [1, 2,], /* x */ "s": "a,}",}'
    assert jsonc.loads(text) == {"url": "http://a//b /* c */", "n": [1, 2], "s": "a,}"}
    assert jsonc.has_extras(text)
    assert not jsonc.has_extras('{"a": "// not a comment"}')
    assert len(jsonc.blank(text)) == len(text)


def test_a_broken_file_is_still_an_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        jsonc.loads('{"a": // unfinished\n}')


@pytest.mark.parametrize("text", [
    "{}",
    '{"servers": {}}',
    '{\n  "servers": {\n    "a": 1, // one\n  },\n}\n',
    '{"servers": {"a": 1}, "other": [1, 2]}',
    '{\n  /* first */ "other": true\n}',
    '{"servers": {"a": {\n  "b": 1\n}}}',
])
def test_a_member_is_added_then_replaced_and_everything_else_reads_the_same(text: str) -> None:
    before = jsonc.loads(text)
    added = jsonc.set_member(text, ("servers", "new"), {"command": "/bin/x", "args": ["-y"]})
    expected = {**before, "servers": {**before.get("servers", {}),
                                      "new": {"command": "/bin/x", "args": ["-y"]}}}
    assert jsonc.loads(added) == expected
    replaced = jsonc.set_member(added, ("servers", "new"), {"command": "/bin/z"})
    expected["servers"]["new"] = {"command": "/bin/z"}
    assert jsonc.loads(replaced) == expected
    for comment in ("// one", "/* first */"):
        assert (comment in text) == (comment in replaced)


def test_a_member_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match="not an object"):
        jsonc.set_member('{"servers": [1]}', ("servers", "a"), {})
