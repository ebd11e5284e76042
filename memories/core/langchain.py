"""The one place that imports LangChain's classic memory base class.

LangChain's classic chains (``ConversationChain``, ``LLMChain``) validate their
``memory`` field as a pydantic instance of ``langchain_classic.base_memory.BaseMemory``.
A virtual subclass (``BaseMemory.register``) does not pass that check; a real
subclass does, and emits no deprecation warning. So our base class inherits it.

Only its public surface is used: the four abstract members and the pydantic
model machinery. The day LangChain drops the class, this file changes and
nothing else does.
"""

from __future__ import annotations

from langchain_classic.base_memory import BaseMemory as LangChainBaseMemory

__all__ = ["LangChainBaseMemory"]
