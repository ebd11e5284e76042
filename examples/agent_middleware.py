"""Memory in a LangChain 1.x agent: ``create_agent`` with ``MemoryMiddleware``.

The checkpointer keeps every message of the thread; the middleware shows the
model only the memory's view of it (here the last two exchanges, tool calls
included) and saves each run's turn after the agent finishes.

Needs the ``agents`` extra: ``pip install -e '.[agents]'`` in the checkout.

    python examples/agent_middleware.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from memories import SQLiteHistory, WindowMemory
from memories.faces.scripts import needs
from memories.testing import ScriptedChatModel

with needs("agents"):
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from memories.integrations.agents import MemoryMiddleware


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"18C and sunny in {city}"


def main(workdir: Path) -> None:
    call = {"name": "weather", "args": {"city": "Lisbon"}, "id": "call-1"}
    model = ScriptedChatModel(  # offline: a scripted tool call, then echoes
        responses=[AIMessage("", tool_calls=[call]), "It's 18C and sunny in Lisbon."]
    )
    memory = MemoryMiddleware(
        lambda thread_id: WindowMemory(
            k=2, chat_memory=SQLiteHistory(workdir / "agent.db", session_id=thread_id)
        )
    )
    agent = create_agent(
        model,
        [weather],
        system_prompt="You are a travel assistant.",
        middleware=[memory],
        checkpointer=InMemorySaver(),
    )
    thread: RunnableConfig = {"configurable": {"thread_id": "maya"}}
    for text in ["What's the weather in Lisbon?", "Thanks!", "What did I ask first?", "Bye."]:
        state = agent.invoke({"messages": [HumanMessage(text)]}, thread)
        print(f"user: {text}\nassistant: {state['messages'][-1].text}")

    print(f"\nThe checkpointed thread holds {len(state['messages'])} messages;")
    print(
        f"the model was last shown {len(model.prompts[-1])} (system + 2 exchanges + the question):"
    )
    for message in model.prompts[-1]:
        print(f"  {message.type}: {message.text[:60]}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
