"""Memory in an LCEL runnable, one memory per session, from one config.

``with_memory`` loads the session's memory before the call and saves the
turn after it; ``memory_factory`` turns one config into a memory per
session id.

Needs only the core install (``pip install -e .``).

    python examples/lcel_per_session.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from memories import memory_factory, with_memory
from memories.testing import ScriptedChatModel


def main(workdir: Path) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are helpful."), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    model = ScriptedChatModel()  # offline: echoes how many messages it was shown
    config = {
        "type": "window",
        "k": 2,
        "return_messages": True,
        "history": {"type": "sqlite", "path": str(workdir / "chat.db")},
    }
    chain = with_memory(prompt | model, memory_factory(config))

    for session, text in [
        ("alice", "Hi, I'm Alice."),
        ("bob", "Hi, I'm Bob."),
        ("alice", "I like hiking."),
        ("alice", "What do I like?"),
        ("bob", "Who am I?"),
    ]:
        reply = chain.invoke({"input": text}, config={"configurable": {"session_id": session}})
        print(f"[{session}] user: {text}\n[{session}] assistant: {reply.content}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
