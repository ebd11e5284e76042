"""LangChain's entity and knowledge-triple prompts, word for word, and the prompt field type.

The prompts are LangChain's own objects (imported, never copied), so a
memory here sends its model exactly what LangChain's class sends.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_classic.memory.prompt import (
    ENTITY_EXTRACTION_PROMPT,
    ENTITY_SUMMARIZATION_PROMPT,
    KNOWLEDGE_TRIPLE_EXTRACTION_PROMPT,
)
from langchain_core.prompts import BasePromptTemplate, PromptTemplate
from pydantic import BeforeValidator

from memories.errors import ConfigError

__all__ = [
    "ENTITY_EXTRACTION_PROMPT",
    "ENTITY_SUMMARIZATION_PROMPT",
    "KNOWLEDGE_TRIPLE_EXTRACTION_PROMPT",
    "PROMPT_CHECK",
    "PromptField",
]


def _prompt(value: Any) -> Any:
    if isinstance(value, str):
        return PromptTemplate.from_template(value)
    if not isinstance(value, BasePromptTemplate):
        raise ConfigError(
            f"A prompt must be a prompt template or its template string, got {value!r:.80}"
        )
    return value


#: Marks a field as a prompt: :class:`~memories.long_term.entities.updates.QueuedUpdates`
#: finds its prompt fields by it.
PROMPT_CHECK = BeforeValidator(_prompt)
#: A prompt: a LangChain prompt template, or its template string (as in a config).
PromptField = Annotated[BasePromptTemplate, PROMPT_CHECK]
