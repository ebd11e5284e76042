"""One update of a profile from conversation turns, as a state machine with no I/O.

:class:`UpdateSession` builds the prompts, applies each reply's patch to a copy,
validates it and sends every error back (bounded); the memory's sync and async
paths drive the same session. A document over the token budget is updated
section by section (docs/memories/profile.md, "Large profiles").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.runnables import Runnable

from memories.errors import InvalidProfileError, LLMError
from memories.kernel.background import merged_batches
from memories.kernel.conversation import OperationsReply, UpdateMethod, bind_reply_tool, conversing
from memories.kernel.llm import ModelCaller
from memories.kernel.messages import format_buffer
from memories.kernel.namespaces import Namespace
from memories.kernel.patching import (
    PATCH_TOOL,
    PATCH_TOOL_NAME,
    Section,
    apply_operations,
    check_operations,
    extract_operations,
    plan_sections,
)
from memories.kernel.steps import Steps, step
from memories.long_term.profile.schema import ProfileSchema
from memories.long_term.stored import MAX_CONFLICTS, batches_until
from memories.stores.documents import (
    BaseProfileStore,
    PendingTurn,
    ProfileItem,
    current,
    version_of,
)

__all__ = [
    "UpdateMethod",
    "UpdateOutcome",
    "UpdateResult",
    "UpdateSession",
    "Updater",
    "bind_patch_tool",
    "build_prompt",
    "merge_results",
]


_RANK = {"idle": 0, "frozen": 1, "unchanged": 2, "updated": 3, "failed": 4}

_SYSTEM = """\
You keep a JSON document up to date: the profile {name}. It must always match this JSON Schema:
{schema}

You are shown the current document and the newest conversation turns. Decide what the turns \
tell you that the document should record, and write the changes as RFC 6902 JSON Patch \
operations:
- "add" creates a field, or appends to an array with the path "/array/-";
- "replace" changes a value that exists;
- "remove" deletes a value, only when the conversation says it is no longer true;
- paths are JSON Pointers from the document root, such as "/preferences/food".
Keep everything the turns do not contradict. Record only what the turns state or clearly \
imply. Never replace the whole document.{instructions}

{reply_format}"""

_TOOL_FORMAT = (
    f"Call the {PATCH_TOOL_NAME} tool with the operations; call it with an empty list when "
    "nothing should change."
)
_TEXT_FORMAT = (
    "Reply with only the JSON array of operations and nothing else, for example "
    '[{"op": "replace", "path": "/some/field", "value": "new value"}]. '
    "Reply [] when nothing should change."
)


def build_prompt(
    *,
    schema: ProfileSchema,
    document: Any,
    turns: Sequence[Sequence[BaseMessage]],
    name: str,
    instructions: str | None,
    tools: bool,
    section: Section | None = None,
) -> list[BaseMessage]:
    """The first two messages of an update: the rules, then the document and the turns."""
    system = _SYSTEM.format(
        name=json.dumps(name),
        schema=schema.text(),
        instructions=f"\n\n{instructions.strip()}" if instructions else "",
        reply_format=_TOOL_FORMAT if tools else _TEXT_FORMAT,
    )
    if section is None:
        shown = f"Current document:\n{json.dumps(document, ensure_ascii=False)}"
    else:
        shown = (
            "The document is large, so you see only part of it: the values at these paths, "
            "as an object from JSON Pointer to value:\n"
            f"{json.dumps(section.view(document), ensure_ascii=False)}\n"
            "Change only paths inside these."
        )
        if section.adds_new:
            shown += " You may also add new fields that the document does not have yet."
    transcript = format_buffer([m for turn in turns for m in turn], "Human", "AI")
    return [
        SystemMessage(content=system),
        HumanMessage(content=f"{shown}\n\nNew conversation turns:\n{transcript}"),
    ]


@dataclass(frozen=True)
class UpdateOutcome:
    """What one update produced."""

    document: Any
    """The new document (the old one when nothing changed or the update failed)."""
    operations: tuple[dict[str, Any], ...]
    """Every accepted operation, in the order applied."""
    raw: tuple[str, ...]
    """Every model reply, as text, in order."""
    error: str | None
    """Why the update failed, or None when it succeeded."""

    @property
    def ok(self) -> bool:
        """Whether the update succeeded (possibly changing nothing)."""
        return self.error is None


@dataclass
class UpdateSession(OperationsReply[Any]):
    """The steps of one update; drive it with :meth:`request` and :meth:`receive`.

    Args:
        opening: the first messages (:func:`build_prompt`; of the first section).
        max_retries: how many times an invalid reply is sent back per section.
        tools: whether the model answers through the ``update_profile`` tool.
        schema: what the result must match.
        document: the document to start from (never modified).
        sections: the plan for a large document, or None to show it whole.
        prompt: the first messages of a later section, from the document so far.
    """

    schema: ProfileSchema
    document: Any
    sections: list[Section] | None
    prompt: Callable[[Any, Section], list[BaseMessage]]
    _working: Any = field(init=False)
    _operations: list[dict[str, Any]] = field(init=False, default_factory=list)
    _section_index: int = field(init=False, default=0)

    tool_name = PATCH_TOOL_NAME

    def __post_init__(self) -> None:
        super().__post_init__()
        self._working = self.document

    @property
    def _section(self) -> Section | None:
        return self.sections[self._section_index] if self.sections else None

    def receive(self, reply: BaseMessage | str) -> None:
        """Take the model's reply: accept it (on to the next section), retry, or give up."""
        super().receive(reply if isinstance(reply, BaseMessage) else AIMessage(content=reply))
        following = self._section_index + 1
        if self.accepted is not None and self.sections and following < len(self.sections):
            self._section_index = following
            self._attempt, self._done, self._accepted = 0, False, None
            self._conversation = self.prompt(self._working, self.sections[following])

    def fail(self, error: str) -> None:
        """End the update as failed, saying in which section."""
        if self.sections:
            error += f" (section {self._section_index + 1} of {len(self.sections)})"
        super().fail(error)

    def outcome(self) -> UpdateOutcome:
        """The result; call it once :meth:`request` returns None."""
        if self._error is not None:
            return UpdateOutcome(self.document, (), tuple(self._raw), self._error)
        return UpdateOutcome(self._working, tuple(self._operations), tuple(self._raw), None)

    def _accept(self, reply: BaseMessage) -> Any:
        section = self._section
        try:
            operations = check_operations(
                extract_operations(reply),
                allow_root=False,
                allowed=section.allows if section is not None else None,
                scope=section.describe() if section is not None else "",
            )
            document = apply_operations(self._working, operations)
        except InvalidProfileError as exc:
            raise LLMError(str(exc)) from exc
        problems = self.schema.errors(document)
        if problems:
            raise LLMError(
                "The patched document does not match the schema:\n" + "\n".join(problems)
            )
        self._working = document
        self._operations.extend(operations)
        return document


@dataclass(frozen=True)
class UpdateResult:
    """What :meth:`ProfileMemory.refresh <memories.long_term.profile.ProfileMemory.refresh>` did."""

    status: Literal["updated", "unchanged", "failed", "idle", "frozen"]
    """``updated``: a new version; ``unchanged``: the turns changed nothing;
    ``failed``: recorded in the history, turns kept; ``idle``: no turns were
    queued; ``frozen``: a ``once`` profile is already written."""
    version: int
    """The profile's version afterwards (0: never written)."""
    turns: int = 0
    """How many queued turns were folded in."""
    error: str | None = None
    """Why the update failed."""


def merge_results(before: UpdateResult, after: UpdateResult) -> UpdateResult:
    """The result of several batches: the most telling status, the turns added up."""
    return merged_batches(before, after, _RANK)


def bind_patch_tool(
    model: Runnable[Any, Any], method: UpdateMethod
) -> tuple[Runnable[Any, Any], bool]:
    """The model with the patch tool bound (and whether it is), per ``update_method``.

    Raises:
        ConfigError: ``method`` is ``"tool"`` and the model has no tool calling.
    """
    return bind_reply_tool(model, PATCH_TOOL, PATCH_TOOL_NAME, method)


@dataclass(frozen=True)
class Updater:
    """One profile's refresh loop, as steps: fold the queued turns in, batch by batch.

    Each batch is an :class:`UpdateSession` (the model calls made unlocked)
    committed with compare-and-set, redone from the new version when another
    writer got in first (at most three times a batch).
    """

    store: BaseProfileStore
    namespace: Namespace
    key: str
    schema: ProfileSchema
    caller: ModelCaller
    model: Runnable[Any, Any]
    """The caller's model with the patch tool bound, when ``tools``."""
    tools: bool
    instructions: str | None
    max_retries: int
    max_document_tokens: int
    max_turns: int
    count: Callable[[str], int]
    once: bool
    """Whether the first stored document is frozen (the ``once`` policy)."""
    failing: Callable[[Sequence[PendingTurn], str, Sequence[str]], Steps[None]]
    """Records a failed update in the history and logs it (the memory's)."""

    def refreshing(self) -> Steps[UpdateResult]:
        """Fold every queued turn in, stopping at the first failed batch."""
        return (yield from batches_until(self._batch, UpdateResult("idle", 0), rank=_RANK))

    def _batch(self) -> Steps[UpdateResult]:
        """One model call's worth of queued turns, redone when another writer got in first."""
        store, ns, key = self.store, self.namespace, self.key
        for _ in range(MAX_CONFLICTS):
            item = yield step(store.load, ns, key)
            if self.once and item is not None and item.value is not None:
                return UpdateResult("frozen", version_of(item))
            turns = yield step(store.pending, ns, key, limit=self.max_turns)
            if not turns:
                return UpdateResult("idle", version_of(item))
            outcome = yield from conversing(self._session(item, turns), self.caller, self.model)
            if not outcome.ok:
                return (yield from self._giving_up(item, turns, outcome))
            if not outcome.operations:
                yield step(store.drop_pending, ns, key, [t.id for t in turns])
                return UpdateResult("unchanged", version_of(item), len(turns))
            written = yield step(
                store.commit,
                *(ns, key, outcome.document),
                expected_version=version_of(item),
                kind="update",
                patch=list(outcome.operations),
                turns=turns,
            )
            if written is not None:
                return UpdateResult("updated", written.version, len(turns))
        contended = replace(
            outcome,
            error=f"Other writers changed the profile {MAX_CONFLICTS} times while it "
            "was being updated; the turns are kept for the next update.",
        )
        return (yield from self._giving_up(item, turns, contended))

    def _session(self, item: ProfileItem | None, turns: Sequence[PendingTurn]) -> UpdateSession:
        document = current(item, self.schema.initial())
        sections = plan_sections(document, self.max_document_tokens, self.count)
        prompt = partial(
            build_prompt,
            schema=self.schema,
            turns=[turn.messages for turn in turns],
            name=self.key,
            instructions=self.instructions,
            tools=self.tools,
        )
        return UpdateSession(
            prompt(document=document, section=sections[0] if sections else None),
            self.max_retries,
            self.tools,
            self.schema,
            document,
            sections,
            lambda working, section: prompt(document=working, section=section),
        )

    def _giving_up(
        self, item: ProfileItem | None, turns: Sequence[PendingTurn], outcome: UpdateOutcome
    ) -> Steps[UpdateResult]:
        """Record a failed update (its turns stay queued) and say so."""
        error = outcome.error or ""
        yield from self.failing(turns, error, outcome.raw)
        return UpdateResult("failed", version_of(item), 0, error)
