"""The one place that imports LangChain's classic memory base class.

LangChain's classic chains validate ``memory`` as a pydantic instance of
``langchain_classic.base_memory.BaseMemory``, which a virtual subclass does
not pass, so our base class inherits it (using only its four abstract members
and pydantic machinery): the day LangChain drops it, only this file changes.
"""

from __future__ import annotations

from langchain_classic.base_memory import BaseMemory as LangChainBaseMemory

__all__ = ["LangChainBaseMemory"]
