"""How well an index serves its own documents, with no labels: questions made from the
documents themselves, searched in each mode (`pocketmcp check-search`, the `status` tool's
`check_search`).

A document gives questions from what names it: its title, its front matter's `title` and
`aliases`, its section headings (`core.chunking.sections`) and the first sentence of its
body. No language model is involved. A question whose text names several documents (a
heading such as "Installation" in many pages) is dropped: it has no one right answer. The
answer to a question is the document it came from; hit@1, hit@5 and MRR@10 say where that
document ranks, one match per document, as `pocketmcp eval` measures. Questions are taken
round-robin over documents (a fixed seed), so a few long pages do not make up the set.

Each question is retrieved once (both lists, `search.retrieve`) and fused for every
mode and every fusion weight of `WEIGHTS` (`search.fuse`): the weight with the best
MRR@10 is the one suggested for the index, shown beside the one in use.

What the figures measure is said with them: how many chunks still wait for their vectors
(found by keywords alone until embedded: the vector and hybrid figures leave them out), and
whether there are enough questions (`MIN_QUESTIONS`) for a weight to be suggested at all.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Sequence

import msgspec

from pocketmcp.core.chunking import sections
from pocketmcp.core.metrics import hit_at, mrr_at
from pocketmcp.core.notes import split_front_matter
from pocketmcp.plans import Reading
from pocketmcp.search.fuse import DEFAULT_PARAMS, Mode, Params, Stage, fuse, ranked
from pocketmcp.search.retrieve import retrieve
from pocketmcp.search.shape import shape_of
from pocketmcp.store.api import Listing

MAX_QUESTIONS = 1000
MIN_QUESTIONS = 10  # fewer say too little to choose a fusion weight by
WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
_MIN_WORDS, _MAX_WORDS = 2, 24
_SENTENCE = re.compile(r"(?s)^(.+?[.!?])(?:\s|$)")
_GENERIC = frozenset((
    "overview", "introduction", "summary", "usage", "examples", "example", "notes",
    "installation", "install", "configuration", "setup", "reference", "index", "contents",
    "license", "changelog", "faq", "readme", "todo", "options", "parameters", "returns",
    "arguments", "see", "also", "next", "steps",
))


class Question(msgspec.Struct, frozen=True):
    text: str
    doc_id: int
    kind: str  # title, alias, heading, sentence


class ModeFigures(msgspec.Struct, frozen=True):
    hit1: float
    hit5: float
    mrr10: float


class SelfCheck(msgspec.Struct, frozen=True, kw_only=True):
    questions: int
    documents: int
    kinds: dict[str, int]
    modes: dict[str, ModeFigures]
    weight_in_use: float
    weight_suggested: float
    hybrid_by_weight: dict[str, ModeFigures]
    seconds: float
    examples: list[str]
    chunks_waiting: int = 0  # chunks without their vectors yet: vector search misses them
    rule: str = ""  # how documents are ranked by their words in this index (search/shape.py)


def _clean(text: str) -> str:
    text = re.sub(r"[`*_#>\[\]]+", " ", text)
    return " ".join(text.split())


def _usable(text: str) -> bool:
    words = text.split()
    if not _MIN_WORDS <= len(words) <= _MAX_WORDS:
        return False
    return not all(w.lower().strip(":.") in _GENERIC for w in words)


def questions_of(doc_id: int, title: str, properties: str, content: str) -> list[Question]:
    """The questions one document gives, in order of kind."""
    out: list[Question] = []
    seen: set[str] = set()

    def add(text: str, kind: str) -> None:
        text = _clean(text)
        if _usable(text) and text.lower() not in seen:
            seen.add(text.lower())
            out.append(Question(text, doc_id, kind))

    fields = json.loads(properties or "{}") if properties else {}
    add(title, "title")
    if isinstance(fields, dict):
        if isinstance(fields.get("title"), str):
            add(fields["title"], "title")
        for key in ("aliases", "alias"):
            value = fields.get(key)
            for alias in (value if isinstance(value, list) else [value]):
                if isinstance(alias, str):
                    add(alias, "alias")
    _, paths = sections(content)
    for path in paths:
        add(path.rsplit(" > ", 1)[-1], "heading")
    _, start = split_front_matter(content)
    body = "\n".join(line for line in content[start:].splitlines()
                     if line.strip() and not line.lstrip().startswith(("#", "---", "|", "```",
                                                                       "!", "<", "-", "*")))
    first = _SENTENCE.match(body.strip())
    if first:
        add(" ".join(first.group(1).split()[:_MAX_WORDS]), "sentence")
    return out


def make_questions(reader: Listing, most: int, seed: int = 7) -> tuple[list[Question], int]:
    """Up to `most` questions round-robin over the documents (blocking); and how many
    documents gave any."""
    ids = [d for d, _ in reader.all_external_ids()]
    random.Random(seed).shuffle(ids)
    per_doc: list[list[Question]] = []
    count: dict[str, set[int]] = {}
    budget = most * 3  # documents read: enough for `most` questions after the dropping
    for doc_id in ids[:budget]:
        row = reader.document(doc_id)
        content = reader.content(doc_id)
        if row is None or content is None:
            continue
        found = questions_of(doc_id, row.title, row.properties, content)
        for q in found:
            count.setdefault(q.text.lower(), set()).add(doc_id)
        per_doc.append(found)
    per_doc = [[q for q in qs if len(count[q.text.lower()]) == 1] for qs in per_doc]
    per_doc = [qs for qs in per_doc if qs]
    out: list[Question] = []
    for round_ in range(max((len(qs) for qs in per_doc), default=0)):
        for qs in per_doc:
            if round_ < len(qs):
                out.append(qs[round_])
                if len(out) == most:
                    return out, len(per_doc)
    return out, len(per_doc)


def _figures(ranks: Sequence[list[int]], answers: Sequence[int]) -> ModeFigures:
    n = max(1, len(answers))
    rel = [{str(a): 1} for a in answers]
    runs = [[str(d) for d in r] for r in ranks]
    return ModeFigures(
        hit1=round(sum(hit_at(r, g, 1) for r, g in zip(runs, rel, strict=True)) / n, 4),
        hit5=round(sum(hit_at(r, g, 5) for r, g in zip(runs, rel, strict=True)) / n, 4),
        mrr10=round(sum(mrr_at(r, g) for r, g in zip(runs, rel, strict=True)) / n, 4))


async def check(reading: Reading, *, most: int = 200, params: Params = DEFAULT_PARAMS
                ) -> SelfCheck:
    """Make up to `most` questions from the index's documents and measure each mode on
    them, and the hybrid mode at every weight of `WEIGHTS`."""
    started = time.perf_counter()
    made, documents = await reading.index.run(lambda r: make_questions(r, most))
    waiting = await reading.index.run(lambda r: r.waiting_count())
    answers = [q.doc_id for q in made]
    ranks: dict[str, list[list[int]]] = {"vector": [], "keyword": []}
    by_weight: dict[float, list[list[int]]] = {w: [] for w in WEIGHTS}
    in_use: list[list[int]] = []
    for q in made:
        stage = (await retrieve(reading, q.text, mode="hybrid", depth=params.depth,
                                params=params, unique_docs=True, fallback=False)).stage

        def docs(mode: Mode, tuned: Params, stage: Stage = stage) -> list[int]:
            best = ranked(stage, fuse(stage, mode, tuned, True), unique_docs=True, most=10)
            return [stage.doc_of[c] for c in best]

        for mode in ("vector", "keyword"):
            ranks[mode].append(docs(mode, params))
        for w in WEIGHTS:
            by_weight[w].append(docs("hybrid", msgspec.structs.replace(params, vector_weight=w)))
        in_use.append(docs("hybrid", params))
    figures = {w: _figures(r, answers) for w, r in by_weight.items()}
    current = _figures(in_use, answers)
    best = max(WEIGHTS, key=lambda w: (figures[w].mrr10, figures[w].hit1,
                                       -abs(w - params.vector_weight)))
    if (figures[best].mrr10, figures[best].hit1) <= (current.mrr10, current.hit1):
        best = params.vector_weight  # no weight does better than the one in use
    kinds: dict[str, int] = {}
    for q in made:
        kinds[q.kind] = kinds.get(q.kind, 0) + 1
    return SelfCheck(
        questions=len(made), documents=documents, kinds=kinds,
        modes={"hybrid": current, "vector": _figures(ranks["vector"], answers),
               "keyword": _figures(ranks["keyword"], answers)},
        weight_in_use=params.vector_weight, weight_suggested=best,
        hybrid_by_weight={f"{w:.1f}": f for w, f in figures.items()},
        seconds=round(time.perf_counter() - started, 2),
        examples=[q.text for q in made[:5]], chunks_waiting=waiting,
        rule=(await shape_of(reading.index)).rule(params))
