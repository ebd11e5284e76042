"""memories: pluggable conversation memories for LLM applications.

A drop-in for LangChain's classic memory classes: the same constructor
arguments and outputs, under short names (``BufferMemory``) and under
LangChain's (``ConversationBufferMemory``), so migrating changes one import.

Every public name is imported on first use (PEP 562): ``import memories``
stays cheap and imports neither Chroma nor numpy, and a submodule such as
``memories.errors`` can be imported on its own without the whole package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memories._version import __version__
from memories.errors import MissingDependencyError

if TYPE_CHECKING:
    from memories.base import BaseMemory, ChatMemory
    from memories.buffer import BufferMemory, StringBufferMemory
    from memories.combined import CombinedMemory, ReadOnlySharedMemory, SimpleMemory
    from memories.config import (
        create_history,
        create_memory,
        load_config,
        memory_factory,
        register_memory,
        with_namespace,
        with_session,
    )
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
    from memories.history.base import ChatHistory, Entry
    from memories.history.langchain import LangChainHistory
    from memories.history.memory import InMemoryHistory
    from memories.history.sql import SQLHistory, SQLiteHistory
    from memories.keys import get_prompt_input_key
    from memories.profile.memory import ProfileMemory
    from memories.profile.store import ProfileStore
    from memories.runnable import with_memory
    from memories.summary import SummaryBufferMemory, SummaryMemory
    from memories.token_buffer import TokenBufferMemory
    from memories.vector.memory import VectorMemory
    from memories.vector.records import SearchResult
    from memories.vector.retriever import VectorStoreRetrieverMemory
    from memories.window import WindowMemory

    # LangChain's names for the same classes.
    ConversationBufferMemory = BufferMemory
    ConversationBufferWindowMemory = WindowMemory
    ConversationStringBufferMemory = StringBufferMemory
    ConversationSummaryBufferMemory = SummaryBufferMemory
    ConversationSummaryMemory = SummaryMemory
    ConversationTokenBufferMemory = TokenBufferMemory

#: Public name -> (module, attribute). LangChain's names point at our classes,
#: so `from memories import X` replaces `from langchain_classic.memory import X`.
_EXPORTS: dict[str, tuple[str, str]] = {
    "BackendError": ("memories.errors", "BackendError"),
    "BackendUnavailableError": ("memories.errors", "BackendUnavailableError"),
    "BaseMemory": ("memories.base", "BaseMemory"),
    "BufferMemory": ("memories.buffer", "BufferMemory"),
    "ChatHistory": ("memories.history.base", "ChatHistory"),
    "ChatMemory": ("memories.base", "ChatMemory"),
    "CombinedMemory": ("memories.combined", "CombinedMemory"),
    "ConfigError": ("memories.errors", "ConfigError"),
    "ConversationBufferMemory": ("memories.buffer", "BufferMemory"),
    "ConversationBufferWindowMemory": ("memories.window", "WindowMemory"),
    "ConversationStringBufferMemory": ("memories.buffer", "StringBufferMemory"),
    "ConversationSummaryBufferMemory": ("memories.summary", "SummaryBufferMemory"),
    "ConversationSummaryMemory": ("memories.summary", "SummaryMemory"),
    "ConversationTokenBufferMemory": ("memories.token_buffer", "TokenBufferMemory"),
    "Entry": ("memories.history.base", "Entry"),
    "InMemoryHistory": ("memories.history.memory", "InMemoryHistory"),
    "InvalidInputError": ("memories.errors", "InvalidInputError"),
    "InvalidProfileError": ("memories.errors", "InvalidProfileError"),
    "LLMError": ("memories.errors", "LLMError"),
    "LangChainHistory": ("memories.history.langchain", "LangChainHistory"),
    "MemoriesError": ("memories.errors", "MemoriesError"),
    "MissingDependencyError": ("memories.errors", "MissingDependencyError"),
    "MissingKeyError": ("memories.errors", "MissingKeyError"),
    "ModelFileError": ("memories.errors", "ModelFileError"),
    "ProfileMemory": ("memories.profile.memory", "ProfileMemory"),
    "ProfileStore": ("memories.profile.store", "ProfileStore"),
    "ReadOnlySharedMemory": ("memories.combined", "ReadOnlySharedMemory"),
    "SQLHistory": ("memories.history.sql", "SQLHistory"),
    "SQLiteHistory": ("memories.history.sql", "SQLiteHistory"),
    "SearchResult": ("memories.vector.records", "SearchResult"),
    "SimpleMemory": ("memories.combined", "SimpleMemory"),
    "StringBufferMemory": ("memories.buffer", "StringBufferMemory"),
    "SummaryBufferMemory": ("memories.summary", "SummaryBufferMemory"),
    "SummaryMemory": ("memories.summary", "SummaryMemory"),
    "TokenBufferMemory": ("memories.token_buffer", "TokenBufferMemory"),
    "VectorMemory": ("memories.vector.memory", "VectorMemory"),
    "VectorStoreRetrieverMemory": ("memories.vector.retriever", "VectorStoreRetrieverMemory"),
    "WindowMemory": ("memories.window", "WindowMemory"),
    "create_history": ("memories.config", "create_history"),
    "create_memory": ("memories.config", "create_memory"),
    "get_prompt_input_key": ("memories.keys", "get_prompt_input_key"),
    "load_config": ("memories.config", "load_config"),
    "memory_factory": ("memories.config", "memory_factory"),
    "register_memory": ("memories.config", "register_memory"),
    "with_memory": ("memories.runnable", "with_memory"),
    "with_namespace": ("memories.config", "with_namespace"),
    "with_session": ("memories.config", "with_session"),
}


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'memories' has no attribute {name!r}")
    module_name, attribute = target
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        from memories.imports import install_command

        command = install_command(module_name)
        if command is None:
            raise
        raise MissingDependencyError(name, command) from exc
    value = getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    "__version__",
    "create_history",
    "create_memory",
    "get_prompt_input_key",
    "load_config",
    "memory_factory",
    "register_memory",
    "with_memory",
    "with_namespace",
    "with_session",
]
