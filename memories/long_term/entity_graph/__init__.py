"""Entity memory: a temporal graph of entities and typed relations, kept by a model or by rules."""

from memories.long_term.entity_graph.memory import EntityMemory, GraphStatus, GraphUpdate
from memories.long_term.entity_graph.recall import Recalled
from memories.stores.entities.temporal_graph import Entity, Relation

__all__ = ["Entity", "EntityMemory", "GraphStatus", "GraphUpdate", "Recalled", "Relation"]
