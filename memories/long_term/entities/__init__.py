"""Entities and relations: LangChain's entity and knowledge-graph memories.

:class:`~memories.long_term.entities.memory.ConversationEntityMemory` keeps a
running summary per entity in an entity store
(:mod:`memories.stores.entities.summaries`);
:class:`~memories.long_term.entities.kg.ConversationKGMemory` keeps
knowledge triples in a graph (:mod:`memories.stores.entities.triples`).
"""

from memories.long_term.entities.kg import ConversationKGMemory
from memories.long_term.entities.memory import ConversationEntityMemory

__all__ = ["ConversationEntityMemory", "ConversationKGMemory"]
