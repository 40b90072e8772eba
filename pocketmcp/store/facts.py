"""The rows that hold what a document says about itself: its properties, tags, dates and
links, and the names links may use for it.

Row-changing SQL, called only by the writer (store/sqlite/writes.py) inside its transactions and by
the migration that introduced these rows (store/sqlite/schema.py). A document's facts are replaced
whole whenever it is written.

- `documents.properties`: front matter, or a PDF's or Office file's properties (JSON);
  `documents.metadata` keeps what a tool gave, which wins where both name a field.
- `documents.tags` (JSON, as written) and `doc_tags(tag, doc_id)` (lower case, for filters).
- `documents.created`, `documents.modified`: the document's own dates (core/dates.py).
- `links(doc_id, idx, target, key, kind)` and `doc_keys(key, doc_id)`: a link points at
  every document that has its key; resolved when read, so the order of indexing is free.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from pocketmcp.core import dates
from pocketmcp.core.notes import doc_keys, field_tags, merge_tags
from pocketmcp.messages import DocFacts, DocRecord

Execute = Callable[[str, Sequence[Any]], Any]
ExecuteMany = Callable[[str, Sequence[Sequence[Any]]], Any]

# The migration that adds these rows (schema version 5).
MIGRATION: tuple[str, ...] = (
    "ALTER TABLE documents ADD COLUMN properties TEXT NOT NULL DEFAULT '{}' "
    "CHECK (json_valid(properties))",
    "ALTER TABLE documents ADD COLUMN tags TEXT NOT NULL DEFAULT '[]'",
    "ALTER TABLE documents ADD COLUMN created TEXT",
    "ALTER TABLE documents ADD COLUMN modified TEXT",
    "CREATE INDEX documents_modified ON documents(modified)",
    "CREATE INDEX documents_created ON documents(created)",
    """CREATE TABLE doc_tags(
           tag TEXT NOT NULL,
           doc_id INTEGER NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
           PRIMARY KEY (tag, doc_id)) WITHOUT ROWID""",
    "CREATE INDEX doc_tags_doc ON doc_tags(doc_id)",
    """CREATE TABLE links(
           doc_id INTEGER NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
           idx INTEGER NOT NULL,
           target TEXT NOT NULL,
           key TEXT NOT NULL,
           kind TEXT NOT NULL CHECK (kind IN ('wiki', 'markdown')),
           PRIMARY KEY (doc_id, idx)) WITHOUT ROWID""",
    "CREATE INDEX links_key ON links(key)",
    """CREATE TABLE doc_keys(
           key TEXT NOT NULL,
           doc_id INTEGER NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
           PRIMARY KEY (key, doc_id)) WITHOUT ROWID""",
    "CREATE INDEX doc_keys_doc ON doc_keys(doc_id)",
)


def tags_of(facts: DocFacts, metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """A document's tags: its own, then those of a tool's `tags` metadata field."""
    return merge_tags(facts.tags, field_tags(metadata))


def with_dates(found: DocFacts, modified: str, created: str | None) -> DocFacts:
    """A document's facts with both dates: its own, else `modified`; `created` when it
    gives none, else the modified date. Dates the document does not give itself stay as the
    index holds them: the same text under a new mtime is no change of the document."""
    modified = found.modified or modified
    return msgspec.structs.replace(found, modified=modified,
                                   created=found.created or created or modified)


def dated(doc: DocRecord, fallback: str, created: str | None) -> DocFacts:
    """A document's facts as first written: `modified` is its own, else its file's
    modification time, else `fallback`; `created` its own, else `created` (what the index
    holds from before), else `modified`."""
    return with_dates(doc.facts, dates.from_ns(doc.mtime_ns) if doc.mtime_ns else fallback,
                      created)


def stored(facts: DocFacts, metadata: Mapping[str, Any]) -> tuple[str, str, str | None,
                                                                  str | None, str]:
    """(properties, tags, created, modified, links) as the documents row and the links rows
    hold them, to tell whether a write changes anything."""
    return (json.dumps(facts.properties, ensure_ascii=False, sort_keys=True),
            json.dumps(tags_of(facts, metadata), ensure_ascii=False),
            facts.created, facts.modified,
            json.dumps([[link.target, link.key, link.kind] for link in facts.links],
                       ensure_ascii=False))


def current(execute: Execute, doc_id: int) -> tuple[str, str, str | None, str | None, str]:
    """The facts stored for a document, in the form `stored` gives."""
    row = execute("SELECT properties, tags, created, modified FROM documents WHERE doc_id = ?",
                  (doc_id,)).fetchone()
    found = execute("SELECT target, key, kind FROM links WHERE doc_id = ? ORDER BY idx",
                    (doc_id,)).fetchall()
    return (row[0], row[1], row[2], row[3],
            json.dumps([list(r) for r in found], ensure_ascii=False))


def write(execute: Execute, many: ExecuteMany, doc_id: int, *, external_id: str, source: str,
          facts: DocFacts, metadata: Mapping[str, Any]) -> None:
    """Replace a document's facts."""
    tags = tags_of(facts, metadata)
    execute("UPDATE documents SET properties = ?, tags = ?, created = ?, modified = ? "
            "WHERE doc_id = ?",
            (json.dumps(facts.properties, ensure_ascii=False, sort_keys=True),
             json.dumps(tags, ensure_ascii=False), facts.created, facts.modified, doc_id))
    remove(execute, doc_id)
    many("INSERT OR IGNORE INTO doc_tags(tag, doc_id) VALUES (?, ?)",
         [(tag.lower(), doc_id) for tag in tags])
    many("INSERT INTO links(doc_id, idx, target, key, kind) VALUES (?, ?, ?, ?, ?)",
         [(doc_id, i, link.target, link.key, link.kind) for i, link in enumerate(facts.links)])
    names = doc_keys(external_id, source, {**facts.properties, **metadata})
    many("INSERT OR IGNORE INTO doc_keys(key, doc_id) VALUES (?, ?)",
         [(key, doc_id) for key in names])


def remove(execute: Execute, doc_id: int) -> None:
    """Drop a document's tag, link and name rows (its row keeps its columns)."""
    for table in ("doc_tags", "links", "doc_keys"):
        execute(f"DELETE FROM {table} WHERE doc_id = ?", (doc_id,))
