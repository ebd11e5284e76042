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
from memories.errors import __all__ as _ERROR_NAMES

if TYPE_CHECKING:
    from memories.base import BaseMemory, ChatMemory
    from memories.buffer import BufferMemory, StringBufferMemory
    from memories.collection import CollectionMemory
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
    from memories.examples import ExampleMemory
    from memories.history.base import ChatHistory, Entry
    from memories.history.langchain import LangChainHistory
    from memories.history.memory import InMemoryHistory
    from memories.history.sql import SQLHistory, SQLiteHistory
    from memories.instructions import InstructionsMemory
    from memories.integrations.summarization import SummarizationMiddleware
    from memories.keys import get_prompt_input_key
    from memories.profile.memory import ProfileMemory
    from memories.profile.store import ProfileStore
    from memories.runnable import with_memory
    from memories.summary import (
        ConversationSummaryBufferMemory,
        SummaryBufferMemory,
        SummaryMemory,
    )
    from memories.token_buffer import ConversationTokenBufferMemory, TokenBufferMemory
    from memories.tools import memory_tools, profile_tool
    from memories.vector.memory import VectorMemory
    from memories.vector.records import SearchResult
    from memories.vector.retriever import VectorStoreRetrieverMemory
    from memories.window import WindowMemory

    # LangChain's names for the same classes.
    ConversationBufferMemory = BufferMemory
    ConversationBufferWindowMemory = WindowMemory
    ConversationStringBufferMemory = StringBufferMemory
    ConversationSummaryMemory = SummaryMemory

#: Module -> the public names it defines, imported from it on first use.
_MODULES: dict[str, tuple[str, ...]] = {
    "memories.errors": tuple(_ERROR_NAMES),
    "memories.base": ("BaseMemory", "ChatMemory"),
    "memories.buffer": ("BufferMemory", "StringBufferMemory"),
    "memories.history.base": ("ChatHistory", "Entry"),
    "memories.combined": ("CombinedMemory", "ReadOnlySharedMemory", "SimpleMemory"),
    "memories.history.memory": ("InMemoryHistory",),
    "memories.history.langchain": ("LangChainHistory",),
    "memories.profile.memory": ("ProfileMemory",),
    "memories.examples": ("ExampleMemory",),
    "memories.collection": ("CollectionMemory",),
    "memories.tools": ("memory_tools", "profile_tool"),
    "memories.integrations.summarization": ("SummarizationMiddleware",),
    "memories.instructions": ("InstructionsMemory",),
    "memories.profile.store": ("ProfileStore",),
    "memories.history.sql": ("SQLHistory", "SQLiteHistory"),
    "memories.vector.records": ("SearchResult",),
    "memories.summary": (
        "ConversationSummaryBufferMemory",
        "SummaryBufferMemory",
        "SummaryMemory",
    ),
    "memories.token_buffer": ("ConversationTokenBufferMemory", "TokenBufferMemory"),
    "memories.vector.memory": ("VectorMemory",),
    "memories.vector.retriever": ("VectorStoreRetrieverMemory",),
    "memories.window": ("WindowMemory",),
    "memories.config": (
        "create_history",
        "create_memory",
        "load_config",
        "memory_factory",
        "register_memory",
        "with_namespace",
        "with_session",
    ),
    "memories.keys": ("get_prompt_input_key",),
    "memories.runnable": ("with_memory",),
}
#: LangChain's names for our classes, so `from memories import X` replaces
#: `from langchain_classic.memory import X`.
_LANGCHAIN_NAMES = {
    "ConversationBufferMemory": "BufferMemory",
    "ConversationBufferWindowMemory": "WindowMemory",
    "ConversationStringBufferMemory": "StringBufferMemory",
    "ConversationSummaryMemory": "SummaryMemory",
}
#: Public name -> (module, attribute).
_EXPORTS: dict[str, tuple[str, str]] = {
    name: (module, name) for module, names in _MODULES.items() for name in names
}
_EXPORTS |= {name: _EXPORTS[ours] for name, ours in _LANGCHAIN_NAMES.items()}


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
    "CollectionMemory",
    "CombinedMemory",
    "ConfigError",
    "ConversationBufferMemory",
    "ConversationBufferWindowMemory",
    "ConversationStringBufferMemory",
    "ConversationSummaryBufferMemory",
    "ConversationSummaryMemory",
    "ConversationTokenBufferMemory",
    "Entry",
    "ExampleMemory",
    "InMemoryHistory",
    "InstructionsMemory",
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
    "SummarizationMiddleware",
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
    "memory_tools",
    "profile_tool",
    "register_memory",
    "with_memory",
    "with_namespace",
    "with_session",
]
