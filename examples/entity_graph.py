"""A temporal entity graph kept from a conversation: contradictions closed, a merge, a question.

After each turn the model answers with graph operations (entities, typed
relations, ends, merges); they are checked against the graph and applied in
one transaction. A contradicted fact is closed, not overwritten, so the graph
can be read as it stood before. Offline, a scripted model gives the
operations a real model would; pass ``llm="openai:gpt-4o-mini"`` (or any
LangChain model) instead, or no ``llm`` for the rule-based extractor.

Needs the ``chroma`` extra: ``pip install -e '.[chroma]'`` in the checkout.

    python examples/entity_graph.py
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memories import EntityMemory
from memories.faces.scripts import needs
from memories.testing import ScriptedChatModel

TURNS = [
    ("I live in Lisbon. My sister Melanie lives in Paris.", "Lovely cities."),
    ("Mel just got a job at the Louvre.", "Congratulations to her!"),
    ("I moved to Porto last week.", "Enjoy Porto!"),
    ("Oh, and Mel is Melanie, of course.", "Got it."),
]


def reply(*operations: dict[str, Any]) -> str:
    """A model's reply: the operations as a JSON array."""
    return json.dumps(list(operations))


def main(workdir: Path) -> None:
    model = ScriptedChatModel(  # offline stand-in for the model that proposes the operations
        responses=[
            reply(
                {"op": "entity", "name": "Melanie", "type": "person", "summary": "user's sister"},
                {"op": "relate", "subject": "User", "predicate": "lives_in", "object": "Lisbon"},
                {"op": "relate", "subject": "User", "predicate": "sister", "object": "Melanie"},
                {"op": "relate", "subject": "Melanie", "predicate": "lives_in", "object": "Paris"},
            ),
            reply({"op": "relate", "subject": "Mel", "predicate": "works_at", "object": "Louvre"}),
            reply(
                {
                    "op": "relate",
                    "subject": "User",
                    "predicate": "lives_in",
                    "object": "Porto",
                    "replaces": "all",  # or the aliases shown: ["r1"]
                }
            ),
            reply({"op": "merge", "id": "Mel", "into": "Melanie", "reason": "Mel is Melanie"}),
        ],
        echo=False,
    )
    memory = EntityMemory(
        llm=model, namespace=("users", "ana"), url=f"sqlite:///{workdir / 'graph.db'}"
    )
    for user, answer in TURNS[:2]:
        memory.save_context({"input": user}, {"output": answer})
    before = datetime.now(UTC)
    for user, answer in TURNS[2:]:
        memory.save_context({"input": user}, {"output": answer})

    print("Current facts:")
    for relation in memory.relations():
        print(f"  {relation.text()}")
    print("Closed facts:")
    for relation in memory.history():
        print(f"  {relation.text()} ({relation.ended}, said in: {relation.turns[0][0].text!r})")
    print("Before the move:", [r.text() for r in memory.relations(as_of=before)])
    melanie = memory.entity("Mel")
    assert melanie is not None
    print(f"Mel is {melanie.name}, also known as {list(melanie.aliases)}")
    question = "Where does my sister live and work?"
    print(f"\n{question}\n{memory.load_memory_variables({'input': question})['entities']}")


if __name__ == "__main__":
    with needs("chroma"), tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
