"""Knowledge triples: LangChain's ``ConversationKGMemory`` (langchain-community).

LangChain's prompts, parsing and output, over a graph that can live in SQL
(:class:`~memories.stores.entities.triples.SQLEntityGraph`); a failed model call
loses no turn (:mod:`memories.long_term.entities.updates`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, ClassVar

from langchain_core.messages import SystemMessage
from langchain_core.prompts import BasePromptTemplate
from pydantic import Field, field_validator

from memories.errors import ConfigError, LLMError
from memories.kernel.keys import input_text_for
from memories.kernel.steps import Step, Steps, step
from memories.long_term.entities.memory import parse_entities
from memories.long_term.entities.prompts import (
    ENTITY_EXTRACTION_PROMPT,
    KNOWLEDGE_TRIPLE_EXTRACTION_PROMPT,
    PromptField,
)
from memories.long_term.entities.updates import Job, QueuedUpdates
from memories.short_term.summary.prompts import (
    MessageClassField,
    message_class_config,
)
from memories.stores.compaction import compactions
from memories.stores.entities.triples import (
    EntityGraph,
    InMemoryEntityGraph,
    KnowledgeTriple,
    LangChainEntityGraph,
    as_entity_graph,
)
from memories.stores.erasure import Counts, StoreShare

__all__ = ["KG_TRIPLE_DELIMITER", "ConversationKGMemory", "parse_triples"]

#: What separates triples in the model's reply (LangChain's).
KG_TRIPLE_DELIMITER = "<|>"


def parse_triples(knowledge: str) -> list[KnowledgeTriple]:
    """The triples of a reply, as LangChain parses them (malformed ones skipped)."""
    knowledge = knowledge.strip()
    if not knowledge or knowledge == "NONE":
        return []
    found = [text.strip().split(", ") for text in knowledge.split(KG_TRIPLE_DELIMITER)]
    return [KnowledgeTriple(s[1:], p, o[:-1]) for s, p, o in (f for f in found if len(f) == 3)]


class ConversationKGMemory(QueuedUpdates):
    """LangChain's ``ConversationKGMemory``: what a knowledge graph knows of the input's entities.

    Loads ``{memory_key: "On <entity>: <fact>. <fact>."}`` lines (or one
    ``summary_message_cls`` message each with ``return_messages``).

    Args:
        llm: the model that extracts entities and triples (required).
        k: the exchanges sent to the model as context; ``0`` sends none.
        kg: memories' ``InMemoryEntityGraph`` (default) or ``SQLEntityGraph``
            (kept in a database), LangChain's ``NetworkxEntityGraph``, or a
            graph config dict (``{"type": "sql", "url": ..., "session_id": ...}``;
            ``{"type": "networkx"}`` is LangChain's graph: the ``kg`` extra).
        knowledge_extraction_prompt: LangChain's prompt with ``history`` and ``input``.
        entity_extraction_prompt: LangChain's prompt with ``history`` and ``input``.
        summary_message_cls: the message class of each entity's line.

    The other arguments (``chat_memory``, ``memory_key``, ``input_key``,
    ``output_key``, ``return_messages``, ``human_prefix``, ``ai_prefix``) are
    :class:`~memories.core.base.ChatMemory`'s.
    """

    config_type: ClassVar[str] = "conversation_kg"
    session_stores: ClassVar[tuple[str, ...]] = ("kg",)

    k: int = Field(default=2, ge=0)
    kg: Any = Field(default_factory=InMemoryEntityGraph)
    knowledge_extraction_prompt: PromptField = KNOWLEDGE_TRIPLE_EXTRACTION_PROMPT
    entity_extraction_prompt: PromptField = ENTITY_EXTRACTION_PROMPT
    summary_message_cls: MessageClassField = SystemMessage

    @field_validator("kg", mode="before")
    @classmethod
    def _check_graph(cls, value: Any) -> Any:
        return as_entity_graph(value)

    def erasure_shares(self, *, session: bool, namespace: bool) -> list[StoreShare]:
        """The session's log, and its graph's every change, when erasing a session.

        A LangChain graph cannot be counted: erasing names it as not erasable.
        """
        found = super().erasure_shares(session=session, namespace=namespace)
        graph = self.knowledge_store
        if session:
            held = graph.held if isinstance(graph, EntityGraph) else _uncountable(graph)
            files = compactions(graph.database) if isinstance(graph, EntityGraph) else ()
            found.append(StoreShare(repr(self.kg), held, graph.clear, files))
        return found

    @cached_property
    def knowledge_store(self) -> EntityGraph | LangChainEntityGraph:
        """The graph as the memory drives it (LangChain's wrapped, with async twins)."""
        return self.kg if isinstance(self.kg, EntityGraph) else LangChainEntityGraph(self.kg)

    def _state_parameters(self) -> dict[str, Any]:
        return {"kg_updates": 1}

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "summary_message_cls":
            return super()._config_value(name, message_class_config(value))
        if name == "kg":
            if not isinstance(value, EntityGraph):
                raise ConfigError(
                    f"kg {value!r:.60} has no config form; use memories' SQLEntityGraph to "
                    "describe it by config."
                )
            return value.to_config()
        return super()._config_value(name, value)

    def get_current_entities(self, input_string: str) -> list[str]:
        """The entities the model finds in ``input_string`` (LangChain's method)."""
        asked = self._asked(self.entity_extraction_prompt, input_string)
        return parse_entities(self._run(asked, write=False))

    def get_knowledge_triplets(self, input_string: str) -> list[KnowledgeTriple]:
        """The triples the model finds in ``input_string`` (LangChain's method; nothing stored)."""
        asked = self._asked(self.knowledge_extraction_prompt, input_string)
        return parse_triples(self._run(asked, write=False))

    def _asked(self, prompt: BasePromptTemplate, text: str) -> Steps[str]:
        """The model's reply to ``prompt`` on ``text``, the window as history."""
        return (yield from self._asking(prompt, **(yield from self._job(text))))

    def _load_memory_variables_steps(self, inputs: Mapping[str, Any]) -> Steps[dict[str, Any]]:
        """What the graph knows about the entities the input names (one model call)."""
        try:
            text = input_text_for(self, inputs)
            entities = parse_entities((yield from self._asked(self.entity_extraction_prompt, text)))
        except LLMError as exc:
            self._unanswered(
                "extracting the entities of the input", exc, "showing no knowledge this turn"
            )
            entities = []
        lines = []
        for entity in entities:
            knowledge = yield step(self.knowledge_store.get_entity_knowledge, entity)
            if knowledge:
                lines.append(f"On {entity}: {'. '.join(knowledge)}.")
        if self.return_messages:
            return {self.memory_key: [self.summary_message_cls(content=line) for line in lines]}
        return {self.memory_key: "\n".join(lines)}

    def _job(self, text: str) -> Steps[Job]:
        """The prompts' values: ``text`` as ``input``, the window as ``history``."""
        return {"input": text, "history": self._buffer((yield from self._window()))}

    def _advancing(self, job: Job) -> Steps[tuple[Job | None, list[Step]]]:
        output = yield from self._asking(self.knowledge_extraction_prompt, **job)
        return None, [step(self.knowledge_store.add_triple, t) for t in parse_triples(output)]

    def _clear_steps(self) -> Steps[None]:
        yield step(self.chat_memory.clear)
        yield step(self.knowledge_store.clear)


def _uncountable(graph: Any) -> Callable[[], Counts]:
    def held() -> Counts:
        raise NotImplementedError(
            f"{type(graph.graph).__name__} cannot count what it holds, so erase_user cannot "
            "check its erasure: use memories' SQLEntityGraph (kg: {type: sql, ...})."
        )

    return held
