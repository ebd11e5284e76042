"""The LoCoMo benchmark's data loading and scoring (no embeddings needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.locomo import (
    RecallTally,
    SkipCounts,
    document_text,
    load_conversations,
    parse_evidence,
    scorable_questions,
)

KNOWN = {"D1:1", "D1:2", "D2:1"}


def test_parse_evidence_skips_malformed_and_unknown_entries() -> None:
    valid, skipped = parse_evidence(["D1:1", "D", "D:11:26", "D9:9", "", "D1:1"], KNOWN)
    assert valid == ["D1:1"]
    assert skipped == ["D", "D:11:26", "D9:9", ""]


def test_parse_evidence_splits_joined_ids() -> None:
    assert parse_evidence(["D1:2; D2:1"], KNOWN) == (["D1:2", "D2:1"], [])


def _sample(tmp_path: Path) -> Path:
    data = [
        {
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "I got a dog."},
                    {
                        "speaker": "Bo",
                        "dia_id": "D1:2",
                        "text": "Look!",
                        "blip_caption": "a photo of a cake",
                    },
                ],
            },
            "qa": [
                {"question": "q1", "answer": "a", "evidence": ["D1:1"], "category": 4},
                {"question": "q2", "answer": "a", "evidence": ["D", "D:11:26"], "category": 1},
                {"question": "q3", "answer": "a", "evidence": [], "category": 3},
                {"question": "q4", "evidence": ["D1:2", "D7"], "category": 2},
                {"question": "q5", "evidence": ["D1:1"], "category": 5},
            ],
        }
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    return path


def test_scorer_skips_questions_without_usable_evidence(tmp_path: Path) -> None:
    (conversation,) = load_conversations(_sample(tmp_path))
    skips = SkipCounts()
    kept = scorable_questions(conversation, skips)
    assert [q.text for q in kept] == ["q1", "q4"]  # category 5 is not scored
    assert skips.no_evidence == 2
    assert skips.malformed_entries == ["D", "D:11:26", "D7"]


def test_document_text_adds_the_photo_caption(tmp_path: Path) -> None:
    (conversation,) = load_conversations(_sample(tmp_path))
    assert document_text(conversation.turns[0]) == "Ann: I got a dog."
    assert "a photo of a cake" in document_text(conversation.turns[1])


def test_recall_any_and_all() -> None:
    tally = RecallTally(ks=(1, 2))
    tally.add(1, ["a", "b"], ["a", "x", "b"])
    tally.add(1, ["c"], ["x", "c"])
    assert tally.rate("any", 1) == 50.0 and tally.rate("all", 1) == 0.0
    assert tally.rate("any", 2) == 100.0 and tally.rate("all", 2) == 50.0


def test_tally_refuses_a_question_without_evidence() -> None:
    with pytest.raises(ValueError, match="without evidence"):
        RecallTally().add(1, [], ["a"])
