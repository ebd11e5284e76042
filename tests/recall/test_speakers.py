"""Speaker keys: a query naming one speaker favours that speaker's turns."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memories.errors import ConfigError
from memories.stores.recall import (
    RecallConfig,
    ScoredId,
    boost_speakers,
    named_speakers,
    rank_candidates,
    speaker_key,
)

KNOWN = {"melanie", "caroline", "mary ann"}


def test_a_name_is_found_as_a_whole_word_whatever_its_case() -> None:
    assert named_speakers("What did MELANIE paint?", KNOWN) == {"melanie"}
    assert named_speakers("What did Melanies paint?", KNOWN) == frozenset()


def test_an_owner_is_not_taken_for_the_speaker() -> None:
    assert named_speakers("What is Caroline's identity?", KNOWN) == frozenset()
    assert named_speakers("What did Melanie think of Caroline\u2019s plan?", KNOWN) == {"melanie"}


def test_a_two_word_name_is_found() -> None:
    assert named_speakers("Where does Mary Ann live?", KNOWN) == {"mary ann"}


def test_only_the_named_speakers_turns_gain() -> None:
    scored = [ScoredId("a", 1.0), ScoredId("b", 0.8)]
    speakers = {"a": frozenset({"caroline"}), "b": frozenset({"melanie"})}
    boosted = boost_speakers(scored, speakers, frozenset({"melanie"}), weight=0.5)
    assert boosted == [ScoredId("a", 1.0), ScoredId("b", pytest.approx(1.2))]


def test_two_named_speakers_favour_neither() -> None:
    scored = [ScoredId("a", 1.0), ScoredId("b", 0.8)]
    speakers = {"a": frozenset({"caroline"}), "b": frozenset({"melanie"})}
    assert boost_speakers(scored, speakers, frozenset(KNOWN), weight=1.0) == scored


def test_rank_candidates_puts_the_named_speakers_turn_first() -> None:
    config = replace(RecallConfig(), speaker_weight=1.0, neighbour_weight=0.0)
    dense = [ScoredId("a", 0.9), ScoredId("b", 0.8), ScoredId("c", 0.1)]
    speakers = {"a": frozenset({"caroline"}), "b": frozenset({"melanie"})}
    plain = rank_candidates(config, dense=dense, lexical=dense, limit=2)
    named = rank_candidates(
        config, dense=dense, lexical=dense, speakers=speakers, named=frozenset({"melanie"}), limit=2
    )
    assert [s.id for s in plain] == ["a", "b"]
    assert [s.id for s in named] == ["b", "a"]


def test_speaker_keys_fold_case_and_space() -> None:
    assert speaker_key("  Mary Ann ") == "mary ann"


@pytest.mark.parametrize("weight", [-0.5, 101.0])
def test_a_speaker_weight_out_of_range_is_refused_naming_it(weight: float) -> None:
    with pytest.raises(ConfigError, match="speaker_weight"):
        RecallConfig(speaker_weight=weight)
