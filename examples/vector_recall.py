"""Vector recall over past sessions: what the user said weeks ago, found by meaning.

Each turn is a document in an embedded Chroma folder, embedded offline
(MiniLM); a new session recalls the turns that match its question, whatever
session they came from.

Needs the ``chroma`` extra: ``pip install -e '.[chroma]'`` in the checkout.

    python examples/vector_recall.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from memories import VectorMemory
from memories.faces.scripts import needs

PAST_SESSIONS = {
    "monday": [
        ("My sister Ines lives in Porto.", "Nice, Porto is lovely."),
        ("I'm allergic to peanuts.", "I'll keep that in mind."),
    ],
    "tuesday": [
        ("I'm training for a half marathon in May.", "Good luck with the training!"),
        ("My laptop is a ThinkPad from 2019.", "A classic."),
    ],
}


def main(workdir: Path) -> None:
    where = {"path": str(workdir / "chroma"), "namespace": ("users", "maya")}
    for session, turns in PAST_SESSIONS.items():
        memory = VectorMemory(session_id=session, **where)
        for user, reply in turns:
            memory.save_context({"input": user}, {"output": reply})

    today = VectorMemory(session_id="friday", k=1, **where)  # a new session, a new process
    for question in ["Where does my sister live?", "Any food I should avoid?", "What race?"]:
        recalled = today.load_memory_variables({"input": question})["history"]
        print(f"{question}\n  recalled: {recalled.splitlines()[0]}")

    # A score is calibrated: about the probability that the turn answers the query, the
    # same in every search. Two significant digits: a poor match reads 3e-05, not 0.00.
    print("\nOnly Tuesday's turns, with scores:")
    for result in today.search("half marathon training", k=2, filter={"session": "tuesday"}):
        print(f"  {result.score:<7.2g} {result.text.splitlines()[0]}")
    today.close()


if __name__ == "__main__":
    with needs("chroma"), tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
