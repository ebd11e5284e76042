"""``ExampleMemory``: episodic memory, past interactions recalled as few-shot examples.

Each example is a document of the vector store (through
:class:`~memories.long_term.indexed.DocumentMemory`): its text, matched against
a new input, is the values of ``input_keys``, as LangChain's selectors embed
them; its metadata holds the values (``"example"``, JSON), an agent turn's
messages (``"messages"``), the feedback score (``"feedback"``) and the caller's
keys. The memory is also a LangChain example selector.
"""

from __future__ import annotations

import contextvars
import json
import math
import uuid
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.example_selectors import BaseExampleSelector
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from pydantic import Field

from memories.core.parts import CountsTokens
from memories.errors import InvalidInputError
from memories.kernel.capabilities import Capabilities
from memories.kernel.embeddings import query_vector
from memories.kernel.keys import input_text_for, turn_messages_for
from memories.kernel.messages import (
    check_storable,
    checked_messages,
    dump_message,
    format_buffer,
    load_message,
    message_text,
)
from memories.kernel.steps import Steps, run, step, twins
from memories.long_term.indexed import DocumentMemory, checked_ids, show_progress
from memories.stores.recall import RecallConfig
from memories.stores.recall.config import RecallField
from memories.stores.vector.backend import VectorQuery
from memories.stores.vector.filters import NAMESPACE_KEY, MetadataField, check_metadata
from memories.stores.vector.outbox import OutboxRow
from memories.stores.vector.records import SearchResult

__all__ = ["Example", "ExampleMemory"]

#: Metadata keys the memory keeps for itself on every example document.
EXAMPLE_KEY = "example"
MESSAGES_KEY = "messages"
FEEDBACK_KEY = "feedback"
_OWN_KEYS = frozenset({EXAMPLE_KEY, MESSAGES_KEY, FEEDBACK_KEY})
#: The key of an example that is the answer (what the AI message shows).
OUTPUT = "output"

# The id of the turn the last save_context stored, per thread and task.
_last_turn: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "memories_last_example_turn", default=None
)


@dataclass(frozen=True)
class Example:
    """One stored example, as a selection or a read found it."""

    id: str
    """Its id: rate it with :meth:`ExampleMemory.feedback`, delete it with ``delete([id])``."""
    values: dict[str, Any]
    """The example's values, e.g. ``{"input": "...", "output": "..."}``."""
    messages: tuple[BaseMessage, ...] = ()
    """The turn's messages when it came from a chain or agent run (tool calls whole), else ()."""
    feedback: float | None = None
    """The score given with :meth:`ExampleMemory.feedback`, or None."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The caller's metadata and the store's own (namespace, session, timestamp)."""
    score: float = 0.0
    """How well it matched the input; comparable only within one selection."""

    @classmethod
    def of(cls, result: SearchResult) -> Example:
        """The example a stored document holds."""
        meta = dict(result.metadata)
        stored = meta.pop(EXAMPLE_KEY, None)  # None: a raw document (an import, add())
        values = json.loads(stored) if stored is not None else {"input": result.text}
        messages = tuple(load_message(m) for m in json.loads(meta.pop(MESSAGES_KEY, "[]")))
        feedback = meta.pop(FEEDBACK_KEY, None)
        return cls(result.id, values, messages, feedback, meta, result.score)

    def as_messages(self) -> list[BaseMessage]:
        """The example as a few-shot exchange: the stored turn whole, else human then AI."""
        if self.messages:
            return list(self.messages)
        asked = "\n".join(str(v) for k, v in self.values.items() if k != OUTPUT)
        shown: list[BaseMessage] = [HumanMessage(asked)]
        if OUTPUT in self.values:
            shown.append(AIMessage(str(self.values[OUTPUT])))
        return shown


class ExampleMemory(DocumentMemory, CountsTokens, BaseExampleSelector):
    """Past interactions, recalled as the few-shot examples most like the current input.

    Arguments as LangChain's example selectors name them (``k``,
    ``input_keys``, ``example_keys``, ``fetch_k``), plus the store's and the
    namespace's (see :class:`~memories.long_term.indexed.DocumentMemory`:
    ``mode``, ``path``, ``namespace``, ``embeddings``, ...).

    Args:
        k: how many examples to show.
        recall: how examples are matched: ``{"mode": "dense"}`` (embedding
            similarity, as ``SemanticSimilarityExampleSelector``), ``"bm25"``
            (words) or ``"hybrid"`` (both, the default); no neighbour
            smoothing (examples are not a conversation).
        mmr: pick diverse examples by maximal marginal relevance among the
            ``fetch_k`` best (as ``MaxMarginalRelevanceExampleSelector``).
        fetch_k: how many candidates MMR (and a token budget) chooses from.
        lambda_mult: MMR's balance: 1 is pure relevance, 0 pure diversity.
        max_tokens: the most tokens the shown examples may take together;
            the best examples that fit are kept (None: no budget).
        min_feedback: show only examples rated at least this with
            :meth:`feedback` (None: every example, rated or not).
        filter: a metadata filter every selection applies (Chroma's syntax).
        input_keys: the keys whose values are matched; default every key but
            ``"output"``.
        example_keys: the keys :meth:`select_examples` returns; default all.
        record_turns: store every ``save_context`` / ``save_messages`` turn as an example.
        memory_key: the prompt variable the examples fill.
        input_key: the chain input to store and match; default the only one.
        output_key: the chain output to store; default the only one.
        return_messages: give the examples as messages (human/AI pairs).
        human_prefix: the speaker name of human messages in the string form.
        ai_prefix: the speaker name of AI messages in the string form.
        token_counter: how ``max_tokens`` counts (see :mod:`memories.kernel.tokens`).
    """

    config_type: ClassVar[str] = "examples"
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace", searchable=True, exportable=True, deferred=True, expires=True
    )

    collection: str = "examples"
    recall: RecallField = Field(default_factory=lambda: RecallConfig(neighbour_weight=0.0))
    mmr: bool = False
    fetch_k: int = Field(default=20, ge=1)
    lambda_mult: float = Field(default=0.5, ge=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, gt=0)
    min_feedback: float | None = None
    filter: MetadataField | None = None
    input_keys: list[str] | None = None
    example_keys: list[str] | None = None
    record_turns: bool = True
    memory_key: str = "examples"
    return_messages: bool = False
    human_prefix: str = "Human"
    ai_prefix: str = "AI"

    @classmethod
    def from_examples(
        cls,
        examples: Sequence[Mapping[str, Any]],
        embeddings: Any = None,
        vectorstore_cls: Any = None,
        *,
        progress: bool | None = None,
        **options: Any,
    ) -> ExampleMemory:
        """A memory holding ``examples``: LangChain's ``from_examples`` signature.

        ``vectorstore_cls`` is accepted so that a call written for
        ``SemanticSimilarityExampleSelector.from_examples(examples, embeddings,
        Chroma, k=2)`` runs unchanged; the examples always go to this memory's
        Chroma store, and any other class is warned about.
        """
        if vectorstore_cls is not None and getattr(vectorstore_cls, "__name__", "") != "Chroma":
            warnings.warn(
                f"ExampleMemory keeps examples in its own Chroma store; {vectorstore_cls!r} "
                "is not used.",
                stacklevel=2,
            )
        memory = cls(embeddings=embeddings, **options)
        memory.add_examples(examples, progress=progress)
        return memory

    # -- adding examples ------------------------------------------------------

    def _add_example_steps(
        self, example: Mapping[str, Any], *, metadata: Mapping[str, Any] | None = None
    ) -> Steps[str]:
        """Store one example (a dict of its values); returns its id.

        Raises:
            InvalidInputError: the example is not a dict of JSON values with
                text under its input keys; nothing is stored.
        """
        row = self._example_row(example, metadata, what="example")
        yield from self._storing(step(self.backend.add, [row], progress=False), [row.doc_id])
        return row.doc_id

    add_example, aadd_example = twins(_add_example_steps)

    def _add_examples_steps(
        self,
        examples: Sequence[Mapping[str, Any]],
        /,
        *,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        progress: bool | None = None,
    ) -> Steps[list[str]]:
        """Store many examples at once (a bulk import, in batches); returns their ids.

        Every example is checked before any is stored. ``progress`` shows a
        progress bar; by default for more than 1,000 examples.
        """
        rows = self._example_rows(examples, metadatas)
        adding = step(self.backend.add, rows, progress=show_progress(progress, rows))
        yield from self._storing(adding, [row.doc_id for row in rows])
        return [row.doc_id for row in rows]

    add_examples, aadd_examples = twins(_add_examples_steps)

    # -- feedback ---------------------------------------------------------------

    @property
    def last_turn_id(self) -> str | None:
        """The id of the example the last ``save_context`` in this thread (or task) stored."""
        return _last_turn.get()

    def _feedback_steps(self, example_id: str, score: float) -> Steps[Example]:
        """Rate an example (a turn's id, or an added example's); returns it as now stored.

        With ``min_feedback`` set, only examples rated at least that are shown.
        Rating again replaces the score.

        Raises:
            InvalidInputError: the score is not a finite number, or no example
                of this namespace has that id.
        """
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise InvalidInputError(f"score must be a finite number, got {score!r}.")
        found: list[SearchResult] = yield step(self.backend.get, [example_id])
        if not found:
            raise InvalidInputError(
                f"No example with id {example_id!r} in namespace {self.namespace!r}; ids come "
                "from add_example() or from last_turn_id after save_context()."
            )
        (stored,) = found
        meta = {k: v for k, v in stored.metadata.items() if k != NAMESPACE_KEY}
        meta[FEEDBACK_KEY] = float(score)
        row = OutboxRow(stored.id, stored.text, meta, needs_turn=False, replace=True)
        yield step(self.backend.add, [row], progress=False)
        return Example.of(SearchResult(stored.text, meta, 0.0, stored.id))

    feedback, afeedback = twins(_feedback_steps)

    def get(self, ids: Sequence[str], /) -> list[Example]:
        """The examples of this namespace with these ids (unknown ids are left out)."""
        expired = run(self._expired_ids())
        return [Example.of(r) for r in self.backend.get(checked_ids(ids)) if r.id not in expired]

    # -- selecting --------------------------------------------------------------

    def _select_steps(
        self,
        query: str,
        /,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        min_feedback: float | None = None,
    ) -> Steps[list[Example]]:
        """The ``k`` examples that best match ``query``, best first.

        Args:
            k: how many; default ``self.k``.
            filter: a metadata filter, applied with ``self.filter``.
            min_feedback: the lowest feedback score shown; default ``self.min_feedback``.
        """
        request = self._request(query, k, filter)
        floor = self.min_feedback if min_feedback is None else min_feedback
        clauses = [c for c in (self.filter, request.where) if c]
        if floor is not None:
            clauses.append({FEEDBACK_KEY: {"$gte": float(floor)}})
        combined = clauses[0] if len(clauses) == 1 else {"$and": clauses} if clauses else None
        wanted = request.k or self.k
        wide = self.mmr or self.max_tokens is not None
        found: list[SearchResult] = yield from self._live_search(
            VectorQuery(request.text, max(wanted, self.fetch_k) if wide else wanted, combined)
        )
        examples = [Example.of(r) for r in found]
        if self.mmr and len(examples) > 1:
            target = yield from query_vector(self.embedder, request.text)
            vectors = yield step(self.backend.vectors, [e.id for e in examples])
            examples = _diverse(examples, target, vectors, self.lambda_mult)
        return self._within_budget(examples, wanted)

    select, aselect = twins(_select_steps)

    def _select_examples_steps(
        self, input_variables: dict[str, Any]
    ) -> Steps[list[dict[str, Any]]]:
        """LangChain's selector method: the examples' values for a prompt's input variables."""
        examples = yield from self._select_steps(self._query_text(input_variables))
        return [self._returned(e) for e in examples]

    select_examples, aselect_examples = twins(_select_examples_steps)

    def _within_budget(self, examples: list[Example], k: int) -> list[Example]:
        """The first ``k`` examples that fit ``max_tokens`` together, in their order."""
        if self.max_tokens is None:
            return examples[:k]
        kept: list[Example] = []
        used = 0
        for example in examples:
            cost = self._counter(example.as_messages())
            if used + cost <= self.max_tokens:
                kept.append(example)
                used += cost
            if len(kept) == k:
                break
        return kept

    # -- LangChain's memory interface -----------------------------------------

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing."""
        turn_messages_for(self, inputs, outputs)

    def _save_context_steps(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        turn_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Steps[None]:
        """Store the run as an example (unless ``record_turns`` is off).

        Args:
            turn_id: the id to store it under (your run id, to rate it later);
                default a new one, readable as :attr:`last_turn_id`.
            metadata: metadata for this example.
        """
        turn = turn_messages_for(self, inputs, outputs)
        yield from self._recording(self._turn_row(turn, turn_id, metadata), turn_id)

    save_context, asave_context = twins(_save_context_steps)

    def _save_messages_steps(
        self,
        messages: Sequence[BaseMessage],
        /,
        *,
        turn_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Steps[None]:
        """Store an agent turn whole (human message, tool calls, results, answer) as an example."""
        row = self._turn_row(_agent_turn(messages), turn_id, metadata)
        yield from self._recording(row, turn_id)

    save_messages, asave_messages = twins(_save_messages_steps)

    def _recording(self, row: OutboxRow | None, turn_id: str | None) -> Steps[None]:
        if row is not None:  # None: record_turns is off
            saving = step(self.backend.save, row)
            yield from self._storing(saving, [row.doc_id], chosen=turn_id is not None)

    def _load_memory_variables_steps(self, inputs: dict[str, Any]) -> Steps[dict[str, Any]]:
        """``{memory_key: examples}``: few-shot exchanges as a string, or as messages."""
        found = yield from self._select_steps(input_text_for(self, inputs))
        return {self.memory_key: self._shown(found)}

    load_memory_variables, aload_memory_variables = twins(_load_memory_variables_steps)

    # -- building documents and prompt values (pure) ----------------------------

    def _matched_keys(self, values: Mapping[str, Any]) -> list[str]:
        if self.input_keys is not None:
            return list(self.input_keys)
        return sorted(k for k in values if k != OUTPUT)

    def _example_text(self, values: Mapping[str, Any], what: str) -> str:
        """The text an example is matched by: its input keys' values, as LangChain joins them."""
        keys = self._matched_keys(values)
        missing = [k for k in keys if k not in values]
        if missing or not keys:
            raise InvalidInputError(
                f"{what} has no value for the input key(s) {missing or ['(none)']}; it has "
                f"{sorted(values)}. Give every key of input_keys={self.input_keys!r}."
            )
        wrong = [k for k in keys if not isinstance(values[k], str)]
        if wrong:
            raise InvalidInputError(
                f"{what}[{wrong[0]!r}] = {values[wrong[0]]!r:.80} is not text; the values "
                "an example is matched by must be strings."
            )
        text = " ".join(values[k] for k in keys)
        check_storable([HumanMessage(text)])
        return text

    def _example_row(
        self,
        example: Any,
        metadata: Mapping[str, Any] | None,
        *,
        what: str,
        doc_id: str | None = None,
        messages: Sequence[BaseMessage] = (),
    ) -> OutboxRow:
        if not isinstance(example, Mapping) or not all(isinstance(k, str) for k in example):
            raise InvalidInputError(f"{what} must be a dict with string keys, got {example!r:.80}.")
        values = dict(example)
        text = self._example_text(values, what)
        try:
            encoded = json.dumps(values, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"{what} must hold JSON values: {exc}.") from exc
        given = check_metadata(metadata, what=f"{what} metadata")
        clash = sorted(_OWN_KEYS & given.keys())
        if clash:
            raise InvalidInputError(
                f"{what} metadata sets {clash}, which the example memory keeps for itself."
            )
        meta = {**self.metadata, **self.backend.bookkeeping(turn=False), **given}
        meta[EXAMPLE_KEY] = encoded
        if messages:
            meta[MESSAGES_KEY] = json.dumps([dump_message(m) for m in messages])
        row_id = doc_id or uuid.uuid4().hex
        return OutboxRow(row_id, text, meta, needs_turn=False, replace=doc_id is not None)

    def _example_rows(
        self,
        examples: Sequence[Mapping[str, Any]],
        metadatas: Sequence[Mapping[str, Any] | None] | None,
    ) -> list[OutboxRow]:
        if isinstance(examples, Mapping | str) or not isinstance(examples, Sequence):
            raise InvalidInputError(f"examples must be a list of dicts, got {examples!r:.80}.")
        if metadatas is not None and len(metadatas) != len(examples):
            raise InvalidInputError(f"Got {len(metadatas)} metadatas for {len(examples)} examples.")
        return [
            self._example_row(e, metadatas[i] if metadatas else None, what=f"examples[{i}]")
            for i, e in enumerate(examples)
        ]

    def _turn_row(
        self,
        messages: list[BaseMessage],
        turn_id: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> OutboxRow | None:
        if turn_id is not None and (not isinstance(turn_id, str) or not turn_id):
            raise InvalidInputError(f"turn_id must be a non-empty string, got {turn_id!r}.")
        human = next(m for m in messages if isinstance(m, HumanMessage))
        answer = next(m for m in reversed(messages) if isinstance(m, AIMessage))
        values = {"input": message_text(human), OUTPUT: message_text(answer)}
        whole = messages if len(messages) > 2 or _has_tool_calls(messages) else ()
        doc_id = turn_id or uuid.uuid4().hex
        row = self._example_row(values, metadata, what="turn", doc_id=doc_id, messages=whole)
        if not self.record_turns:
            return None
        _last_turn.set(doc_id)
        return row

    def _query_text(self, input_variables: Mapping[str, Any]) -> str:
        if not isinstance(input_variables, Mapping):
            raise InvalidInputError(
                f"input_variables must be a dict, got {type(input_variables).__name__}."
            )
        keys = self.input_keys if self.input_keys is not None else sorted(input_variables)
        return " ".join(str(input_variables[k]) for k in keys if k in input_variables)

    def _returned(self, example: Example) -> dict[str, Any]:
        if self.example_keys is None:
            return dict(example.values)
        return {k: example.values[k] for k in self.example_keys if k in example.values}

    def _shown(self, examples: list[Example]) -> str | list[BaseMessage]:
        if self.return_messages:
            return [m for e in examples for m in e.as_messages()]
        return "\n\n".join(
            format_buffer(e.as_messages(), self.human_prefix, self.ai_prefix) for e in examples
        )


def _diverse(
    examples: list[Example],
    target: Sequence[float],
    vectors: Mapping[str, Sequence[float]],
    lambda_mult: float,
) -> list[Example]:
    """The examples reordered by maximal marginal relevance (LangChain's own function)."""
    import numpy as np  # with Chroma, as the whole module

    known = [e for e in examples if e.id in vectors]
    order = maximal_marginal_relevance(
        np.array(target, dtype=np.float32),
        [list(vectors[e.id]) for e in known],
        lambda_mult=lambda_mult,
        k=len(known),
    )
    return [known[i] for i in order]


def _agent_turn(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    checked = checked_messages(messages)
    if not any(isinstance(m, HumanMessage) for m in checked) or not any(
        isinstance(m, AIMessage) for m in checked
    ):
        raise InvalidInputError(
            "An example turn needs a human message and an AI answer; got "
            f"{[m.type for m in checked]}."
        )
    return checked


def _has_tool_calls(messages: Sequence[BaseMessage]) -> bool:
    return any(isinstance(m, AIMessage) and m.tool_calls for m in messages)
