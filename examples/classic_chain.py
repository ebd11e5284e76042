"""Memory in a classic chain: ConversationChain with a token buffer kept in SQLite.

The only change from LangChain's own example is the import line. Runs
offline: the replies come from a scripted model; pass any LangChain chat
model as ``llm`` instead.

Needs only the core install (``pip install -e .``).

    python examples/classic_chain.py
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

from langchain_classic.chains import ConversationChain

from memories import ConversationTokenBufferMemory, SQLiteHistory
from memories.testing import ScriptedChatModel


def main(workdir: Path) -> None:
    llm = ScriptedChatModel(
        responses=["Hello Maya!", "Lisbon is lovely.", "Octopuses, in tide pools.", "You're Maya."]
    )
    memory = ConversationTokenBufferMemory(
        max_token_limit=60, chat_memory=SQLiteHistory(workdir / "chat.db", session_id="maya")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConversationChain's own deprecation notice
        chain = ConversationChain(llm=llm, memory=memory)

    for text in [
        "Hi, I'm Maya.",
        "I live in Lisbon.",
        "I study octopuses.",
        "Who am I?",
    ]:
        reply = chain.invoke({"input": text})["response"]
        print(f"user: {text}\nassistant: {reply}")

    print("\nThe token buffer shows the model only the newest turns within 60 tokens:")
    print(memory.buffer_as_str)
    everything = SQLiteHistory(workdir / "chat.db", session_id="maya").messages
    print(f"\nThe SQLite log still holds all {len(everything)} messages.")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
