"""Memory in a LangGraph graph: a load node and a save node around the model node.

    python examples/langgraph_graph.py

Needs the ``agents`` extra: ``pip install -e '.[agents]'`` in the checkout.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from memories import WindowMemory
from memories.faces.scripts import needs
from memories.testing import ScriptedChatModel

with needs("agents"):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from memories.integrations.langgraph_nodes import MemoryNodes, MemoryState


def main() -> None:
    model = ScriptedChatModel()  # offline: echoes how much it was shown
    nodes = MemoryNodes(lambda thread_id: WindowMemory(k=1))

    def chatbot(state: MemoryState) -> dict[str, Any]:
        return {"messages": [model.invoke(nodes.prompt(state, system="Be brief."))]}

    graph = StateGraph(MemoryState)
    graph.add_node("load_memory", nodes.load)
    graph.add_node("chatbot", chatbot)
    graph.add_node("save_memory", nodes.save)
    graph.add_edge(START, "load_memory")
    graph.add_edge("load_memory", "chatbot")
    graph.add_edge("chatbot", "save_memory")
    graph.add_edge("save_memory", END)
    app = graph.compile(checkpointer=InMemorySaver())

    thread: RunnableConfig = {"configurable": {"thread_id": "maya"}}
    for text in ["Hi, I'm Maya.", "I live in Lisbon.", "Where do I live?"]:
        state = app.invoke({"messages": [HumanMessage(text)]}, thread)
        print(f"user: {text}\nassistant: {state['messages'][-1].text}")
    print(f"\nThread: {len(state['messages'])} messages; memory window: one exchange.")


if __name__ == "__main__":
    main()
