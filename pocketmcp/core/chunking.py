"""Sentence-aware chunking bounded by characters and by the model's token window.

Pieces of about `size` characters are cut at the largest semantic unit that fits (paragraphs,
then sentences, including 。！？, then words, then characters), with up to `overlap`
characters shared by neighbours. A piece longer than the model's token window is cut again
by tokens, so no chunk has a tail the model would silently drop. Offsets are character
offsets: `text[start:end] == chunk.text`.
"""

from __future__ import annotations

from semantic_text_splitter import TextSplitter
from tokenizers import Tokenizer

from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk

# [CLS] and [SEP] take two places in the window.
SPECIAL_TOKENS = 2


class Chunker:
    def __init__(self, tokenizer: Tokenizer, *, size: int, overlap: int, max_tokens: int) -> None:
        if overlap >= size:
            raise ValueError("overlap must be smaller than size")
        self._tokenizer = _counting_copy(tokenizer)
        self.max_tokens = max_tokens
        self._by_chars = TextSplitter(size, overlap=overlap)
        budget = max_tokens - SPECIAL_TOKENS
        self._by_tokens = TextSplitter.from_huggingface_tokenizer(
            self._tokenizer, budget, overlap=min(budget // 4, max(overlap // 5, 0))
        )

    def count(self, texts: list[str]) -> list[int]:
        """Tokens of each text as the model sees it, special tokens included."""
        return [len(e.ids) for e in self._tokenizer.encode_batch(texts, add_special_tokens=True)]

    def split(self, text: str) -> tuple[Chunk, ...]:
        pieces: list[tuple[int, str]] = self._by_chars.chunk_indices(text)
        counts = self.count([piece for _, piece in pieces])
        out: list[tuple[int, str, int]] = []
        for (start, piece), tokens in zip(pieces, counts, strict=True):
            if tokens <= self.max_tokens:
                out.append((start, piece, tokens))
                continue
            subs: list[tuple[int, str]] = self._by_tokens.chunk_indices(piece)
            for (sub_start, sub), sub_tokens in zip(subs, self.count([s for _, s in subs]),
                                                    strict=True):
                out.extend(self._hard_cut(start + sub_start, sub, sub_tokens))
        return tuple(
            Chunk(idx=i, start=start, end=start + len(piece), text=piece, tokens=tokens,
                  sha256=sha256(piece))
            for i, (start, piece, tokens) in enumerate(out)
        )

    def _hard_cut(self, start: int, piece: str, tokens: int) -> list[tuple[int, str, int]]:
        """Last resort for text the splitter could not bring under the window."""
        out: list[tuple[int, str, int]] = []
        while tokens > self.max_tokens:
            enc = self._tokenizer.encode(piece, add_special_tokens=False)
            # Character offset where the token that no longer fits begins.
            cut = enc.offsets[self.max_tokens - SPECIAL_TOKENS][0]
            cut = _char_offset(piece, cut)
            if cut <= 0:
                cut = max(1, len(piece) // 2)
            head = piece[:cut]
            out.append((start, head, self.count([head])[0]))
            start, piece = start + cut, piece[cut:]
            tokens = self.count([piece])[0]
        if piece:
            out.append((start, piece, tokens))
        return out


def _char_offset(text: str, offset: int) -> int:
    # tokenizers reports offsets in characters for Python strings.
    return min(offset, len(text))


def _counting_copy(tokenizer: Tokenizer) -> Tokenizer:
    """A copy with no truncation and no padding, so counts are true lengths."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy
