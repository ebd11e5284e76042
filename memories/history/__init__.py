"""History backends: where a session's messages and each memory's state live."""

from __future__ import annotations

from memories.history.base import ChatHistory, Entry
from memories.history.langchain import LangChainHistory
from memories.history.memory import InMemoryHistory
from memories.history.sql import SQLHistory, SQLiteHistory

__all__ = [
    "ChatHistory",
    "Entry",
    "InMemoryHistory",
    "LangChainHistory",
    "SQLHistory",
    "SQLiteHistory",
]
