"""Entities and relations: LangChain's entity and knowledge-graph memories, kept in SQLite.

A ``ConversationChain`` with ``ConversationEntityMemory`` (the import line is
the only change from LangChain's), its summaries in a SQL entity store that
keeps every version; then ``ConversationKGMemory`` with its graph in SQLite,
read back by a new process with the overwritten relation in its history.
Runs offline: scripted models give the replies a real model would; pass any
LangChain chat model as ``llm`` instead.

Needs only the core install (``pip install -e .``).

    python examples/entities_and_relations.py
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

from langchain_classic.chains import ConversationChain
from langchain_classic.memory.prompt import ENTITY_MEMORY_CONVERSATION_TEMPLATE

from memories import ConversationEntityMemory, ConversationKGMemory, SQLiteHistory
from memories.stores.entities.summaries import SQLEntityStore
from memories.stores.entities.triples import SQLEntityGraph
from memories.testing import ScriptedChatModel

TURNS = [
    "Hi, I'm Maya and I live in Lisbon.",
    "My sister Ines lives in Porto.",
    "Big news: I moved to Porto too!",
    "Where do Ines and I live now?",
]

#: What the memory's model replies, in order: the entities of each input (at
#: load), then a summary per entity (at save).
ENTITY_MODEL = [
    "Maya, Lisbon",
    "Maya lives in Lisbon.",
    "Lisbon is where Maya lives.",
    "Ines, Porto",
    "Ines is Maya's sister; she lives in Porto.",
    "Porto is where Ines lives.",
    "Maya, Porto",
    "Maya lived in Lisbon and moved to Porto.",
    "Porto is where Ines and Maya live.",
    "Ines, Maya",
    "Ines is Maya's sister; she lives in Porto.",
    "Maya lived in Lisbon and moved to Porto, where her sister Ines lives.",
]


def entities(workdir: Path) -> None:
    url = f"sqlite:///{workdir / 'memories.db'}"
    memory = ConversationEntityMemory(
        llm=ScriptedChatModel(responses=ENTITY_MODEL, echo=False),
        chat_memory=SQLiteHistory(workdir / "chat.db", session_id="maya"),
        entity_store=SQLEntityStore(url, session_id="maya"),
    )
    chat_model = ScriptedChatModel(
        responses=["Hello Maya!", "Porto is lovely.", "Congratulations!", "Both in Porto."]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConversationChain's own deprecation notice
        chain = ConversationChain(
            llm=chat_model, prompt=ENTITY_MEMORY_CONVERSATION_TEMPLATE, memory=memory
        )
    for text in TURNS:
        result = chain.invoke({"input": text})
        print(f"user: {text}\nassistant: {result['response']}")
    print("\nThe entities the chain's prompt was given on the last turn:")
    for name, summary in result["entities"].items():
        print(f"  {name}: {summary}")
    again = SQLEntityStore(url, session_id="maya")  # another process, the same database
    print("\nEvery version of Maya's summary, oldest first:")
    for version in again.history("Maya"):
        print(f"  {version.value}")


def relations(workdir: Path) -> None:
    url = f"sqlite:///{workdir / 'memories.db'}"

    def memory(replies: list[str]) -> ConversationKGMemory:
        return ConversationKGMemory(
            llm=ScriptedChatModel(responses=replies, echo=False),
            chat_memory=SQLiteHistory(workdir / "chat.db", session_id="kg"),
            kg=SQLEntityGraph(url, session_id="kg"),
        )

    first = memory(
        ["(Maya, lives in, Lisbon)", "(Maya, lives in, Porto)<|>(Maya, moved away from, Lisbon)"]
    )
    first.save_context({"input": "I'm Maya, I live in Lisbon."}, {"output": "Hi Maya!"})
    first.save_context({"input": "I moved from Lisbon to Porto."}, {"output": "Nice!"})

    restarted = memory(["Maya"])  # a new process: the graph is in SQLite, not in its memory
    shown = restarted.load_memory_variables({"input": "Where does Maya live?"})
    print(f"\nWhat the knowledge graph memory shows: {shown['history']}")
    changes = restarted.kg.history("Maya", "Lisbon")
    print(f"Maya -> Lisbon over time: {[c.predicate for c in changes]}")


def main(workdir: Path) -> None:
    entities(workdir)
    relations(workdir)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
