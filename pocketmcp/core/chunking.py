"""Sentence-aware chunking bounded by characters and by the model's token window.

Pieces of about `size` characters are cut at the largest semantic unit that fits (paragraphs,
then sentences, including 。！？, then words, then characters), with up to `overlap`
characters shared by neighbours. Offsets are character offsets: `text[start:end]` is the
chunk.

Markdown headings give each chunk a section path ("Title > Section > Subsection"). A chunk
that does not begin with its own heading is embedded with that path in front, so a paragraph
deep in a document still carries what it is about. Every chunk, path included, fits the
model's token window, counted with the model's own tokenizer: nothing is silently cut off.
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Callable
from functools import cache

import msgspec
from semantic_text_splitter import TextSplitter
from tokenizers import Tokenizer

from pocketmcp.core import markdown
from pocketmcp.core.text import sha256
from pocketmcp.core.token_count import FastCounter
from pocketmcp.messages import Chunk

# [CLS] and [SEP] take two places in the window.
SPECIAL_TOKENS = 2
_HEADING_LINE = re.compile(r"#{1,6}\s")
# A section path longer than this many tokens is shortened from the left.
MAX_PATH_TOKENS = 48
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
# split_capped cuts a long text into windows of this many chunk sizes, each split on its own:
# the work per call stays small, and it stops as soon as enough chunks are made.
WINDOW_CHUNKS = 64


def sections(text: str) -> tuple[list[int], list[str]]:
    """(start offsets, section paths) of the Markdown headings, outside code fences and
    front matter; heading text without attribute lists, comments or closing hashes."""
    body = markdown.front_matter_end(text)
    fences = [m.start() for m in _FENCE.finditer(text, body)]
    starts: list[int] = []
    paths: list[str] = []
    stack: list[tuple[int, str]] = []
    for match in _HEADING.finditer(text, body):
        if bisect.bisect_right(fences, match.start()) % 2:
            continue  # inside a code block
        title = markdown.heading_text(match.group(2))
        if not title:
            continue
        level = len(match.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        starts.append(match.start())
        paths.append(" > ".join(title for _, title in stack))
    return starts, paths


class Chunker:
    def __init__(self, tokenizer: Tokenizer, *, size: int, overlap: int, max_tokens: int) -> None:
        if overlap >= size:
            raise ValueError("overlap must be smaller than size")
        self._tokenizer = _counting_copy(tokenizer)
        self._fast = FastCounter.of(self._tokenizer)  # None: the tokenizer counts alone
        self.size = size
        self.max_tokens = max_tokens
        self.overlap = overlap
        self._by_chars = TextSplitter(size, overlap=overlap)

    @cache  # noqa: B019 - a handful of budgets per chunker, which lives as long as the process
    def _by_tokens(self, budget: int) -> TextSplitter:
        return TextSplitter.from_huggingface_tokenizer(
            self._tokenizer, budget, overlap=min(budget // 4, max(self.overlap // 5, 0)))

    def count(self, texts: list[str]) -> list[int]:
        """Tokens of each text as the model sees it, special tokens included."""
        if self._fast is not None:
            return self._fast.counts(texts)
        return [len(e.ids) for e in self._tokenizer.encode_batch(texts, add_special_tokens=True)]

    def split(self, text: str, skip: int = 0) -> tuple[Chunk, ...]:
        """Chunks of `text` after its first `skip` characters (a note's front matter);
        offsets are into the whole text."""
        return self.split_capped(text, skip, most=sys.maxsize)[0]

    def split_capped(self, text: str, skip: int = 0, *, most: int,
                     stop: Callable[[], bool] = lambda: False) -> tuple[tuple[Chunk, ...], int]:
        """At most `most` chunks of `text` (after `skip` characters), and the offset up to
        which they cover it (len(text) when whole). The work is bounded by `most`, whatever
        the text's length: each block (a heading starts one) is split a window at a time
        (each ending at a paragraph, line or word break where there is one), and `stop` is
        asked between pieces: once it says so, nothing is returned."""
        if skip:
            chunks, covered = self.split_capped(text[skip:], most=most, stop=stop)
            return tuple(msgspec.structs.replace(c, start=c.start + skip, end=c.end + skip)
                         for c in chunks), covered + skip
        heading_starts, heading_paths = sections(text)
        window = WINDOW_CHUNKS * self.size
        out: list[tuple[int, str, str]] = []  # (start, text, section path)
        counted: dict[str, int] = {}  # tokens of texts measured already: not measured again
        shortened: dict[str, str] = {}  # section paths as they fit, each worked out once
        whole = True
        for begin, end in _blocks(text, heading_starts):
            pos = begin
            while pos < end and len(out) < most and not stop():
                cut = _window_end(text, pos, window, end)
                pieces: list[tuple[int, str, str]] = []
                for start, piece in self._by_chars.chunk_indices(text[pos:cut]):
                    if stop():  # a piece of a pathological text can take a while
                        return (), 0
                    pieces.append((pos + start, piece, self._path_at(
                        pos + start, piece, heading_starts, heading_paths, shortened)))
                # The window's pieces measured in one call of the tokenizer, not one by one.
                whole_pieces = [_prefix(piece, path) + piece for _, piece, path in pieces]
                new = list(dict.fromkeys(t for t in whole_pieces if t not in counted))
                counted.update(zip(new, self.count(new), strict=True))
                for start, piece, path in pieces:
                    out.extend(self._fit(start, piece, path, counted))
                pos = cut
            if pos < end:
                whole = False
                break
        if len(out) > most:
            out, whole = out[:most], False
        prefixes = [_prefix(piece, path) for _, piece, path in out]
        cleaned = [markdown.clean(piece) for _, piece, _ in out]
        texts = [p + c for p, c in zip(prefixes, cleaned, strict=True)]
        new = [t for t in texts if t not in counted]
        counted.update(zip(new, self.count(new), strict=True))
        counts = [counted[t] for t in texts]
        chunks = tuple(
            Chunk(idx=i, start=start, end=start + len(piece), text=piece, tokens=tokens,
                  sha256=sha256(prefix + body), section=path, prefix=prefix,
                  indexed="" if body is piece else body)
            for i, ((start, piece, path), prefix, body, tokens) in enumerate(
                zip(out, prefixes, cleaned, counts, strict=True))
        )
        covered = len(text) if whole else (chunks[-1].end if chunks else 0)
        return chunks, covered

    def _path_at(self, start: int, piece: str, starts: list[int], paths: list[str],
                 shortened: dict[str, str] | None = None) -> str:
        """The section a piece belongs to: the last heading at or before its first line of
        body text (a piece opening with "# A" then "## B" is about B, within A). `shortened`
        keeps each path as it fits, so a path is measured once per text."""
        i = bisect.bisect_right(starts, start + _body_offset(piece)) - 1
        if i < 0:
            return ""
        if shortened is None:
            return self._fitting_path(paths[i])
        path = shortened.get(paths[i])
        if path is None:
            path = shortened[paths[i]] = self._fitting_path(paths[i])
        return path

    def _fitting_path(self, path: str) -> str:
        """`path`, shortened from the left if it is longer than MAX_PATH_TOKENS."""
        if self.count([path])[0] - SPECIAL_TOKENS > MAX_PATH_TOKENS:
            words = path.split(" > ")
            while len(words) > 1 and self.count([" > ".join(words)])[0] > MAX_PATH_TOKENS:
                words.pop(0)
            path = " > ".join(words)[-400:]
        return path

    def _fit(self, start: int, piece: str, path: str, counted: dict[str, int]
             ) -> list[tuple[int, str, str]]:
        """The piece, cut again by tokens if it and its path exceed the window (its tokens
        noted in `counted` when it fits)."""
        prefix = _prefix(piece, path)
        tokens = counted.get(prefix + piece)
        if tokens is None:
            tokens = self.count([prefix + piece])[0]
        if tokens <= self.max_tokens:
            counted[prefix + piece] = tokens
            return [(start, piece, path)]
        budget = self.max_tokens - SPECIAL_TOKENS - (
            self.count([prefix])[0] - SPECIAL_TOKENS if prefix else 0)
        # Budgets are rounded down to a multiple of 32: each distinct budget keeps a splitter
        # with its own copy of the tokenizer (several MB), so only a few may exist.
        budget = max(32, budget - budget % 32)
        out: list[tuple[int, str, str]] = []
        for sub_start, sub in self._by_tokens(budget).chunk_indices(piece):
            out.extend(self._hard_cut(start + sub_start, sub, path))
        return out

    def _hard_cut(self, start: int, piece: str, path: str) -> list[tuple[int, str, str]]:
        """Last resort for text the splitter could not bring under the window."""
        out: list[tuple[int, str, str]] = []
        while piece:
            prefix = _prefix(piece, path)
            if self.count([prefix + piece])[0] <= self.max_tokens:
                out.append((start, piece, path))
                break
            room = self.max_tokens - SPECIAL_TOKENS - (
                self.count([prefix])[0] - SPECIAL_TOKENS if prefix else 0)
            enc = self._tokenizer.encode(piece, add_special_tokens=False)
            cut = enc.offsets[max(1, room) - 1][1] if len(enc.offsets) >= room > 0 else 0
            if cut <= 0 or cut >= len(piece):
                cut = max(1, len(piece) // 2)
            out.append((start, piece[:cut], path))
            start, piece = start + cut, piece[cut:]
        return out


def _blocks(text: str, heading_starts: list[int]) -> list[tuple[int, int]]:
    """Spans of `text` to chunk apart: front matter is left out, and each heading starts a new
    span unless the span before it holds nothing but headings ("# A" then "## B" stay
    together)."""
    begin = markdown.front_matter_end(text)
    spans: list[tuple[int, int]] = []
    for cut in [*(s for s in heading_starts if s > begin), len(text)]:
        if cut <= begin:
            continue
        if cut < len(text) and _only_headings(text[begin:cut]):
            continue  # only headings so far: they go with what follows
        spans.append((begin, cut))
        begin = cut
    return spans


def _only_headings(piece: str) -> bool:
    return all(not line.strip() or _HEADING_LINE.match(line.strip())
               for line in piece.splitlines())


def _window_end(text: str, pos: int, window: int, limit: int) -> int:
    """Where a window of about `window` characters from `pos` ends, at `limit` at the latest:
    after the last paragraph break in its second half, else the last line break, else the
    last space."""
    end = pos + window
    if end >= limit:
        return limit
    for mark in ("\n\n", "\n", " "):
        found = text.rfind(mark, pos + window // 2, end)
        if found >= 0:
            return found + len(mark)
    return end


def _body_offset(piece: str) -> int:
    """Offset of the first line of `piece` that is neither blank nor a heading."""
    offset = 0
    for line in piece.splitlines(keepends=True):
        stripped = line.strip()
        if stripped and not _HEADING_LINE.match(stripped):
            return offset
        offset += len(line)
    return len(piece) - len(piece.lstrip())


def stored_chunk(idx: int, start: int, end: int, text: str, tokens: int, sha: str,
                 section: str) -> Chunk:
    """A chunk as an index stores it, with its embedding form (prefix, cleaned text) worked
    out again as `split_capped` makes it."""
    body = markdown.clean(text)
    return Chunk(idx=idx, start=start, end=end, text=text, tokens=tokens, sha256=sha,
                 section=section, prefix=_prefix(text, section),
                 indexed="" if body == text else body)


def _prefix(piece: str, path: str) -> str:
    """What goes before a chunk's text when it is embedded: its section path, unless the
    chunk starts with its own heading: then only the headings above it."""
    if piece.lstrip().startswith("#"):
        path = path.rsplit(" > ", 1)[0] if " > " in path else ""
    return path + "\n\n" if path else ""


def _counting_copy(tokenizer: Tokenizer) -> Tokenizer:
    """A copy with no truncation and no padding, so counts are true lengths."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy
