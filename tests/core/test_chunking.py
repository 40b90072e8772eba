from __future__ import annotations

import itertools

import pytest

from pocketmcp.core.chunking import Chunker, _prefix


def _check_offsets(text: str, chunks) -> None:
    for chunk in chunks:
        assert text[chunk.start:chunk.end] == chunk.text
    assert [c.idx for c in chunks] == list(range(len(chunks)))


def test_chunks_are_exact_slices_of_the_text(fake_chunker: Chunker) -> None:
    text = ("Mitochondria are the powerhouse of the cell. " * 40 + "\n\n") * 5
    chunks = fake_chunker.split(text)
    assert len(chunks) > 5
    _check_offsets(text, chunks)
    assert all(len(c.text) <= 1000 for c in chunks)


def test_neighbouring_chunks_overlap(fake_chunker: Chunker) -> None:
    text = " ".join(f"Sentence number {i} says something different." for i in range(300))
    chunks = fake_chunker.split(text)
    overlaps = [a.end - b.start for a, b in itertools.pairwise(chunks)]
    assert any(o > 0 for o in overlaps)
    assert all(o <= 120 for o in overlaps)


def test_chunks_end_at_sentence_boundaries(fake_chunker: Chunker) -> None:
    text = " ".join(f"This is sentence {i} of a long paragraph about rivers." for i in range(200))
    chunks = fake_chunker.split(text)
    assert all(c.text.endswith(".") for c in chunks[:-1])


def test_japanese_is_split_on_ideographic_full_stops(fake_embedder) -> None:
    chunker = Chunker(fake_embedder.tokenizer, size=100, overlap=0,
                      max_tokens=fake_embedder.max_tokens)
    text = "今日は晴れです。明日は雨が降るでしょう！本当ですか？" * 10
    chunks = chunker.split(text)
    _check_offsets(text, chunks)
    assert len(chunks) > 1
    assert all(c.text[-1] in "。！？" for c in chunks)


def test_no_chunk_exceeds_the_model_window(fake_embedder, fake_chunker: Chunker) -> None:
    # Dense numbers and symbols take many tokens per character.
    text = " ".join(f"{i * 7919:x}-{i % 97}/{i * 31 % 1000}" for i in range(3000))
    chunks = fake_chunker.split(text)
    _check_offsets(text, chunks)
    counts = fake_chunker.count([c.text for c in chunks])
    assert max(counts) <= fake_embedder.max_tokens
    assert counts == [c.tokens for c in chunks]
    # Without the token bound the character target alone would have broken the window.
    assert any(len(c.text) < 900 for c in chunks)


def test_text_without_spaces_is_cut_by_tokens(fake_embedder, fake_chunker: Chunker) -> None:
    text = "x9Q" * 2000
    chunks = fake_chunker.split(text)
    _check_offsets(text, chunks)
    assert max(fake_chunker.count([c.text for c in chunks])) <= fake_embedder.max_tokens
    # Every character is in some chunk.
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(b.start <= a.end for a, b in itertools.pairwise(chunks))


def test_empty_text_has_no_chunks(fake_chunker: Chunker) -> None:
    assert fake_chunker.split("") == ()
    assert fake_chunker.split("  \n\n ") == ()


def test_overlap_must_be_smaller_than_size(fake_embedder) -> None:
    with pytest.raises(ValueError, match="overlap"):
        Chunker(fake_embedder.tokenizer, size=100, overlap=100, max_tokens=256)


def test_headings_give_chunks_their_section_path(fake_embedder) -> None:
    chunker = Chunker(fake_embedder.tokenizer, size=200, overlap=0,
                      max_tokens=fake_embedder.max_tokens)
    text = ("# Guide\n\nWhat this guide covers, in a few words.\n\n## Install\n\n"
            + "Run the installer and follow the prompts. " * 12
            + "\n\n```sh\n# a comment, not a heading\n```\n\n### On Linux\n\nUse the package.\n")
    chunks = chunker.split(text)
    _check_offsets(text, chunks)
    assert chunks[0].section == "Guide" and chunks[0].prefix == ""
    install = [c for c in chunks if c.section == "Guide > Install"]
    assert install and all("# a comment" not in c.section for c in chunks)
    # A chunk in the middle of a section is embedded with its path in front...
    middle = [c for c in install if not c.text.startswith("#")]
    assert middle and all(c.prefix == "Guide > Install\n\n" for c in middle)
    assert middle[0].embed_text == "Guide > Install\n\n" + middle[0].text
    # ...and one that starts with its heading only with the headings above it.
    assert _prefix("### On Linux\n\nUse the package.", "Guide > Install > On Linux") == (
        "Guide > Install\n\n")
    assert _prefix("# Guide\n\nIntro.", "Guide") == ""


def test_the_path_counts_against_the_token_window(fake_embedder) -> None:
    chunker = Chunker(fake_embedder.tokenizer, size=1000, overlap=0,
                      max_tokens=fake_embedder.max_tokens)
    heading = "# " + " ".join(f"Heading{i}" for i in range(20)) + "\n\n"
    text = heading + " ".join(f"{i * 7919:x}" for i in range(2000))
    chunks = chunker.split(text)
    _check_offsets(text, chunks)
    counts = chunker.count([c.embed_text for c in chunks])
    assert counts == [c.tokens for c in chunks]
    assert max(counts) <= fake_embedder.max_tokens
    assert any(c.prefix for c in chunks)


def test_attribute_lists_and_front_matter_stay_out_of_paths_and_embeddings(fake_embedder) -> None:
    chunker = Chunker(fake_embedder.tokenizer, size=1000, overlap=0,
                      max_tokens=fake_embedder.max_tokens)
    text = ("---\ntitle: Build\n# not a heading\n---\n# Build { #build }\n\nIntro words.\n\n"
            "## Targets ## {: #targets }\n\nEach target <!-- more --> builds a wheel.\n")
    chunks = chunker.split(text)
    _check_offsets(text, chunks)
    assert [c.section for c in chunks] == ["Build", "Build > Targets"]
    assert chunks[0].start == text.index("# Build")  # the front matter is not a chunk
    assert all("{" not in c.embed_text and "<!--" not in c.embed_text for c in chunks)
    assert all("{" not in c.keyword_text for c in chunks)
    assert "<!-- more -->" in chunks[1].text  # the stored text is the file's own


def test_a_new_heading_starts_a_new_chunk(fake_chunker: Chunker) -> None:
    text = ("# Guide\n\n## Install\n\nRun the installer.\n\n"
            "## Appended\n\nA short section added at the end.\n")
    chunks = fake_chunker.split(text)
    _check_offsets(text, chunks)
    assert [c.section for c in chunks] == ["Guide > Install", "Guide > Appended"]
    assert chunks[0].text.startswith("# Guide")  # headings alone go with what follows
    assert chunks[1].text.startswith("## Appended")
