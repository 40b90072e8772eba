"""The chunker's work per text: the tokenizer is asked once per window of pieces (and for a
section path once per text), not once per piece, and the chunks are the same as when every
piece is measured on its own."""

from __future__ import annotations

from typing import Any

from pocketmcp.core.chunking import Chunker


class Counting(Chunker):
    """A chunker that counts its calls of the tokenizer, and can measure one text a call."""

    def __init__(self, *args: Any, one_by_one: bool = False, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.calls = 0
        self.one_by_one = one_by_one

    def count(self, texts: list[str]) -> list[int]:
        if self.one_by_one:
            self.calls += len(texts)
            return [super(Counting, self).count([t])[0] for t in texts]
        self.calls += 1
        return super().count(texts)


def _note() -> str:
    paragraphs = [f"Paragraph {i} tells how the tide rises in the bay on day {i}, and how "
                  "the boats are moored before the evening comes in from the west. " * 3
                  for i in range(40)]
    return "# Harbour log\n\n## Tides\n\n" + "\n\n".join(paragraphs) + "\n"


def test_a_text_is_measured_a_window_at_a_time(fake_chunker: Chunker) -> None:
    tokenizer = fake_chunker._tokenizer
    chunker = Counting(tokenizer, size=1000, overlap=120, max_tokens=fake_chunker.max_tokens)
    chunks = chunker.split(_note())
    assert len(chunks) > 10
    # One call for the section path, one per window of pieces, one for the cleaned texts:
    # measured one piece at a time, there would be two or more calls per chunk.
    assert chunker.calls <= 4, chunker.calls
    each = Counting(tokenizer, size=1000, overlap=120, max_tokens=fake_chunker.max_tokens,
                    one_by_one=True)
    assert each.split(_note()) == chunks
