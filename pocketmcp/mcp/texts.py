"""What the client's model is told about the server."""

from __future__ import annotations


def instructions_for(tools: tuple[str, ...]) -> str:
    """What the client's model is told about the tools this server offers."""
    text = ("PocketMCP searches the user's local documents (notes, PDFs, Word files, web pages) "
            "by meaning and keywords. Call `search` with a natural-language query; each match "
            "has a `resource` URI (mcp+doc://DOC#CHUNK) to read the exact passage")
    text += ", and `get_document` returns a whole document." if "get_document" in tools else "."
    if "list_libraries" in tools:
        text += (" Documents sit in libraries (`list_libraries`); `search` can be limited to "
                 "one.")
    adders = [f"`{t}`" for t in ("ingest_file", "ingest_url", "upsert_documents") if t in tools]
    if adders:
        text += f" {', '.join(adders)} add files, web pages or text."
    text += (" Filters take tags, dates (`modified_after: \"7d\"`) and metadata; each result "
             "has `modified_at`, `tags`, and `stale` (true: the file changed since it was "
             "indexed).")
    if "links" in tools:
        text += " `links` lists the notes a document links to and those linking to it."
    if "status" in tools:
        text += " `status` tells whether indexing is done."
    return text
