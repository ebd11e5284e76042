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

from memories import _moved
from memories._version import __version__
from memories.errors import MissingDependencyError
from memories.errors import __all__ as _ERROR_NAMES

if TYPE_CHECKING:
    from memories.core.base import BaseMemory, ChatMemory
    from memories.core.combined import CombinedMemory, ReadOnlySharedMemory, SimpleMemory
    from memories.core.config import (
        create_history,
        create_memory,
        load_config,
        memory_factory,
        register_memory,
        with_namespace,
        with_session,
    )
    from memories.core.erasure import ErasureReport, erase_user
    from memories.errors import (
        BackendError,
        BackendUnavailableError,
        BudgetExceededError,
        ConfigError,
        InvalidInputError,
        InvalidProfileError,
        LLMError,
        MemoriesError,
        MissingDependencyError,
        MissingKeyError,
        ModelFileError,
        VersionConflictError,
    )
    from memories.faces.runnable import with_memory
    from memories.faces.tools import entity_tools, memory_tools, profile_tool, read_profile_tool
    from memories.integrations.summarization import SummarizationMiddleware
    from memories.kernel.keys import get_prompt_input_key
    from memories.long_term.collection import CollectionMemory
    from memories.long_term.entities.kg import ConversationKGMemory
    from memories.long_term.entities.memory import ConversationEntityMemory
    from memories.long_term.entity_graph import EntityMemory
    from memories.long_term.examples import ExampleMemory
    from memories.long_term.instructions import InstructionsMemory
    from memories.long_term.profile.memory import ProfileMemory
    from memories.long_term.vector.memory import VectorMemory
    from memories.long_term.vector.retriever import VectorStoreRetrieverMemory
    from memories.long_term.vector.token_buffer import ConversationVectorStoreTokenBufferMemory
    from memories.short_term.buffer import BufferMemory, StringBufferMemory
    from memories.short_term.summary.memory import (
        ConversationSummaryBufferMemory,
        SummaryBufferMemory,
        SummaryMemory,
    )
    from memories.short_term.token_buffer import ConversationTokenBufferMemory, TokenBufferMemory
    from memories.short_term.window import WindowMemory
    from memories.stores.documents import ProfileStore
    from memories.stores.history.base import ChatHistory, Entry
    from memories.stores.history.langchain import LangChainHistory
    from memories.stores.history.memory import InMemoryHistory
    from memories.stores.history.sql import SQLHistory, SQLiteHistory
    from memories.stores.vector.records import SearchResult

    # LangChain's names for the same classes.
    ConversationBufferMemory = BufferMemory
    ConversationBufferWindowMemory = WindowMemory
    ConversationStringBufferMemory = StringBufferMemory
    ConversationSummaryMemory = SummaryMemory

_moved.install()

#: Module -> the public names it defines, imported from it on first use.
_MODULES: dict[str, tuple[str, ...]] = {
    "memories.errors": tuple(_ERROR_NAMES),
    "memories.core.base": ("BaseMemory", "ChatMemory"),
    "memories.short_term.buffer": ("BufferMemory", "StringBufferMemory"),
    "memories.stores.history.base": ("ChatHistory", "Entry"),
    "memories.core.combined": ("CombinedMemory", "ReadOnlySharedMemory", "SimpleMemory"),
    "memories.stores.history.memory": ("InMemoryHistory",),
    "memories.stores.history.langchain": ("LangChainHistory",),
    "memories.long_term.profile.memory": ("ProfileMemory",),
    "memories.long_term.examples": ("ExampleMemory",),
    "memories.long_term.collection": ("CollectionMemory",),
    "memories.long_term.entities.memory": ("ConversationEntityMemory",),
    "memories.long_term.entities.kg": ("ConversationKGMemory",),
    "memories.long_term.entity_graph": ("EntityMemory",),
    "memories.faces.tools": ("entity_tools", "memory_tools", "profile_tool", "read_profile_tool"),
    "memories.integrations.summarization": ("SummarizationMiddleware",),
    "memories.long_term.instructions": ("InstructionsMemory",),
    "memories.stores.documents": ("ProfileStore",),
    "memories.stores.history.sql": ("SQLHistory", "SQLiteHistory"),
    "memories.stores.vector.records": ("SearchResult",),
    "memories.short_term.summary.memory": (
        "ConversationSummaryBufferMemory",
        "SummaryBufferMemory",
        "SummaryMemory",
    ),
    "memories.short_term.token_buffer": ("ConversationTokenBufferMemory", "TokenBufferMemory"),
    "memories.long_term.vector.memory": ("VectorMemory",),
    "memories.long_term.vector.retriever": ("VectorStoreRetrieverMemory",),
    "memories.long_term.vector.token_buffer": ("ConversationVectorStoreTokenBufferMemory",),
    "memories.short_term.window": ("WindowMemory",),
    "memories.core.config": (
        "create_history",
        "create_memory",
        "load_config",
        "memory_factory",
        "register_memory",
        "with_namespace",
        "with_session",
    ),
    "memories.core.erasure": ("ErasureReport", "erase_user"),
    "memories.kernel.keys": ("get_prompt_input_key",),
    "memories.faces.runnable": ("with_memory",),
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
        from memories.kernel.imports import install_command

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
    "BudgetExceededError",
    "BufferMemory",
    "ChatHistory",
    "ChatMemory",
    "CollectionMemory",
    "CombinedMemory",
    "ConfigError",
    "ConversationBufferMemory",
    "ConversationBufferWindowMemory",
    "ConversationEntityMemory",
    "ConversationKGMemory",
    "ConversationStringBufferMemory",
    "ConversationSummaryBufferMemory",
    "ConversationSummaryMemory",
    "ConversationTokenBufferMemory",
    "ConversationVectorStoreTokenBufferMemory",
    "EntityMemory",
    "Entry",
    "ErasureReport",
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
    "VersionConflictError",
    "WindowMemory",
    "__version__",
    "create_history",
    "create_memory",
    "entity_tools",
    "erase_user",
    "get_prompt_input_key",
    "load_config",
    "memory_factory",
    "memory_tools",
    "profile_tool",
    "read_profile_tool",
    "register_memory",
    "with_memory",
    "with_namespace",
    "with_session",
]
