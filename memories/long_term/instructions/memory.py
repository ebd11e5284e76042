"""``InstructionsMemory``: procedural memory, the agent's instructions refined from feedback.

One or several named prompts, kept as one versioned document per namespace in
the profile store and revised by a model reflecting on the queued turns and
feedback (docs/memories/instructions.md). The document in the store::

    {"prompts": {"main": "..."},
     "revision": {"reasons": {"main": "..."}, "diffs": {"main": "--- ..."}},
     "proposal": {"prompts": {...}, "revision": {...}, "base_version": 3}}
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import jsonpatch
from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import Field

from memories.errors import ConfigError, InvalidInputError
from memories.kernel.background import MemoryStatus
from memories.kernel.capabilities import Capabilities
from memories.kernel.conversation import conversing
from memories.kernel.steps import Steps, step, twins
from memories.long_term.instructions.reflection import (
    Feedback,
    RevisionSession,
    feedback_message,
    feedback_of,
    reflection_prompt,
)
from memories.long_term.stored import MAX_CONFLICTS, ExpiringDocumentMemory, batches_until
from memories.stores.documents import (
    PendingTurn,
    ProfileChange,
    ProfileItem,
    current,
    replacing,
    version_of,
)

__all__ = [
    "InstructionsMemory",
    "InstructionsStatus",
    "InstructionsVersion",
    "ReflectionResult",
]


Policy = Literal["feedback", "every_n", "background", "manual"]
Outcome = Literal["revised", "proposed", "unchanged", "failed", "idle", "awaiting_approval"]


@dataclass(frozen=True)
class InstructionsVersion:
    """One entry of the history: a version of the prompts, or a failed reflection."""

    version: int | None
    """The version it created (None for a failed reflection)."""
    kind: str
    """``revision``, ``proposal``, ``approve``, ``reject``, ``put``, ``rollback``,
    ``clear`` or ``failed``."""
    created_at: float
    """When (Unix time)."""
    prompts: dict[str, str]
    """The prompts as they stood after it."""
    reasons: dict[str, str] = field(default_factory=dict)
    """Why each changed prompt changed (a proposal's reasons for a ``proposal``)."""
    diffs: dict[str, str] = field(default_factory=dict)
    """A unified diff per changed prompt."""
    turns: tuple[tuple[BaseMessage, ...], ...] = ()
    """The conversation turns that caused it (feedback left out)."""
    feedback: tuple[Feedback, ...] = ()
    """The feedback that caused it."""
    error: str | None = None
    """Why a reflection failed."""


@dataclass(frozen=True)
class ReflectionResult:
    """What :meth:`InstructionsMemory.refresh` did."""

    status: Outcome
    """``revised``: a new version; ``proposed``: a revision waits for approval;
    ``unchanged``: the model kept the prompts; ``failed``: recorded, turns kept;
    ``idle``: nothing queued; ``awaiting_approval``: an earlier proposal waits."""
    version: int
    """The version afterwards (0: the initial prompts)."""
    turns: int = 0
    """How many queued turns and feedback items it consumed."""
    error: str | None = None
    """Why it failed."""


@dataclass(frozen=True)
class InstructionsStatus(MemoryStatus):
    """Where the instructions stand; ``pending`` counts queued turns and feedback."""

    version: int = 0
    """The current version (0: the initial prompts)."""
    proposal: bool = False
    """Whether a proposed revision waits for :meth:`InstructionsMemory.approve`."""


class InstructionsMemory(ExpiringDocumentMemory):
    """An agent's instructions, kept as versioned prompts and revised from feedback.

    Args:
        prompts: the initial prompts by name, e.g. ``{"main": "You are ..."}``,
            or one string (named ``"main"``); shown until a version is stored.
        llm: the model that reflects and revises (a LangChain model, or
            ``"provider:model"``); needed unless ``policy="manual"`` and the
            prompts are only written with :meth:`put`.
        namespace: whose instructions these are (an agent, a user).
        key: the name of this set of prompts within the namespace.
        pinned: passages the model may never remove or change (each must be
            in one of the initial prompts).
        max_tokens: the most tokens one prompt may have after a revision.
        approval: keep each revision as a proposal until :meth:`approve`
            (or :meth:`reject`) instead of applying it.
        policy: when the model reflects: ``"feedback"`` (when feedback
            arrives), ``"every_n"`` (every ``every_n`` queued items),
            ``"background"`` (after ``debounce`` seconds of quiet) or
            ``"manual"`` (:meth:`refresh`).
        every_n: the queued turns and feedback items per reflection under ``"every_n"``.
        ttl: minutes the revised instructions live after their last write (then
            the base ``prompts`` show again); None: forever.

    The other arguments (``url``, ``max_retries``, ``instructions``,
    ``memory_key``, ``refresh_on_read``...) are those of
    :class:`~memories.long_term.stored.ExpiringDocumentMemory` and its parts.
    """

    config_type: ClassVar[str] = "instructions"
    store_owner: ClassVar[str | None] = "instructions"
    each_turn: ClassVar[tuple[str, ...]] = ()  # feedback or every_n turns
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace", deferred=True, expires=True
    )

    prompts: dict[str, str] = Field(default_factory=lambda: {"main": ""})
    key: str = Field(default="instructions", min_length=1)
    pinned: list[str] = Field(default_factory=list)
    max_tokens: int = Field(default=1000, gt=0)
    approval: bool = False
    policy: Policy = "feedback"
    every_n: int = Field(default=5, gt=0)
    max_turns_per_update: int = Field(default=20, gt=0)
    memory_key: str = Field(default="instructions", min_length=1)

    def __init__(self, **data: Any) -> None:
        if isinstance(data.get("prompts"), str):
            data["prompts"] = {"main": data["prompts"]}
        super().__init__(**data)

    def model_post_init(self, context: Any, /) -> None:
        if self.llm is None and self.policy != "manual":
            raise ConfigError(
                f"policy {self.policy!r} revises the instructions with a model, but llm is None. "
                "Pass llm=..., or use policy='manual' and write with put()."
            )
        if not self.prompts or not all(isinstance(t, str) for t in self.prompts.values()):
            raise ConfigError(
                f"prompts must map names to texts, e.g. {{'main': 'You are ...'}}; "
                f"got {self.prompts!r:.80}."
            )
        for passage in self.pinned:
            if not passage or not any(passage in t for t in self.prompts.values()):
                raise ConfigError(
                    f"The pinned passage {passage!r:.80} is in none of the prompts "
                    f"{sorted(self.prompts)}; pin text exactly as it appears in a prompt."
                )
        super().model_post_init(context)

    def _current(self, item: ProfileItem | None) -> dict[str, str]:
        return dict(current(item).get("prompts") or self.prompts)

    def _get_steps(self) -> Steps[dict[str, str]]:
        """The prompts as they stand, by name."""
        return self._current((yield step(self._store.load, self.namespace, self.key)))

    get, aget = twins(_get_steps)

    def prompt(self, name: str = "main", /) -> str:
        """One prompt's current text.

        Raises:
            InvalidInputError: there is no prompt of that name.
        """
        prompts = self.get()
        if name not in prompts:
            raise InvalidInputError(f"No prompt named {name!r}; the prompts are {sorted(prompts)}.")
        return prompts[name]

    def proposal(self) -> InstructionsVersion | None:
        """The revision waiting for :meth:`approve`, or None."""
        return _proposal_of(self._store.load(self.namespace, self.key))

    def _history_steps(self, *, failures: bool = True) -> Steps[list[InstructionsVersion]]:
        """Every version (and failed reflection, unless ``failures=False``), oldest first."""
        failed = None if failures else False
        changes = yield step(self._store.changes, self.namespace, self.key, failed=failed)
        return [self._version(c) for c in changes]

    history, ahistory = twins(_history_steps)

    def _version(self, change: ProfileChange) -> InstructionsVersion:
        document = change.document or {}
        shown = document.get("proposal") if change.kind == "proposal" else document
        revision = (shown or {}).get("revision") or {}
        turns = tuple(t for t in change.turns if not any(map(feedback_of, t)))
        feedback = tuple(f for t in change.turns for f in map(feedback_of, t) if f is not None)
        return InstructionsVersion(
            version=None if change.error else change.version,
            kind="failed" if change.error else change.kind,
            created_at=change.created_at,
            prompts=dict(document.get("prompts") or self.prompts),
            reasons=dict(revision.get("reasons") or {}),
            diffs=dict(revision.get("diffs") or {}),
            turns=turns,
            feedback=feedback,
            error=change.error,
        )

    def _status_steps(self) -> Steps[InstructionsStatus]:
        """The version, the queued items, a waiting proposal, the last failure if unresolved."""
        (item, _, _), shown = yield from self._standing()
        return InstructionsStatus(
            **shown,
            version=version_of(item),
            proposal=_proposal_of(item) is not None,
        )

    status, astatus = twins(_status_steps)

    def _render(self, prompts: Mapping[str, str]) -> str:
        if len(prompts) == 1:
            return next(iter(prompts.values()))
        return "\n\n".join(f"## {name}\n{body}" for name, body in prompts.items() if body)

    def _feedback_steps(
        self, score: float | None = None, comment: str | None = None
    ) -> Steps[None]:
        """Queue feedback on the agent's recent conversations (then reflect under ``"feedback"``).

        Raises:
            InvalidInputError: neither a finite score nor a comment was given.
        """
        return self._queueing([feedback_message(score, comment)], due=self.policy == "feedback")

    feedback, afeedback = twins(_feedback_steps)

    def _showing(self, inputs: Mapping[str, Any]) -> Steps[str]:
        return self._render((yield from self._get_steps()))

    def _committing(self, plan: Any, kind: str, expected: int | None = None) -> Steps[int]:
        """Write the prompts ``plan`` makes from the stored document, as a change of ``kind``."""
        return self._writing_document(lambda item: replacing(plan(item), kind)(item), expected)

    def _put_steps(
        self,
        prompts: Mapping[str, str] | str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> Steps[int]:
        """Replace the prompts (a dict by name, or one text for ``"main"``); returns the version.

        Pins and the budget bind the model, not you; an unknown name adds a prompt.

        Args:
            expected_version: write only if the instructions are still at this
                version (``status().version``; 0: never written).

        Raises:
            InvalidInputError: not a dict of texts.
            VersionConflictError: they moved past ``expected_version``.
        """
        given = {"main": prompts} if isinstance(prompts, str) else prompts
        if not isinstance(given, Mapping) or not all(
            isinstance(n, str) and n and isinstance(t, str) for n, t in given.items()
        ):
            raise InvalidInputError(
                f"prompts must be a dict of names to texts (or one text); got {prompts!r:.80}."
            )

        def plan(item: ProfileItem | None) -> dict[str, Any]:
            old = self._current(item)
            new = {**old, **given}
            document = _document(old, new, dict.fromkeys(given, reason or "set by hand"))
            return _keeping_proposal(document, item)

        return self._committing(plan, "put", expected_version)

    put, aput = twins(_put_steps)

    def _rollback_steps(self, version: int, *, expected_version: int | None = None) -> Steps[int]:
        """Restore the prompts of ``version`` as a new version; returns that new version.

        Raises:
            InvalidInputError: there is no such version.
            VersionConflictError: they moved past ``expected_version`` (as in :meth:`put`).
        """
        if version == 0:
            target = dict(self.prompts)
        else:
            found = yield step(self._store.changes, self.namespace, self.key, version=version)
            if not found or found[0].document is None:
                raise InvalidInputError(
                    f"The instructions {self.key!r} in {self.namespace!r} have no version "
                    f"{version}; history() lists them (0 is the initial prompts)."
                )
            target = dict(found[0].document["prompts"])

        def plan(item: ProfileItem | None) -> dict[str, Any]:
            old = self._current(item)
            reasons = dict.fromkeys(target, f"rollback to version {version}")
            return _keeping_proposal(_document(old, target, reasons), item)

        return (yield from self._committing(plan, "rollback", expected_version))

    rollback, arollback = twins(_rollback_steps)

    def _approve_steps(self) -> Steps[int]:
        """Apply the waiting proposal; returns the new version.

        Raises:
            InvalidInputError: no proposal waits, or the prompts changed since
                it was made (reject it; the next reflection proposes anew).
        """
        return self._deciding(approve=True, reason=None)

    approve, aapprove = twins(_approve_steps)

    def _reject_steps(self, reason: str | None = None) -> Steps[int]:
        """Discard the waiting proposal (kept in the history with ``reason``); returns the version.

        Raises:
            InvalidInputError: no proposal waits.
        """
        return self._deciding(approve=False, reason=reason)

    reject, areject = twins(_reject_steps)

    def _deciding(self, *, approve: bool, reason: str | None) -> Steps[int]:
        def plan(item: ProfileItem | None) -> dict[str, Any]:
            proposal = current(item).get("proposal")
            if proposal is None:
                raise InvalidInputError(
                    f"No proposal waits for the instructions {self.key!r} in {self.namespace!r}."
                )
            if not approve:
                why = f"rejected: {reason or 'no reason given'}"
                diffs = proposal["revision"]["diffs"]
                note = {"reasons": dict.fromkeys(diffs, why), "diffs": diffs}
                return {"prompts": self._current(item), "revision": note}
            if proposal["base_version"] != version_of(item) - 1:
                raise InvalidInputError(
                    "The prompts changed after this proposal was made; reject() it and let the "
                    "next reflection propose again."
                )
            return {"prompts": proposal["prompts"], "revision": proposal["revision"]}

        return (yield from self._committing(plan, "approve" if approve else "reject"))

    def _refresh_steps(self) -> Steps[ReflectionResult]:
        """Reflect on the queued turns and feedback now, and revise (or propose).

        Batch by batch; stops at a failure or a proposal.

        Raises:
            ConfigError: the memory has no llm.
        """
        first = ReflectionResult("idle", 0)
        going = ("revised", "unchanged")
        return (yield from batches_until(self._reflecting_batch, first, going=going, rank=_RANK))

    refresh, arefresh = twins(_refresh_steps)

    def _reflecting_batch(self) -> Steps[ReflectionResult]:
        """One reflection on at most ``max_turns_per_update`` queued items."""
        caller = self._caller
        if caller is None:
            raise ConfigError(
                "This InstructionsMemory has no llm, so it cannot reflect. Pass llm=..., or "
                "write the prompts with put()."
            )
        store, ns, key = self._store, self.namespace, self.key
        for _ in range(MAX_CONFLICTS):
            item = yield step(store.load, ns, key)
            version = version_of(item)
            if _proposal_of(item) is not None:
                return ReflectionResult("awaiting_approval", version)
            turns = yield step(store.pending, ns, key, limit=self.max_turns_per_update)
            if not turns:
                return ReflectionResult("idle", version)
            prompts = self._current(item)
            outcome = yield from conversing(self._session(prompts, turns), caller)
            if outcome.error is not None:
                yield from self._failing(turns, outcome.error, outcome.raw)
                return ReflectionResult("failed", version, 0, outcome.error)
            if not outcome.revisions:
                yield step(store.drop_pending, ns, key, [t.id for t in turns])
                return ReflectionResult("unchanged", version, len(turns))
            new = {**prompts, **{r.prompt: r.text for r in outcome.revisions}}
            revised = _document(prompts, new, {r.prompt: r.reason for r in outcome.revisions})
            kind = "proposal" if self.approval else "revision"
            if self.approval:
                revised = {
                    "prompts": prompts,
                    "proposal": {**revised, "base_version": version},
                }
            written = yield step(
                store.commit,
                *(ns, key, revised),
                expected_version=version,
                kind=kind,
                patch=jsonpatch.make_patch(current(item), revised).patch,
                turns=turns,
            )
            if written is not None:
                done: Outcome = "proposed" if self.approval else "revised"
                return ReflectionResult(done, written.version, len(turns))
        error = f"the instructions changed {MAX_CONFLICTS} times during reflection"
        yield from self._failing(turns, error, [])  # its turns stay queued
        return ReflectionResult("failed", version, 0, error)

    def _session(self, prompts: dict[str, str], turns: Sequence[PendingTurn]) -> RevisionSession:
        opening = reflection_prompt(
            prompts,
            turns,
            pinned=self.pinned,
            budget=self.max_tokens,
            instructions=self.instructions,
        )
        return RevisionSession(
            opening,
            self.max_retries,
            prompts,
            self.pinned,
            self.max_tokens,
            lambda text: self._counter([HumanMessage(text)]),
        )


_RANK = {
    "idle": 0,
    "unchanged": 1,
    "revised": 2,
    "proposed": 3,
    "awaiting_approval": 3,
    "failed": 4,
}


def _document(
    old: Mapping[str, str], new: Mapping[str, str], reasons: Mapping[str, str]
) -> dict[str, Any]:
    """The stored document for prompts ``new``, with the reasons and diffs of what changed."""
    changed = [n for n in new if new[n] != old.get(n)]
    # one diff line per line of text: with keepends, a last line without its newline would be
    # glued to the next ("-You are brief.+You are kind.")
    diffs = {
        n: "\n".join(
            difflib.unified_diff(
                old.get(n, "").splitlines(),
                new[n].splitlines(),
                fromfile=f"{n} (before)",
                tofile=f"{n} (after)",
                lineterm="",
            )
        )
        for n in changed
    }
    kept = {n: r for n, r in reasons.items() if n in changed}
    return {"prompts": dict(new), "revision": {"reasons": kept, "diffs": diffs}}


def _keeping_proposal(document: dict[str, Any], item: ProfileItem | None) -> dict[str, Any]:
    """``document`` with the proposal waiting in ``item`` (a write by hand does not decide it)."""
    proposal = current(item).get("proposal")
    return document if proposal is None else {**document, "proposal": proposal}


def _proposal_of(item: ProfileItem | None) -> InstructionsVersion | None:
    proposal = current(item).get("proposal")
    if proposal is None or item is None:
        return None
    revision = proposal.get("revision") or {}
    return InstructionsVersion(
        version=None,
        kind="proposal",
        created_at=item.updated_at,
        prompts=dict(proposal["prompts"]),
        reasons=dict(revision.get("reasons") or {}),
        diffs=dict(revision.get("diffs") or {}),
    )
