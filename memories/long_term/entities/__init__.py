"""Entities and relations: LangChain's entity and knowledge-graph memories.

:class:`~memories.long_term.entities.memory.ConversationEntityMemory` keeps a
running summary per entity in an entity store
(:mod:`memories.stores.entity_store`).
"""

from memories.long_term.entities.memory import ConversationEntityMemory

__all__ = ["ConversationEntityMemory"]
