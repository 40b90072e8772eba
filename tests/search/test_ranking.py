"""Fusion of the retrievers' lists and the 0..1 score a match shows (pure functions)."""

from __future__ import annotations

import math

import msgspec
import pytest

from pocketmcp.core.keywords import query_words, reference_bm25
from pocketmcp.search.fuse import (
    Params,
    Stage,
    fuse,
    keyword_relevance,
    relevance,
    truncated,
    vector_relevance,
)
from pocketmcp.search.shape import Shape


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
@pytest.mark.parametrize(("cosine", "bm25"), [(-0.3, 0.0), (0.2, 3.0), (1.0, 400.0), (0.5, None)])
def test_scores_lie_in_the_unit_interval_in_every_mode(mode, cosine, bm25) -> None:
    score = relevance(cosine, bm25, mode, Params(), reference=7.5)
    assert 0.0 <= score <= 1.0


def test_keyword_relevance_is_a_half_for_the_reference_text_whatever_the_scale() -> None:
    # The same evidence (each query word once in an average text) reads the same on an index
    # where BM25 runs to 5 as on one where it runs to 50.
    assert keyword_relevance(5.0, 5.0) == pytest.approx(0.5)
    assert keyword_relevance(50.0, 50.0) == pytest.approx(0.5)
    assert keyword_relevance(0.0, 5.0) == 0.0
    assert keyword_relevance(10.0, 5.0) > keyword_relevance(5.0, 5.0)
    assert vector_relevance(-0.2) == 0.0 and vector_relevance(0.4) == 0.4


def test_the_reference_sums_the_idf_of_the_words_searched_for() -> None:
    kept = query_words("rare words here", {"rare": 1, "word": 10}, total=1000)
    assert [w for w, _ in kept] == ["rare", "words"]
    assert reference_bm25([n for _, n in kept], 1000) == pytest.approx(
        sum(math.log((1000 - n + 0.5) / (n + 0.5)) for n in (1, 10)))


def test_hybrid_weighs_the_two_relevances_by_the_vector_weight() -> None:
    params = Params(vector_weight=0.75)
    assert relevance(0.8, 5.0, "hybrid", params, 5.0) == pytest.approx(0.75 * 0.8 + 0.25 * 0.5)
    assert relevance(0.8, None, "hybrid", params, 5.0) == pytest.approx(0.6)


def test_relevance_fusion_ranks_by_the_shown_score() -> None:
    stage = Stage(vector={1: 0.9, 2: 0.3}, keyword={2: 20.0, 3: 1.0},
                  doc_of={1: 10, 2: 20, 3: 30}, keyword_ref=10.0)
    params = Params(normalise="relevance", vector_weight=0.5)
    scores = fuse(stage, "hybrid", params, unique_docs=False)
    for chunk, score in scores.items():
        assert score == pytest.approx(relevance(stage.vector.get(chunk), stage.keyword.get(chunk),
                                                "hybrid", params, 10.0))


def test_a_shallower_depth_keeps_the_heads_of_the_lists() -> None:
    stage = Stage(vector={1: 0.9, 2: 0.8, 3: 0.1}, keyword={3: 9.0, 1: 1.0},
                  doc_of={1: 1, 2: 2, 3: 3}, doc_keyword={3: 5.0, 1: 4.0}, first_chunk={3: 3, 1: 1})
    head = truncated(stage, 1)
    assert head.vector == {1: 0.9} and head.keyword == {3: 9.0}
    assert head.doc_keyword == {3: 5.0} and head.first_chunk == {3: 3}


def test_cosines_are_read_against_the_stage_background_when_calibrated() -> None:
    stage = Stage(vector={1: 0.88, 2: 0.80}, keyword={2: 10.0}, doc_of={1: 10, 2: 20},
                  keyword_ref=10.0, vector_background=0.76)
    calibrated_scores = fuse(stage, "hybrid", Params(), unique_docs=False)
    assert calibrated_scores[1] == pytest.approx(0.5 * 0.5)
    assert calibrated_scores[2] == pytest.approx(0.5 * (0.04 / 0.24) + 0.5 * 0.5)
    raw = fuse(stage, "hybrid", Params(calibrated=False), unique_docs=False)
    assert raw[1] == pytest.approx(0.5 * 0.88)
    assert relevance(0.88, None, "vector", Params(), 1.0, 0.76) == pytest.approx(0.5)
    assert vector_relevance(0.7, 0.76) == 0.0


def test_a_documents_mean_meaning_weighs_in_when_the_stage_has_it() -> None:
    # "a" has the best chunk by meaning, "b" the better mean over all its chunks.
    stage = Stage(vector={1: 0.80, 2: 0.75}, keyword={}, doc_of={1: 10, 2: 20})
    params = Params(vector_weight=1.0, calibrated=False)
    alone = fuse(stage, "hybrid", params, True)
    assert max(alone, key=alone.__getitem__) == 1
    means = msgspec.structs.replace(stage, doc_vector={10: 0.20, 20: 0.60})
    mixed = fuse(means, "hybrid", params, True)
    assert max(mixed, key=mixed.__getitem__) == 2
    assert mixed[2] == pytest.approx(0.7 * 0.75 + 0.3 * 0.60)
    # Chunks are ranked as before: the mean only concerns one match per document.
    assert fuse(means, "hybrid", params, False) == fuse(stage, "hybrid", params, False)


def test_the_index_shape_says_how_documents_rank_by_their_words() -> None:
    params = Params()
    abstracts, pages = Shape(documents=1000, chunks=3100), Shape(documents=80, chunks=1000)
    assert not abstracts.best_chunk(params) and pages.best_chunk(params)
    assert abstracts.rule(params) == ("documents ranked by their whole document for words "
                                      "(3.1 chunks per document < 6)")
    assert "best chunk" in pages.rule(params) and "12.5 chunks per document >= 6" in (
        pages.rule(params))
    assert not Shape(documents=0, chunks=0).best_chunk(params)  # an empty index
    assert not pages.best_chunk(Params(best_chunk_from=20.0))
