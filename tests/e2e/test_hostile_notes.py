"""No content of a note can stop indexing: front-matter values that do not parse as their
type are dropped one field at a time, with a warning naming the note and the field, and the
text of a note is read in time linear in its length, whatever it holds."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import run_cli
from support.tools import Tools

from pocketmcp.core import markdown
from pocketmcp.core.notes import read_note
from pocketmcp.runtime import Runtime

INT_RANGE = (-(2**63), 2**63 - 1)

# (file, its front matter, the field that cannot be kept)
HOSTILE_NOTES = [
    ("due.md", "due: 2024-04-31", "due"),
    ("year0.md", "started: 0000-01-01", "started"),
    ("hour.md", "at: 2024-01-01 25:00:00", "at"),
    ("zone.md", "at: 2024-01-01T10:00:00+99:00", "at"),
    ("edge.md", "updated: 9999-12-31T23:59:59-12:00", "updated"),
    ("bigint.md", "count: 99999999999999999999999", "count"),
    ("negint.md", "count: -9223372036854775809", "count"),
    ("deep.md", "deep: " + "[" * 30 + "]" * 30, "deep"),
    ("laughs.md", "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]", "d"),
    ("badkey.md", "2024-02-30: nothing", "2024-02-30"),
]


def _note(front: str, word: str) -> str:
    return f"---\n{front}\nkept: yes\n---\n# {word}\n\nA note about {word} and sourdough.\n"


@pytest.mark.usefixtures("processes")
def test_index_keeps_every_note_and_names_each_dropped_field(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for i, (name, front, _) in enumerate(HOSTILE_NOTES):
        (kb / name).write_text(_note(front, f"word{i}"))
    (kb / "brackets.md").write_text("# Brackets\n\n" + "[" * 5_000 + "\n")
    (kb / "spaces.md").write_text("# Spaces\n\n" + " " * 100_000 + "{\n")
    done = run_cli(tmp_path, "index", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["added"] == len(HOSTILE_NOTES) + 2
    warnings = [json.loads(line) for line in done.stderr.splitlines()
                if "front_matter_field_dropped" in line]
    named = {(w["path"], w["field"]) for w in warnings}
    for name, _, field in HOSTILE_NOTES:
        assert (name, field) in named, (name, field, named)
    listed = run_cli(tmp_path, "search", "word0 sourdough", "-k", "1", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["hits"][0]["path"] == "due.md"


async def test_upsert_documents_with_an_impossible_date_keeps_the_rest(
        fake_service: Runtime) -> None:
    tools = Tools(fake_service)
    await tools.add(("due", "---\ndue: 2024-04-31\nowner: ana\n---\nPay the rent.\n"))
    [doc] = (await tools("list_documents", page={"limit": 10}))["documents"]
    got = await tools("get_document", doc_id=doc["doc_id"])
    text = json.dumps(got)
    assert "ana" in text and "2024-04-31T" not in text


# -- property-based: any front matter, any value ----------------------------------------------

_SCALARS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.booleans(),
    st.none(),
    # dates and timestamps written as YAML reads them, any numbers in any place
    st.builds(lambda y, m, d: f"{y:04d}-{m:02d}-{d:02d}", st.integers(0, 9999),
              st.integers(0, 99), st.integers(0, 99)),
    st.builds(lambda y, m, d, h, mi, z: f"{y:04d}-{m:02d}-{d:02d}T{h:02d}:{mi:02d}:00{z}",
              st.integers(0, 9999), st.integers(1, 12), st.integers(1, 31),
              st.integers(0, 99), st.integers(0, 99),
              st.sampled_from(["", "Z", "+99:00", "-12:00", "+14:00", "-23:59"])),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20)


def _yaml_of(fields: dict[str, Any]) -> str:
    """Fields written as YAML, strings that look like dates left unquoted (as people write
    them), so YAML reads them as dates."""
    lines = []
    for key, value in fields.items():
        if isinstance(value, str) and value[:4].isdigit():
            lines.append(f"{json.dumps(key)}: {value}")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "\n".join(lines)


def _within_types(value: Any) -> bool:
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return True
    if isinstance(value, int):
        return INT_RANGE[0] <= value <= INT_RANGE[1]
    if isinstance(value, list):
        return all(_within_types(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _within_types(v) for k, v in value.items())
    return False


# Twenty examples a run, new ones each run: within the one-second rule (thousands of
# front matters: bench/hostile.py).
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(min_size=1, max_size=10), _VALUES, max_size=6))
def test_any_front_matter_reads_without_error_and_keeps_only_valid_values(
        fields: dict[str, Any]) -> None:
    text = f"---\n{_yaml_of(fields)}\n---\n# Body\n\nText #tag\n"
    note = read_note(text)
    props = note.facts.properties
    assert _within_types(props)
    msgspec.json.encode(props)  # storable as JSON
    for field, why in note.dropped:
        assert why and field not in props
    for when in (note.facts.created, note.facts.modified):
        assert when is None or dt.date.fromisoformat(when[:10])
    assert "tag" in note.facts.tags


_DATE_LIKE = st.one_of(
    st.from_regex(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([ T][0-9]{1,2}:[0-9]{2}(:[0-9]{2})?"
                  r"(Z|[+-][0-9]{2}:[0-9]{2})?)?",
                  fullmatch=True),
    st.text(alphabet="-:T0123456789 +Z", min_size=1, max_size=40))


@settings(max_examples=200, deadline=None)
@given(_DATE_LIKE)
def test_any_date_like_scalar_is_a_date_a_string_or_a_dropped_field(value: str) -> None:
    note = read_note(f"---\nwhen: {value}\n---\nbody\n")
    if note.problem is None:
        assert "when" in note.facts.properties or [f for f, _ in note.dropped] == ["when"]
    try:
        yaml.safe_load(f"when: {value}")
    except yaml.YAMLError:
        assert note.problem is not None  # not YAML at all: the whole block is reported
    except (ValueError, OverflowError):
        assert "when" not in note.facts.properties  # what the old reader raised on


# -- linear time on any text ------------------------------------------------------------------

PATHOLOGICAL = {
    "brackets": "[" * 50_000,
    "wiki": "[[a" * 16_000,
    "links": "[a](" * 12_500,
    "spaces before a brace": " " * 50_000 + "{",
    "attribute values": "{k=" * 16_000,
    "backticks": "` a" * 16_000,
    "comments": "<!--" * 12_500,
}


def test_pathological_texts_are_read_in_linear_time() -> None:
    worst = 0.0
    for name, text in PATHOLOGICAL.items():
        started = time.perf_counter()
        read_note(text)
        markdown.clean(text)
        took = time.perf_counter() - started
        worst = max(worst, took)
        assert took < 1.0, f"{name}: {took:.2f} s"
