"""What the tools reference says of a tool's argument beyond its published description."""

from __future__ import annotations

from typing import Any

DOC = "x-pocketmcp-doc"  # the key `doc` puts in an argument's JSON schema


def doc(text: str) -> dict[str, Any]:
    """An argument's `json_schema_extra`: what docs/tools.md says of it beyond its published
    description, which a client's model reads on every turn. The published schema leaves it
    out (mcp/schemas.py)."""
    return {DOC: text}
