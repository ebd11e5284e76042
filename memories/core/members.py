"""The members of a memory that hold data, found by what their classes declare.

The command line and the inspector both walk a memory's leaves to find its
chat logs, its histories and its searchable documents, and both look at them
without writing: written once here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memories.core.base import ChatMemory, keeps_chat_log
from memories.core.combined import leaves_of
from memories.core.langchain import LangChainBaseMemory
from memories.kernel.capabilities import capabilities_of
from memories.stores.history.base import ChatHistory
from memories.stores.history.readonly import ReadOnlyView

__all__ = ["chat_memories", "distinct_histories", "read_only", "searchable_memories"]


def chat_memories(memory: LangChainBaseMemory) -> list[ChatMemory]:
    """The memories in ``memory`` that keep a chat log (declared by their class)."""
    return [m for m in leaves_of(memory) if keeps_chat_log(m)]


def searchable_memories(memory: LangChainBaseMemory) -> list[Any]:
    """The memories in ``memory`` that keep searchable documents (vector, examples, collection)."""
    return [m for m in leaves_of(memory) if capabilities_of(m).searchable]


def distinct_histories(memory: LangChainBaseMemory) -> list[ChatHistory]:
    """The histories of ``memory``'s chat memories, each once (two configs naming one are one)."""
    found: dict[str, ChatHistory] = {}
    for member in chat_memories(memory):
        history = member.chat_memory
        try:
            key = json.dumps(history.to_config(), sort_keys=True)
        except NotImplementedError:
            key = str(id(history))
        found.setdefault(key, history)
    return list(found.values())


@contextmanager
def read_only(memory: LangChainBaseMemory) -> Iterator[None]:
    """Within the block, the memory's chat memories see their histories read-only.

    Showing a memory brings its derived state up to date (a token buffer saves its
    window); in the block that state stays in the views, so looking never writes.
    """
    members = [(m, m.chat_memory) for m in chat_memories(memory)]
    try:
        for member, history in members:
            if isinstance(history, ChatHistory):
                member.chat_memory = ReadOnlyView(history)
        yield
    finally:
        for member, history in members:
            member.chat_memory = history
