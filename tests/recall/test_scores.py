"""The calibration that maps (cosine, term coverage) to a search result's score."""

from __future__ import annotations

import math

import pytest

from memories.stores.recall.scores import DEFAULT_CALIBRATION, ScoreCalibration, term_coverage


def test_coverage_is_the_share_of_distinct_query_terms_held() -> None:
    assert term_coverage(["sister", "live", "sister"], {"sister", "porto"}) == 0.5
    assert term_coverage(["sister"], ["sister", "live"]) == 1.0
    assert term_coverage([], {"sister"}) == 0.0


def test_a_score_grows_with_cosine_and_with_coverage_and_stays_below_one() -> None:
    c = DEFAULT_CALIBRATION
    assert c.score(0.0, 0.1) < c.score(0.0, 0.6) < c.score(1.0, 0.6) < 1.0
    assert c.score(0.0) < c.score(0.5) < c.score(1.0) < 1.0


def test_the_default_calibration_separates_a_match_from_noise() -> None:
    # A typical LoCoMo evidence turn (cosine 0.6, every query term) against an unrelated turn.
    assert DEFAULT_CALIBRATION.score(1.0, 0.6) > 0.3
    assert DEFAULT_CALIBRATION.score(0.0, 0.05) < 0.001


def test_the_calibration_is_the_logistic_of_its_weights() -> None:
    c = ScoreCalibration(
        bias=-1.0, cosine=2.0, coverage=1.0, lexical_bias=0.0, lexical_coverage=0.0
    )
    assert c.score(1.0, 0.5) == pytest.approx(1 / (1 + math.exp(-1.0)))
    assert c.score(0.3) == 0.5
