"""Two notebooks and a window, as OpenGPTs' long-term memory post describes for a game master.

A text adventure's game master keeps two profile-style notebooks beside the
last exchanges: a **character sheet** written once, from the player's first
message, then frozen (``policy="once"``), and a **quest log** updated after
every turn (``policy="turn"``). A ``CombinedMemory`` gives the prompt all
three. Offline, scripted models write the notebooks and play the game master
as real models would; pass ``llm="openai:gpt-4o-mini"`` (or any LangChain
model) instead.

Needs only the core install (``pip install -e .``).

    python examples/notebooks_adventure.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from langchain_core.prompts import ChatPromptTemplate

from memories import CombinedMemory, ProfileMemory, WindowMemory
from memories.testing import ScriptedChatModel

SHEET = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "class": {"type": "string"}},
    "additionalProperties": False,
}
QUESTS = {
    "type": "object",
    "properties": {"done": {"type": "array"}, "open": {"type": "array"}},
    "additionalProperties": False,
}
TURNS = [
    "I am Mira, a wandering bard.",
    "I accept the miller's request to find his lost dog.",
    "I follow the tracks into the forest and find the dog.",
    "Actually I'd rather be called a sorceress now.",
]
GAME_MASTER = [
    "Welcome, Mira the bard. The village of Brenn lies ahead.",
    "The miller thanks you; his dog vanished near the forest.",
    "You find the dog asleep under an oak. Quest complete!",
    "Your sheet says bard, and a sheet is written in ink.",
]


def patches(*updates: list[dict[str, object]]) -> ScriptedChatModel:
    """A notebook's model: replies one JSON patch per update (offline stand-in)."""
    return ScriptedChatModel(responses=[json.dumps(u) for u in updates], echo=False)


def main(workdir: Path) -> None:
    url = f"sqlite:///{workdir / 'notebooks.db'}"
    sheet = ProfileMemory(
        key="character", memory_key="character", schema=SHEET, policy="once",
        update_method="json", url=url, namespace=("players", "mira"),
        llm=patches([{"op": "add", "path": "/name", "value": "Mira"},
                     {"op": "add", "path": "/class", "value": "bard"}]),
    )  # fmt: skip
    quest_log = ProfileMemory(
        key="quest_log", memory_key="quest_log", schema=QUESTS, policy="turn",
        update_method="json", url=url, namespace=("players", "mira"),
        llm=patches(
            [{"op": "add", "path": "/open", "value": []},
             {"op": "add", "path": "/done", "value": []}],
            [{"op": "add", "path": "/open/-", "value": "find the miller's dog"}],
            [{"op": "remove", "path": "/open/0"},
             {"op": "add", "path": "/done/-", "value": "found the miller's dog"}],
            [],
        ),
    )  # fmt: skip
    memory = CombinedMemory(memories=[sheet, quest_log, WindowMemory(k=1, memory_key="history")])
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are the game master.\nCharacter: {character}\nQuests: {quest_log}"),
            ("system", "Last exchange:\n{history}"),
            ("human", "{input}"),
        ]
    )
    game_master = ScriptedChatModel(responses=GAME_MASTER, echo=False)
    for line in TURNS:
        variables = memory.load_memory_variables({"input": line})
        reply = game_master.invoke(prompt.invoke({**variables, "input": line})).text
        memory.save_context({"input": line}, {"output": reply})
        print(f"player: {line}\n  game master: {reply}")
        print(f"  sheet: {json.dumps(sheet.get())}  quests: {json.dumps(quest_log.get())}")
    shown = game_master.prompts[-1][0].text
    print("\nThe last prompt's system message:\n" + shown)
    calls = [len(m.llm.prompts) for m in (sheet, quest_log)]  # type: ignore[union-attr]
    print(f"Notebook model calls: character sheet {calls[0]} (written once), quest log {calls[1]}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
