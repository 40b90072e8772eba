"""What makes two indexes' vectors comparable: provider, model, dimension and prefixes.

An index records its identity in its `meta` table; vectors from another identity must never
be mixed into it. Indexes made before providers existed record only the model and the
dimension: they were built by the local provider without prefixes.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

LOCAL = "local"


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    dim: int
    provider: str = LOCAL
    doc_prefix: str = ""
    query_prefix: str = ""
    input_type: bool = False  # the provider is told passage or query (and adds its prefixes)

    def meta(self) -> dict[str, str]:
        """The rows of the index's `meta` table that record it."""
        return {"model_id": self.model, "dim": str(self.dim), "provider": self.provider,
                "doc_prefix": self.doc_prefix, "query_prefix": self.query_prefix,
                "input_type": "passage/query" if self.input_type else ""}

    @classmethod
    def from_meta(cls, meta: Mapping[str, str]) -> Identity | None:
        """The identity an index records; None when it records none (an empty file)."""
        if "model_id" not in meta or "dim" not in meta:
            return None
        return cls(model=meta["model_id"], dim=int(meta["dim"]),
                   provider=meta.get("provider", LOCAL),
                   doc_prefix=meta.get("doc_prefix", ""),
                   query_prefix=meta.get("query_prefix", ""),
                   input_type=bool(meta.get("input_type", "")))

    def differences(self, wanted: Identity) -> list[str]:
        """What differs between this (stored) identity and `wanted`, one phrase each."""
        out = []
        for field, label in (("provider", "provider"), ("model", "model"),
                             ("dim", "dimensions"), ("doc_prefix", "document prefix"),
                             ("query_prefix", "query prefix"), ("input_type", "input_type")):
            mine, theirs = getattr(self, field), getattr(wanted, field)
            if mine != theirs:
                out.append(f"{label} {_shown(mine)} in the index, {_shown(theirs)} configured")
        return out

    def describe(self) -> str:
        """One line for logs and messages."""
        text = f"{self.provider} {self.model!r} ({self.dim} dimensions"
        if self.doc_prefix or self.query_prefix:
            text += f", prefixes {self.doc_prefix!r} / {self.query_prefix!r}"
        if self.input_type:
            text += ", input_type passage/query"
        return text + ")"


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str):
        return repr(value) if value else "none"
    return str(value)
