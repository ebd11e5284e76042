"""History backends: where a session's messages and each memory's state live."""

from __future__ import annotations

from memories.history.base import Changes, ChatHistory, MessageRef
from memories.history.langchain import LangChainHistory
from memories.history.memory import InMemoryHistory
from memories.history.records import REMOVE_ALL_MESSAGES, Edit, Entry
from memories.history.sql import SQLHistory, SQLiteHistory

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
