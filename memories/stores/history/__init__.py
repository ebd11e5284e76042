"""History backends: where a session's messages and each memory's state live."""

from __future__ import annotations

from memories.stores.history.base import Changes, ChatHistory, MessageRef
from memories.stores.history.langchain import LangChainHistory
from memories.stores.history.memory import InMemoryHistory
from memories.stores.history.records import REMOVE_ALL_MESSAGES, Edit, Entry
from memories.stores.history.sql import SQLHistory, SQLiteHistory

__all__ = [
    "REMOVE_ALL_MESSAGES",
    "Changes",
    "ChatHistory",
    "Edit",
    "Entry",
    "InMemoryHistory",
    "LangChainHistory",
    "MessageRef",
    "SQLHistory",
    "SQLiteHistory",
]
