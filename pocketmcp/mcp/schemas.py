"""The tools as a client lists them: JSON schemas cut to what a client's model needs, each
one self-contained.

The SDK publishes pydantic's schemas of each tool's arguments and result. Those repeat a
generated `title` on every field, spell an optional value as `anyOf` with `null`, and put
nested models in `$defs` reached by `$ref`, which several MCP clients fail to resolve (the
tool, or the whole list, is then dropped). Every tool's definition is sent to the client's
model on every turn, so this rewrites each schema once:

- `$ref`s are inlined (no model here is recursive) and `$defs` dropped;
- generated titles, `default: null` and `additionalProperties` are dropped (the server
  still refuses a field a filter does not have), and so
  are the length bounds of strings (the SDK still checks them: they refuse what no model
  sends, a 5,000-character query, an empty path);
- descriptions have their line breaks and indentation folded into single spaces;
- an argument that may be null is published as its other type (omitting it is how a client
  leaves it out; the SDK still accepts an explicit null), a result field that may be null
  as `"type": [T, "null"]`, so a client validating results against it accepts them;
- a result's schema keeps its structure and types, not its descriptions nor which fields are
  required (docs/tools.md has them): clients validate results with it, models rarely see it;
- an argument another listed tool spells out the same (SHARED) points to it in words;
- what the docs say of an argument beyond its description (ops/results.py's `doc`) is
  left to the docs.
"""

from __future__ import annotations

from typing import Any

from mcp_types import Tool

from pocketmcp.core.argdoc import DOC

Schema = dict[str, Any]

# (tool, argument) -> the tool with the same argument, spelled out: published as a pointer
# to it when both are listed.
SHARED: dict[tuple[str, str], str] = {
    ("list_documents", "filter"): "search",
}

# Keywords whose value is one schema, a list of schemas, or a map of names to schemas.
_ONE = ("items", "additionalProperties", "not")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "patternProperties")
_LENGTHS = ("minLength", "maxLength")


def published(tools: list[Tool]) -> list[Tool]:
    """The tools as listed to a client: schemas cut short, shared arguments pointed to."""
    names = {tool.name for tool in tools}
    out = []
    for tool in tools:
        inputs = input_schema(tool.input_schema)
        for (name, arg), source in SHARED.items():
            spelled = inputs["properties"].get(arg) if name == tool.name else None
            if spelled is not None and source in names:
                inputs["properties"][arg] = {"type": spelled.get("type", "object"),
                                             "description": f"As {source}'s."}
        out.append(tool.model_copy(update={
            "description": tool.description and folded(tool.description),
            "input_schema": inputs, "output_schema": output_schema(tool.output_schema)}))
    return out


def input_schema(schema: Schema, *, documented: bool = False) -> Schema:
    """A tool's input schema as published; `documented`, with what `doc` adds, for the
    docs."""
    return _walk(schema, schema.get("$defs", {}), output=False, root=True, bare=not documented)


def output_schema(schema: Schema | None, *, documented: bool = False) -> Schema | None:
    """A tool's output schema as published; `documented`, with the descriptions and required
    fields of its result's model, as the docs show it."""
    if schema is None:
        return None
    return _walk(schema, schema.get("$defs", {}), output=True, root=True, bare=not documented)


def folded(text: str) -> str:
    """A description on one line: a docstring's line breaks and indentation as one space."""
    return " ".join(text.split())


def _walk(node: Schema, defs: dict[str, Schema], *, output: bool, root: bool = False,
          bare: bool = True) -> Schema:
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    out: Schema = {}
    for key, value in node.items():
        if key in ("$defs", "title") or (key == "default" and (value is None or output)):
            continue
        if bare and (key == DOC or (output and key in ("description", "required"))):
            continue
        if (key == "additionalProperties" and isinstance(value, bool)) or key in _LENGTHS:
            continue
        if key == "description":
            out[key] = folded(value)
        elif key in _ONE and isinstance(value, dict):
            out[key] = _walk(value, defs, output=output, bare=bare)
        elif key in _MANY:
            out[key] = [_walk(v, defs, output=output, bare=bare) for v in value]
        elif key in _NAMED:
            out[key] = {name: _walk(v, defs, output=output, bare=bare)
                        for name, v in value.items()}
        else:
            out[key] = value
    if root:
        out.setdefault("type", "object")
    return _nullable(out, output)


def _nullable(node: Schema, output: bool) -> Schema:
    """`anyOf: [X, {type: null}]` as X (an argument) or X with null added to its type (a
    result); other unions are kept."""
    branches = node.get("anyOf")
    if not branches or {"type": "null"} not in branches:
        return node
    others = [b for b in branches if b != {"type": "null"}]
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    if len(others) != 1:
        return {**rest, "anyOf": others + ([{"type": "null"}] if output else [])}
    only = others[0]
    if not output:
        return {**only, **rest}
    kind = only.get("type")
    if isinstance(kind, str):
        return {**only, "type": [kind, "null"], **rest}
    return {**rest, "anyOf": [only, {"type": "null"}]}
