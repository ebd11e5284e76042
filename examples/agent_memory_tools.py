"""An agent that remembers a user across threads with memory tools, and never mixes users.

The agent gets ``manage_memory`` and ``search_memory`` (langmem's names) over
a collection memory whose namespace is ``("memories", "{user_id}")``: each
run's ``user_id`` picks the namespace, the model never does. Offline, a
scripted model makes the tool calls a real model would; pass any LangChain
chat model with tool calling instead.

Needs the ``agents`` and ``chroma`` extras: ``pip install -e '.[agents,chroma]'`` in the checkout.

    python examples/agent_memory_tools.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from memories import CollectionMemory, memory_tools
from memories.faces.scripts import needs
from memories.testing import ScriptedChatModel

with needs("agents"):
    from langchain.agents import create_agent


def tool_call(name: str, number: int, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{number}"}])


def main(workdir: Path) -> None:
    memory = CollectionMemory(
        namespace=("memories", "{user_id}"),
        path=str(workdir / "chroma"),  # embedded Chroma, offline MiniLM
        url=f"sqlite:///{workdir / 'memories.db'}",  # the ledger: versions, compare-and-set
    )
    model = ScriptedChatModel(  # offline stand-in for a tool-calling model
        responses=[
            tool_call("manage_memory", 1, content="Alice is allergic to peanuts"),
            AIMessage("Got it, no peanuts."),
            tool_call("search_memory", 2, query="food allergies"),
            AIMessage("Skip the satay: you're allergic to peanuts."),
            tool_call("search_memory", 3, query="food allergies"),
            AIMessage("I don't know of any allergy."),
        ],
        echo=False,
    )
    agent = create_agent(model, memory_tools(memory))

    def ask(user: str, thread: str, text: str) -> None:
        config = {"configurable": {"user_id": user, "thread_id": thread}}
        result = agent.invoke({"messages": [("user", text)]}, config)
        for message in result["messages"]:
            if isinstance(message, ToolMessage):
                print(f"  [{message.name}] {message.content}")
        print(f"[{user}, {thread}] assistant: {result['messages'][-1].content}")

    ask("alice", "thread-1", "I'm allergic to peanuts.")
    ask("alice", "thread-2", "What should I avoid at the Thai place?")
    ask("bob", "thread-3", "What should I avoid at the Thai place?")

    alice = CollectionMemory(namespace=("memories", "alice"), path=memory.path, url=memory.url)
    print("Alice's memories:", json.dumps([r.content for r in alice.list()]))


if __name__ == "__main__":
    with needs("chroma"), tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
