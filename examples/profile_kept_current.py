"""A user profile kept up to date from the conversation, with its history and a rollback.

After each turn the profile's model answers with JSON Patch operations; the
patch is checked against the schema before it is stored. Offline, a scripted
model gives the patches a real model would; pass ``llm="openai:gpt-4o-mini"``
(or any LangChain model) instead.

Needs only the core install (``pip install -e .``).

    python examples/profile_kept_current.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from memories import ProfileMemory
from memories.testing import ScriptedChatModel

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "city": {"type": "string"},
        "drink": {"type": "string"},
    },
    "additionalProperties": False,
}

TURNS = [
    ("Hi, I'm Maya and I live in Lisbon.", "Hello Maya!"),
    ("I love green tea.", "Green tea it is."),
    ("These days I drink black coffee instead.", "Noted: black coffee."),
]


def patch(*operations: dict[str, Any]) -> AIMessage:
    """A model's reply: a call of the profile's patch tool."""
    call = {"name": "update_profile", "args": {"operations": list(operations)}, "id": "p"}
    return AIMessage("", tool_calls=[call])


def main(workdir: Path) -> None:
    model = ScriptedChatModel(  # offline stand-in for the model that writes the patches
        responses=[
            patch(
                {"op": "add", "path": "/name", "value": "Maya"},
                {"op": "add", "path": "/city", "value": "Lisbon"},
            ),
            patch({"op": "add", "path": "/drink", "value": "green tea"}),
            patch({"op": "replace", "path": "/drink", "value": "black coffee"}),
        ],
        echo=False,
    )
    profile = ProfileMemory(
        schema=SCHEMA,
        llm=model,
        namespace=("users", "maya"),
        url=f"sqlite:///{workdir / 'profiles.db'}",
    )
    for user, reply in TURNS:
        profile.save_context({"input": user}, {"output": reply})
        print(f"user: {user}\n  profile: {json.dumps(profile.get())}")

    print("\nWhat a prompt gets:", profile.load_memory_variables({})["profile"])
    print("\nHistory:")
    for change in profile.history():
        print(f"  v{change.version} {change.kind}: {json.dumps(list(change.patch))}")

    profile.rollback(2)
    print(f"\nAfter rollback(2): {json.dumps(profile.get())}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
