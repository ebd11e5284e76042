"""Procedural memory: an agent's instructions, revised from user feedback, with approval.

The user's feedback makes the model reflect on the recent conversations and
propose a revision of the instructions; with ``approval=True`` it waits until
someone approves it. A pinned passage can never be removed by the model.
Offline, a scripted model gives the reflection a real model would; pass
``llm="openai:gpt-4o-mini"`` (or any LangChain model) instead.

Needs only the core install (``pip install -e .``).

    python examples/instructions_from_feedback.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from memories import InstructionsMemory
from memories.testing import ScriptedChatModel

RULE = "Never share a customer's address."
REVISED = f"You are a support agent for a bike shop. {RULE} Answer in at most three sentences."


def main(workdir: Path) -> None:
    revision = {"prompt": "main", "text": REVISED, "reason": "users found answers too long"}
    model = ScriptedChatModel(  # offline stand-in for the reflecting model
        responses=[json.dumps({"reflection": "answers run long", "revisions": [revision]})],
        echo=False,
    )
    memory = InstructionsMemory(
        prompts=f"You are a support agent for a bike shop. {RULE}",
        pinned=[RULE],
        llm=model,
        approval=True,
        namespace=("agents", "support"),
        url=f"sqlite:///{workdir / 'memories.db'}",
    )
    memory.save_context(
        {"input": "How do I fix a flat?"},
        {"output": "There are many ways to think about flats. First, history..."},
    )
    memory.feedback(score=0.2, comment="Way too long, I just wanted the steps.")

    proposal = memory.proposal()
    assert proposal is not None
    print(f"Proposed: {proposal.prompts['main']}")
    print(f"Because: {proposal.reasons['main']}")
    print(f"In use until approved: {memory.load_memory_variables({})['instructions']}")
    memory.approve()
    print(f"After approve(): {memory.load_memory_variables({})['instructions']}")
    for version in memory.history():
        print(f"  v{version.version} {version.kind}, from {len(version.feedback)} feedback item(s)")
    memory.rollback(0)
    print(f"After rollback(0): {memory.prompt()}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
