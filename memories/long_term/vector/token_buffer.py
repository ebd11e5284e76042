"""A token buffer whose overflow goes to a vector store (LangChain's vector token buffer).

Our :class:`~memories.short_term.token_buffer.TokenBufferMemory` (a cursor moves
past the overflow: LangChain's class pops a persistent history's copy, so it
stores the same exchanges again every turn) over our
:class:`~memories.long_term.vector.retriever.VectorStoreRetrieverMemory`. What
was written and each turn's timestamp live in the history's state, so a
restarted process neither loses the timestamps nor writes an exchange twice.
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar

from langchain_classic.memory.vectorstore_token_buffer_memory import (
    DEFAULT_HISTORY_TEMPLATE,
    TIMESTAMP_FORMAT,
)
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.prompts.chat import SystemMessagePromptTemplate
from langchain_core.vectorstores import VectorStoreRetriever
from langchain_text_splitters import RecursiveCharacterTextSplitter
from pydantic import Field

from memories.errors import ConfigError
from memories.kernel.capabilities import Capabilities
from memories.kernel.messages import format_buffer, message_text
from memories.kernel.steps import Steps, step, twins
from memories.long_term.vector.retriever import VectorStoreRetrieverMemory
from memories.short_term.token_buffer import TokenBufferMemory
from memories.stores.history.base import Entry

__all__ = [
    "DEFAULT_HISTORY_TEMPLATE",
    "TIMESTAMP_FORMAT",
    "ConversationVectorStoreTokenBufferMemory",
]


#: ``RecursiveCharacterTextSplitter``'s default overlap, which LangChain's class keeps.
_CHUNK_OVERLAP = 200


def _now() -> str:
    """The current local time in LangChain's timestamp format."""
    return datetime.now().astimezone().strftime(TIMESTAMP_FORMAT)


class ConversationVectorStoreTokenBufferMemory(TokenBufferMemory):
    """LangChain's ``ConversationVectorStoreTokenBufferMemory``: a token buffer backed by a store.

    Loads ``{memory_key: [system message, *recent messages]}``: the system
    message is ``previous_history_template`` filled with the current time and
    the retriever's documents for the input.

    Args:
        retriever: a LangChain ``VectorStoreRetriever`` (required, as in
            LangChain): where overflowing exchanges go and come back from.
        previous_history_template: the system message's template, with
            ``current_time`` and ``previous_history``.
        split_chunk_size: the longest AI text (in characters) of one document.
        max_token_limit, token_counter, llm: as
            :class:`~memories.short_term.token_buffer.TokenBufferMemory` (the
            ``llm`` only counts tokens; without it tiktoken counts, offline).
        return_messages: messages (as LangChain's class gives); False gives
            the same messages as one string (LangChain's breaks them into
            characters).
    """

    config_type: ClassVar[str] = "conversation_vectorstore_token_buffer"
    _makes_calls: ClassVar[bool] = True  # its retriever's
    _folds_saves: ClassVar[bool] = False  # a save also moves the overflow to the store
    #: The retriever's store holds one session's overflow: never shared by a per-session config.
    session_stores: ClassVar[tuple[str, ...]] = ("retriever",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="session", chat_log=True, exportable=True
    )

    retriever: VectorStoreRetriever | None = Field(default=None, exclude=True)
    previous_history_template: str = DEFAULT_HISTORY_TEMPLATE
    split_chunk_size: int = Field(default=1000, gt=0)

    def model_post_init(self, context: Any, /) -> None:
        if self.retriever is None:
            raise ConfigError(
                "ConversationVectorStoreTokenBufferMemory needs a retriever (a LangChain "
                "VectorStoreRetriever, e.g. vectorstore.as_retriever()), as LangChain's does."
            )
        if self.split_chunk_size <= _CHUNK_OVERLAP:
            # LangChain's splitter raises this on the first overflowing save; say it now.
            raise ConfigError(
                f"split_chunk_size={self.split_chunk_size} must be larger than the splitter's "
                f"chunk overlap ({_CHUNK_OVERLAP} characters)."
            )
        super().model_post_init(context)

    @cached_property
    def memory_retriever(self) -> VectorStoreRetrieverMemory:
        """The vector store memory over :attr:`retriever` (LangChain's attribute)."""
        return VectorStoreRetrieverMemory(retriever=self.retriever)

    @cached_property
    def _overflow_key(self) -> str:
        """Where the store cursor and the turns' timestamps live in the history."""
        return f"{self.state_key}:overflow"

    # -- the overflow, written once as steps ---------------------------------------------

    def _reading_overflow(self) -> Steps[dict[str, Any]]:
        stored = yield step(self.chat_memory.load_state, self._overflow_key)
        return stored or {"stored": None, "timed": None, "times": {}}

    def _storing(self, state: dict[str, Any], entries: list[Entry]) -> Steps[dict[str, Any]]:
        """Write ``entries`` to the vector store exchange by exchange; the state after it."""
        times = dict(state["times"])
        for exchange in _exchanges(entries):
            first, rest = exchange[0], exchange[1:]
            stamp = times.pop(str(first.seq), None) or _now()
            reply = "\n".join(message_text(e.message) for e in rest)
            for index, chunk in enumerate(self._chunks(reply)):
                yield step(
                    self.memory_retriever.save_context,
                    {"Human": f"<{stamp}/00> {message_text(first.message)}"},
                    {"AI": f"<{stamp}/{index:02}> {chunk}"},
                )
        last = entries[-1].seq if entries else state["stored"]
        return {**state, "stored": last, "times": times}

    def _chunks(self, text: str) -> list[str]:
        splitter = RecursiveCharacterTextSplitter(chunk_size=self.split_chunk_size)
        return [chunk.page_content for chunk in splitter.create_documents([text])]

    def _update(self) -> Steps[None]:
        window, _ = yield from self._refreshing()
        state = yield from self._reading_overflow()
        new = yield step(self.chat_memory.entries, after=state["timed"])
        if not new:
            return
        stamp = _now()
        times = {**state["times"], **{str(e.seq): stamp for e in new}}
        state = {**state, "timed": new[-1].seq, "times": times}
        end = window.first if window.first is not None else new[-1].seq + 1
        overflow = yield step(self.chat_memory.entries, after=state["stored"])
        overflow = [e for e in overflow if e.seq < end]
        if overflow:
            state = yield from self._storing(state, overflow)
        yield step(self.chat_memory.save_state, self._overflow_key, state)

    def _remainder(self) -> Steps[None]:
        state = yield from self._reading_overflow()
        rest = yield step(self.chat_memory.entries, after=state["stored"])
        if rest:
            state = yield from self._storing(state, rest)
            yield step(self.chat_memory.save_state, self._overflow_key, state)

    def save_remainder(self) -> None:
        """Write what the buffer still shows to the vector store (LangChain's method).

        The buffer then shows nothing until the next turn, as LangChain's.
        """
        self._run(self._remainder(), write=True)

    # -- loading -----------------------------------------------------------------------

    def _selection(self) -> Steps[list[BaseMessage]]:
        messages = yield from super()._selection()
        state = yield from self._reading_overflow()
        if state["stored"] is None or not messages:
            return messages
        window, _ = yield from self._refreshing()
        hidden = sum(1 for seq in window.seqs if seq <= state["stored"])
        return messages[hidden:]

    def _load_memory_variables_steps(self, inputs: dict[str, Any]) -> Steps[dict[str, Any]]:
        """The system message (time, documents found for the input) and the recent messages."""
        found = yield step(self.memory_retriever.load_memory_variables, inputs)
        previous = found[self.memory_retriever.memory_key]
        template = SystemMessagePromptTemplate.from_template(self.previous_history_template)
        system = template.format(previous_history=previous, current_time=_now())
        messages = [system, *(yield from self._selection())]
        if self.return_messages:
            return {self.memory_key: messages}
        return {self.memory_key: format_buffer(messages, self.human_prefix, self.ai_prefix)}

    load_memory_variables, aload_memory_variables = twins(
        _load_memory_variables_steps, runner="_run", write=True
    )


def _exchanges(entries: list[Entry]) -> list[list[Entry]]:
    """Entries grouped as LangChain pops them: a human message and what follows it."""
    groups: list[list[Entry]] = []
    for entry in entries:
        if not groups or isinstance(entry.message, HumanMessage):
            groups.append([entry])
        else:
            groups[-1].append(entry)
    return groups
