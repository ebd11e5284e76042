"""memories: pluggable conversation memories for LLM applications.

A drop-in for LangChain's classic memory classes: the same constructor
arguments and outputs, under short names (``BufferMemory``) and under
LangChain's (``ConversationBufferMemory``), so migrating changes one import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memories.base import BaseMemory, ChatMemory
from memories.buffer import BufferMemory, StringBufferMemory
from memories.combined import CombinedMemory, ReadOnlySharedMemory, SimpleMemory
from memories.config import create_history, create_memory, load_config, register_memory
from memories.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    InvalidInputError,
    InvalidProfileError,
    LLMError,
    MemoriesError,
    MissingDependencyError,
    MissingKeyError,
    ModelFileError,
)
from memories.history import (
    ChatHistory,
    Entry,
    InMemoryHistory,
    LangChainHistory,
    SQLHistory,
    SQLiteHistory,
)
from memories.keys import get_prompt_input_key
from memories.profile import ProfileMemory, ProfileStore
from memories.runnable import with_memory
from memories.summary import SummaryBufferMemory, SummaryMemory
from memories.token_buffer import TokenBufferMemory
from memories.window import WindowMemory

if TYPE_CHECKING:
    from memories.vector import SearchResult, VectorMemory, VectorStoreRetrieverMemory

# Imported on first use, so that `import memories` does not import numpy or Chroma.
_LAZY = {
    "SearchResult": "memories.vector",
    "VectorMemory": "memories.vector",
    "VectorStoreRetrieverMemory": "memories.vector",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memories' has no attribute {name!r}")
    import importlib

    try:
        value = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise MissingDependencyError(name, "pip install 'memories[chroma]'") from exc
    globals()[name] = value
    return value


# LangChain's names for the same classes, so `from memories import X` replaces
# `from langchain_classic.memory import X` with nothing else changed.
ConversationBufferMemory = BufferMemory
ConversationStringBufferMemory = StringBufferMemory
ConversationBufferWindowMemory = WindowMemory
ConversationTokenBufferMemory = TokenBufferMemory
ConversationSummaryMemory = SummaryMemory
ConversationSummaryBufferMemory = SummaryBufferMemory

__all__ = [
    "BackendError",
    "BackendUnavailableError",
    "BaseMemory",
    "BufferMemory",
    "ChatHistory",
    "ChatMemory",
    "CombinedMemory",
    "ConfigError",
    "ConversationBufferMemory",
    "ConversationBufferWindowMemory",
    "ConversationStringBufferMemory",
    "ConversationSummaryBufferMemory",
    "ConversationSummaryMemory",
    "ConversationTokenBufferMemory",
    "Entry",
    "InMemoryHistory",
    "InvalidInputError",
    "InvalidProfileError",
    "LLMError",
    "LangChainHistory",
    "MemoriesError",
    "MissingDependencyError",
    "MissingKeyError",
    "ModelFileError",
    "ProfileMemory",
    "ProfileStore",
    "ReadOnlySharedMemory",
    "SQLHistory",
    "SQLiteHistory",
    "SearchResult",
    "SimpleMemory",
    "StringBufferMemory",
    "SummaryBufferMemory",
    "SummaryMemory",
    "TokenBufferMemory",
    "VectorMemory",
    "VectorStoreRetrieverMemory",
    "WindowMemory",
    "create_history",
    "create_memory",
    "get_prompt_input_key",
    "load_config",
    "register_memory",
    "with_memory",
]
