"""A model's background cosine and the 0..1 relevance read against it (pure functions)."""

from __future__ import annotations

import math

import pytest

from pocketmcp.core.calibration import PROBES, background, calibrated


def _at_cosine(c: float, n: int) -> list[list[float]]:
    """`n` unit vectors whose pairwise cosines are all `c` (a shared part plus own parts)."""
    shared, own = math.sqrt(c), math.sqrt(1 - c)
    return [[shared] + [own if j == i else 0.0 for j in range(n)] for i in range(n)]


def test_the_background_is_the_cosine_unrelated_vectors_share() -> None:
    assert background(_at_cosine(0.0, 5)) == pytest.approx(0.0)
    assert background(_at_cosine(0.76, 5)) == pytest.approx(0.76)


def test_the_background_is_the_median_pair_so_one_related_pair_does_not_move_it() -> None:
    vectors = _at_cosine(0.3, 6)
    vectors.append(vectors[0])  # a probe that happens to match another one exactly
    assert background(vectors) == pytest.approx(0.3)


def test_the_background_needs_two_vectors() -> None:
    with pytest.raises(ValueError, match="two"):
        background([[1.0, 0.0]])


@pytest.mark.parametrize("base", [0.0, 0.04, 0.76])
def test_the_background_reads_as_zero_and_an_identical_text_as_one(base: float) -> None:
    assert calibrated(base, base) == 0.0
    assert calibrated(base - 0.2, base) == 0.0
    assert calibrated(1.0, base) == pytest.approx(1.0)
    assert calibrated(1.2, base) == 1.0
    halfway = base + (1 - base) / 2
    assert calibrated(halfway, base) == pytest.approx(0.5)


def test_a_crowded_model_is_spread_over_the_same_scale_as_a_spread_one() -> None:
    # e5-small: unrelated about 0.76, a good match about 0.88; MiniLM: about 0.04 and 0.6.
    assert calibrated(0.88, 0.76) == pytest.approx(0.5)
    assert calibrated(0.6, 0.04) == pytest.approx(0.583, abs=0.001)
    assert calibrated(0.8, 0.76) < 0.2 < calibrated(0.8, 0.04)


def test_without_a_background_the_cosine_is_only_clipped() -> None:
    assert calibrated(0.4, 0.0) == pytest.approx(0.4)
    assert calibrated(-0.3, 0.0) == 0.0


def test_the_probes_are_distinct_texts_on_unrelated_topics() -> None:
    assert len(set(PROBES)) == len(PROBES) >= 8
