"""``VectorMemory``: every turn a document, recalled by relevance to the input.

Each ``save_context`` stores the turn as one document, ``"input: ...\\noutput: ..."``
as LangChain's ``VectorStoreRetrieverMemory`` writes it, with its namespace, session,
turn index, timestamp, speakers and the caller's metadata. Storing and searching are
its backend's (:mod:`memories.stores.vector.backend`; Chroma by default, built from
this memory's fields: :class:`~memories.long_term.indexed.IndexedMemory`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage, HumanMessage

from memories.kernel.capabilities import Capabilities
from memories.kernel.embeddings import default_embeddings
from memories.kernel.keys import input_text_for, select_input_key, select_output_key
from memories.kernel.messages import check_storable, message_text, turn_messages
from memories.kernel.steps import Steps, step, twins
from memories.long_term.indexed import DocumentMemory
from memories.long_term.vector.turns import TurnParts, checked_message, edited, of_messages
from memories.stores.vector.filters import check_metadata
from memories.stores.vector.outbox import OutboxRow

__all__ = ["VectorMemory", "default_embeddings"]


class VectorMemory(DocumentMemory):
    """Conversation turns in a Chroma vector store, recalled by relevance to the input.

    The store's and the namespace's arguments (``mode``, ``path``, ``host``,
    ``port``, ``ssl``, ``timeout``, ``collection``, ``namespace``,
    ``embeddings``, ``outbox``, ``metadata``, ``min_score``) are
    :class:`~memories.long_term.indexed.DocumentMemory`'s. Here:

    Args:
        session_id: the conversation new turns belong to; turns are numbered
            within it, and neighbour smoothing follows that order.
        k: how many documents ``load_memory_variables`` and ``search`` return.
        recall: how documents are ranked (a :class:`~memories.stores.recall.RecallConfig`
            or a dict of its fields); the default is the best measured on LoCoMo.
        write: ``"background"`` (default) or ``"sync"``, as in ``DocumentMemory``;
            :meth:`save_context` says how failures surface in each mode.
        memory_key: the prompt variable this memory fills.
        input_key: the chain input to store and search with; by default the
            only input that is not a memory variable.
        output_key: the chain output to store; by default the only one, or ``"output"``.
        return_docs: give LangChain ``Document`` objects instead of one string.
    """

    config_type: ClassVar[str] = "vector"
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace",
        searchable=True,
        exportable=True,
        deferred=True,
        message_edits=True,
        expires=True,
    )

    return_docs: bool = False

    # -- LangChain's interface ------------------------------------------------------

    def _save_context_steps(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> Steps[None]:
        """Store the run's input and output as one document (``metadata``: extra metadata for it).

        With ``write="background"`` the turn is queued in the outbox, searchable
        at once, and written to Chroma by a background thread; a failed
        background write is raised by the next call that needs the store, which
        first retries it (see :mod:`memories.stores.vector.chroma_backend`).

        Raises:
            InvalidInputError: the turn cannot be stored; nothing was written.
            BackendUnavailableError: the store cannot be reached (now, or by the
                last background write); the turn waits in the outbox and is
                written by the next call that reaches the store, or by ``flush()``.
        """
        row = self._turn_row(inputs, outputs, metadata)
        yield from self._storing(step(self.backend.save, row), [row.doc_id])

    save_context, asave_context = twins(_save_context_steps)

    def _load_memory_variables_steps(
        self, inputs: dict[str, Any], *, min_score: float | None = None
    ) -> Steps[dict[str, Any]]:
        """``{memory_key: text}``: the top ``k`` documents for the input, joined by newlines.

        With ``return_docs=True`` the value is a list of LangChain ``Document``.
        Documents scoring below ``min_score`` (default ``self.min_score``) are left out.
        """
        found = yield from self._search_steps(input_text_for(self, inputs), min_score=min_score)
        if self.return_docs:
            return {self.memory_key: [r.to_document() for r in found]}
        return {self.memory_key: "\n".join(r.text for r in found)}

    load_memory_variables, aload_memory_variables = twins(_load_memory_variables_steps)

    # -- building documents and queries (pure) ----------------------------------------

    def _turn_parts(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> TurnParts:
        """The document text of one run in its two parts, validated before anything is written."""
        in_key = select_input_key(inputs, self.memory_variables, self.input_key)
        out_key = select_output_key(outputs, self.output_key, type(self).__name__)
        human, ai = check_storable(turn_messages(inputs[in_key], outputs[out_key]))
        return TurnParts(
            f"{in_key}: {message_text(human)}", f"{out_key}: {message_text(ai)}", human.id, ai.id
        )

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing."""
        self._turn_row(inputs, outputs, None)

    def _turn_row(
        self,
        inputs: Mapping[str, Any],
        outputs: Mapping[str, Any],
        metadata: Mapping[str, Any] | None,
    ) -> OutboxRow:
        parts = self._turn_parts(inputs, outputs)
        check_storable([HumanMessage(parts.text)])
        extra = check_metadata(metadata, what="save_context metadata")
        meta = {**self.metadata, **self.backend.bookkeeping(turn=True), **parts.metadata, **extra}
        return OutboxRow(uuid.uuid4().hex, parts.text, meta, needs_turn=True)

    # -- following edits of the messages a turn was made of ---------------------------

    def _delete_messages_steps(self, ids: Sequence[str], /) -> Steps[None]:
        """Delete the documents of turns made of these messages (by message id).

        A turn's document knows its messages' ids when they had ids: messages
        saved by an agent (``save_messages``, the middleware, the LangGraph
        nodes) or passed as message objects to ``save_context``. Ids of no
        document delete nothing.
        """
        yield from self._delete_steps(filter=of_messages(ids))

    delete_messages, adelete_messages = twins(_delete_messages_steps)

    def _edit_message_steps(self, id: str, new_message: BaseMessage, /) -> Steps[None]:
        """Re-index the turn made of message ``id`` with ``new_message``'s text in its place."""
        checked = checked_message(new_message)
        found = yield step(self.backend.find, of_messages([id]))
        rows = [edited(doc, id, checked) for doc in found]
        if rows:
            yield step(self.backend.add, rows, progress=False)

    edit_message, aedit_message = twins(_edit_message_steps)
