"""A running summary per entity: LangChain's ``ConversationEntityMemory``.

LangChain's prompts, variables and formats; a failed model call loses no turn:
the entity updates a turn owes are queued with it and retried
(:mod:`memories.long_term.entities.updates`), and a failed extraction at load
time is made up for at save time.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage
from pydantic import Field, PrivateAttr, field_validator

from memories.errors import ConfigError, LLMError
from memories.kernel.keys import input_text_for
from memories.kernel.steps import Step, Steps, step
from memories.long_term.entities.prompts import (
    ENTITY_EXTRACTION_PROMPT,
    ENTITY_SUMMARIZATION_PROMPT,
    PromptField,
)
from memories.long_term.entities.updates import Job, QueuedUpdates
from memories.stores.compaction import compactions
from memories.stores.entities.summaries import (
    EntityStore,
    InMemoryEntityStore,
    as_entity_store,
)
from memories.stores.erasure import StoreShare

__all__ = ["ConversationEntityMemory", "parse_entities"]


def parse_entities(output: str) -> list[str]:
    """The entity names in an extraction reply, as LangChain reads them ("NONE": none).

    Unlike LangChain, an empty name (an empty reply, ``"A,,B"``) is dropped.
    """
    if output.strip() == "NONE":
        return []
    return [name for name in (w.strip() for w in output.split(",")) if name]


class ConversationEntityMemory(QueuedUpdates):
    """LangChain's ``ConversationEntityMemory``: the last ``k`` exchanges and entity summaries.

    Loads ``{chat_history_key: the last k exchanges, "entities": {name: summary}}``.

    Args:
        llm: the model that extracts entities and writes their summaries
            (required; see :class:`~memories.core.parts.ModelMemory`).
        entity_extraction_prompt: LangChain's prompt with ``history`` and ``input``.
        entity_summarization_prompt: LangChain's prompt with ``entity``,
            ``summary``, ``history`` and ``input``.
        entity_cache: the entities the last load found, updated by each load.
        k: the exchanges shown and sent to the model; ``0`` shows none (in
            LangChain's class, ``k=0`` shows the whole conversation).
        entity_store: memories' ``InMemoryEntityStore`` (default) /
            ``SQLEntityStore`` / ``SQLiteEntityStore`` (every version kept), any
            LangChain entity store, or a store config dict.
        chat_history_key: LangChain's name for ``memory_key`` in this class.

    The other arguments (``chat_memory``, ``input_key``, ``output_key``,
    ``return_messages``, ``human_prefix``, ``ai_prefix``) are
    :class:`~memories.core.base.ChatMemory`'s.
    """

    config_type: ClassVar[str] = "conversation_entity"
    session_stores: ClassVar[tuple[str, ...]] = ("entity_store",)
    langchain_names: ClassVar[dict[str, str]] = {"chat_history_key": "memory_key"}

    entity_extraction_prompt: PromptField = ENTITY_EXTRACTION_PROMPT
    entity_summarization_prompt: PromptField = ENTITY_SUMMARIZATION_PROMPT
    entity_cache: list[str] = Field(default_factory=list)
    entity_store: Any = Field(default_factory=InMemoryEntityStore)

    #: ``(input, history)`` of a load whose extraction failed: the save extracts again.
    _unextracted: tuple[str, str] | None = PrivateAttr(default=None)

    @field_validator("entity_store", mode="before")
    @classmethod
    def _check_store(cls, value: Any) -> Any:
        store = as_entity_store(value)  # raises ConfigError for what is not a store
        return store if isinstance(value, Mapping) else value

    @property
    def chat_history_key(self) -> str:
        """LangChain's name for :attr:`memory_key` in this class."""
        return self.memory_key

    def erasure_shares(self, *, session: bool, namespace: bool) -> list[StoreShare]:
        """The session's log, and its entities' every version, when erasing a session."""
        found = super().erasure_shares(session=session, namespace=namespace)
        if session:
            store = self.knowledge_store
            files = compactions(store.database)
            found.append(StoreShare(repr(store), store.held, store.purge, files))
        return found

    @cached_property
    def knowledge_store(self) -> EntityStore:
        """The entity store as the memory drives it (LangChain's wrapped in ours)."""
        return as_entity_store(self.entity_store)

    @property
    def memory_variables(self) -> list[str]:
        """``["entities", chat_history_key]``, as LangChain's."""
        return ["entities", self.memory_key]

    def _state_parameters(self) -> dict[str, Any]:
        return {"entity_updates": 1}

    def to_config(self) -> dict[str, Any]:
        """The config, without ``entity_cache`` (state, not configuration)."""
        config = super().to_config()
        config.pop("entity_cache", None)
        return config

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "entity_store":
            try:
                return self.knowledge_store.to_config()
            except NotImplementedError as exc:
                raise ConfigError(
                    f"entity_store {value!r:.60} has no config form; use memories' "
                    "SQLEntityStore to describe it by config."
                ) from exc
        if name == "entity_cache":
            return list(value)
        return super()._config_value(name, value)

    def _load_memory_variables_steps(self, inputs: Mapping[str, Any]) -> Steps[dict[str, Any]]:
        """The last ``k`` exchanges and the summaries of the entities the input names.

        Calls the model once (entity extraction) and updates :attr:`entity_cache`.
        """
        text = input_text_for(self, inputs)
        messages = yield from self._window()
        history = self._buffer(messages)
        try:
            output = yield from self._asking(
                self.entity_extraction_prompt, history=history, input=text
            )
        except LLMError as exc:
            self._unanswered(
                "extracting the entities of the input",
                exc,
                "showing no entity this turn, and extracting them again when it is saved",
            )
            entities, self._unextracted = [], (text, history)
        else:
            entities, self._unextracted = parse_entities(output), None
        summaries: dict[str, str | None] = {}
        for entity in entities:
            summaries[entity] = yield step(self.knowledge_store.get, entity, "")
        self.__dict__["entity_cache"] = entities  # state: no validation, no cache reset
        shown: Any = messages if self.return_messages else history
        return {self.memory_key: shown, "entities": summaries}

    def _job(self, text: str) -> Steps[Job]:
        """The entity updates a turn just appended owes: the prompts' strings, no progress yet."""
        window = yield from self._window()
        job: Job = {"input": text, "history": self._buffer(window), "done": 0}
        job["entities"] = list(self.entity_cache)
        if self._unextracted is not None and self._unextracted[0] == text:
            job["entities"], job["before"] = None, self._unextracted[1]
        self._unextracted = None
        return job

    def _advancing(self, job: Job) -> Steps[tuple[Job | None, list[Step]]]:
        """Extract the job's entities if its load could not; else summarize the next one."""
        if job["entities"] is None:
            output = yield from self._asking(
                self.entity_extraction_prompt, history=job["before"], input=job["input"]
            )
            return {**job, "entities": parse_entities(output)}, []
        if job["done"] >= len(job["entities"]):
            return None, []
        entity = job["entities"][job["done"]]
        store = self.knowledge_store
        existing = yield step(store.get, entity, "")
        output = yield from self._asking(
            self.entity_summarization_prompt,
            summary=existing,
            entity=entity,
            history=job["history"],
            input=job["input"],
        )
        after = {**job, "done": job["done"] + 1}
        finished = after["done"] >= len(job["entities"])
        return (None if finished else after), [step(store.set, entity, output.strip())]

    def _clear_steps(self) -> Steps[None]:
        yield step(self.chat_memory.clear)
        yield step(self.knowledge_store.clear)
        self.__dict__["entity_cache"] = []
        self._unextracted = None

    @property
    def buffer(self) -> list[BaseMessage]:
        """Every message of the session (LangChain's attribute in this class)."""
        return self.chat_memory.messages

    async def abuffer(self) -> list[BaseMessage]:
        """Async :attr:`buffer` (every message, not the shown window)."""
        return await self.chat_memory.aget_messages()
