"""``ProfileMemory``: one JSON document per user, kept current by a model through JSON patches.

What happens when (the update cycle) and how large profiles are updated:
:mod:`memories.profile`. The I/O is written once as loops of steps
(:mod:`memories.kernel.steps`) over the store's methods, run sync or async;
compare-and-set writes come from the store base
(:meth:`~memories.profile.store.BaseProfileStore.writing`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, ClassVar, Literal

import jsonpatch
import yaml
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from memories.base import BaseMemory
from memories.errors import ConfigError, InvalidInputError, InvalidProfileError, LLMError
from memories.kernel.background import BackgroundWork, Debouncer, MemoryStatus
from memories.kernel.capabilities import Capabilities
from memories.kernel.steps import Steps, arun, run, step
from memories.keys import turn_messages_for
from memories.llm import LLMField, ModelCaller
from memories.namespaces import Namespace, as_namespace
from memories.profile.patching import apply_operations, json_copy, parse_patch, plan_sections
from memories.profile.schema import ProfileSchema, schema_config
from memories.profile.store import (
    DEFAULT_URL,
    Change,
    PendingTurn,
    Plan,
    ProfileChange,
    ProfileItem,
    ProfileStore,
    version_of,
)
from memories.profile.update import (
    UpdateMethod,
    UpdateOutcome,
    UpdateResult,
    UpdateSession,
    bind_patch_tool,
    merge_results,
)
from memories.tokens import TokenCounter, resolve_token_counter

__all__ = ["Policy", "ProfileMemory", "ProfileStatus", "UpdateResult"]

logger = logging.getLogger(__name__)

Policy = Literal["turn", "every_n", "background", "manual", "once"]

# How many times a model update is recomputed when another writer got in first.
_MAX_CONFLICTS = 3


@dataclass(frozen=True)
class ProfileStatus(MemoryStatus):
    """Where a profile stands; ``pending`` counts the turns saved but not folded in yet."""

    version: int = 0
    """The current version (0: never written)."""
    updated_at: float | None = None
    """When it last changed (Unix time), or None."""
    frozen: bool = False
    """Whether the ``once`` policy stops further model updates."""
    last_failure: ProfileChange | None = None
    """The latest failed update, when no change has been accepted since."""


class ProfileMemory(BaseMemory):
    """A JSON document about a user, kept valid and current by a model.

    Args:
        schema: what the profile must look like: a JSON Schema dict, a
            Pydantic model class, or its import path ``"package.module:Class"``.
            None allows any JSON object.
        llm: the model that proposes updates: a LangChain model, or a string
            ``"provider:model"`` / ``"llamacpp:/path.gguf"`` (resolved at
            construction). Needed unless ``policy="manual"`` and the profile is
            only written with :meth:`put`.
        namespace: whose profile this is: a tuple of labels (``("users", "maya")``)
            or the labels joined by ``"."`` (``"users.maya"``).
        key: the profile's name within the namespace; several named profiles
            can share one namespace.
        url: the SQLAlchemy URL of the store (a SQLite file by default).
        memory_key: the prompt variable the profile fills.
        input_key: the chain input to learn from (default: the only one).
        output_key: the chain output to learn from (default: the only one).
        return_messages: give a list holding one system message instead of a string.
        format: ``"json"`` (compact JSON) or ``"text"`` (an indented block).
        policy: when queued turns are folded in: ``"turn"`` (every save),
            ``"every_n"``, ``"background"`` (after ``debounce`` seconds of
            quiet), ``"manual"`` (:meth:`refresh`), or ``"once"``.
        every_n: the number of turns per update under ``"every_n"``.
        debounce: the quiet period under ``"background"``, in seconds.
        scheduler: the :class:`~memories.kernel.background.Debouncer` that runs
            background updates (the process-wide one by default).
        llm_timeout: seconds to wait for one model reply before the update
            fails (and is recorded); None waits forever.
        max_retries: how many times an invalid reply is sent back to the model.
        max_document_tokens: the budget of document shown in one model call;
            larger documents are updated section by section.
        max_turns_per_update: the most queued turns one model call sees.
        token_counter: how to count tokens (see :mod:`memories.tokens`).
        instructions: extra guidance for the model (what to record, what not).
        update_method: ``"auto"`` (tool calling when the model has it, else
            JSON text), ``"tool"`` or ``"json"``.
    """

    config_type: ClassVar[str] = "profile"
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace", exportable=True, deferred=True
    )

    model_config = ConfigDict(populate_by_name=True)

    profile_schema: Any = Field(default=None, alias="schema")
    llm: LLMField = None
    namespace: Namespace = ("default",)
    key: str = Field(default="profile", min_length=1)
    url: str = DEFAULT_URL
    memory_key: str = Field(default="profile", min_length=1)
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    format: Literal["json", "text"] = "json"
    policy: Policy = "turn"
    every_n: int = Field(default=3, gt=0)
    debounce: float = Field(default=5.0, ge=0)
    scheduler: Debouncer | None = Field(default=None, exclude=True)
    llm_timeout: float | None = Field(default=120.0, ge=0)
    max_retries: int = Field(default=2, ge=0)
    max_document_tokens: int = Field(default=2000, gt=0)
    max_turns_per_update: int = Field(default=10, gt=0)
    token_counter: Any = None
    instructions: str | None = None
    update_method: UpdateMethod = "auto"

    _schema: ProfileSchema = PrivateAttr()
    _store: ProfileStore = PrivateAttr()
    _counter: TokenCounter = PrivateAttr()
    _background: BackgroundWork = PrivateAttr()

    @field_validator("namespace", mode="before")
    @classmethod
    def _namespace(cls, value: Any) -> Namespace:
        return as_namespace(value)

    def model_post_init(self, context: Any, /) -> None:
        if self.llm is None and self.policy != "manual":
            raise ConfigError(
                f"policy {self.policy!r} updates the profile with a model, but llm is None. "
                "Pass llm=..., or use policy='manual' and write with put()/update()."
            )
        self._schema = ProfileSchema(self.profile_schema)
        self._counter = resolve_token_counter(self.token_counter)
        self._store = ProfileStore(self.url)
        self._caller  # noqa: B018  (resolved now: a missing provider package fails here)
        # The profile, not this object: two memories on one profile share one job.
        self._background = BackgroundWork(
            ("profile", self.url, self.namespace, self.key),
            self._background_refresh,
            scheduler=self.scheduler,
            delay=self.debounce,
        )

    @cached_property
    def _caller(self) -> ModelCaller | None:
        return None if self.llm is None else ModelCaller(self.llm, {}, self.llm_timeout)

    @cached_property
    def _bound(self) -> tuple[ModelCaller, Runnable[Any, Any], bool]:
        """The caller, its model with the patch tool bound (per ``update_method``), and whether."""
        if self._caller is None:
            raise ConfigError(
                "This ProfileMemory has no llm, so it cannot update from conversation. "
                "Pass llm=..., or write the profile with put()/update()."
            )
        return (self._caller, *bind_patch_tool(self._caller.model, self.update_method))

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "profile_schema":
            return schema_config(value)
        if name == "llm" and isinstance(value, BaseLanguageModel):
            raise ConfigError(
                f"ProfileMemory.llm is a {type(value).__name__} object, which has no config form. "
                "Pass the model by name ('openai:gpt-4o-mini', 'llamacpp:/path.gguf')."
            )
        if name == "token_counter" and self._counter.name is not None:
            return self._counter.name
        return super()._config_value(name, value)

    @property
    def store(self) -> ProfileStore:
        """The store the profile lives in."""
        return self._store

    # -- reading ----------------------------------------------------------------

    def _document(self, item: ProfileItem | None) -> dict[str, Any] | None:
        """The profile as it stands: the stored document, else the schema's valid defaults."""
        if item is not None and item.value is not None:
            return item.value
        return self._schema.initial()

    def _frozen(self, item: ProfileItem | None) -> bool:
        return self.policy == "once" and item is not None and item.value is not None

    def get(self) -> dict[str, Any] | None:
        """The profile document, or None when nothing valid has been written yet."""
        return self._document(self._store.load(self.namespace, self.key))

    async def aget(self) -> dict[str, Any] | None:
        """Async :meth:`get`."""
        return self._document(await self._store.aload(self.namespace, self.key))

    def history(self, *, failures: bool = True) -> list[ProfileChange]:
        """Every accepted change (and failed update, unless ``failures=False``), oldest first."""
        return self._store.changes(self.namespace, self.key, failed=None if failures else False)

    async def ahistory(self, *, failures: bool = True) -> list[ProfileChange]:
        """Async :meth:`history`."""
        failed = None if failures else False
        return await self._store.achanges(self.namespace, self.key, failed=failed)

    def _stating(self) -> Steps[ProfileStatus]:
        ns, key, store = self.namespace, self.key, self._store
        item = yield step(store.load, ns, key)
        pending = yield step(store.count_pending, ns, key)
        failure = yield step(store.changes, ns, key, failed=True, last=1)
        last = failure[-1] if failure else None
        if last is not None and item is not None and item.updated_at > last.created_at:
            last = None
        return ProfileStatus(
            pending=pending,
            failures=1 if last is not None else 0,
            last_error=last.error if last is not None else None,
            background=self._background.status() if self.policy == "background" else None,
            version=version_of(item),
            updated_at=item.updated_at if item else None,
            frozen=self._frozen(item),
            last_failure=last,
        )

    def status(self) -> ProfileStatus:
        """The version, the queued turns, and the last failure if nothing was accepted since."""
        return run(self._stating())

    async def astatus(self) -> ProfileStatus:
        """Async :meth:`status`: the same steps, awaited."""
        return await arun(self._stating())

    # -- direct writes: a plan on what was read, then the store's compare-and-set -----

    def _checked(self, document: Any, what: str) -> Any:
        problems = self._schema.errors(document)
        if problems:
            raise InvalidProfileError(
                f"{what} does not match the schema of profile {self.key!r}:\n" + "\n".join(problems)
            )
        return document

    def _replacing(self, target: dict[str, Any], kind: str) -> Plan:
        def plan(item: ProfileItem | None) -> Change:
            patch = jsonpatch.make_patch(self._document(item) or {}, target).patch
            return Change(target, kind, patch)

        return plan

    def _plan_put(self, document: Any) -> Plan:
        if not isinstance(document, Mapping):
            raise InvalidProfileError(
                f"A profile is a JSON object (a dict); got {type(document).__name__}."
            )
        return self._replacing(
            self._checked(json_copy(document, "document"), "The document"), "put"
        )

    def _plan_patch(self, patch: Any) -> Plan:
        operations = parse_patch(patch)

        def plan(item: ProfileItem | None) -> Change:
            new = apply_operations(self._document(item) or {}, operations)
            return Change(self._checked(new, "The patched document"), "patch", operations)

        return plan

    def _plan_clear(self, pending: list[PendingTurn]) -> Plan:
        def plan(item: ProfileItem | None) -> Change | None:
            if (item is None or item.value is None) and not pending:
                return None
            old = item.value if item is not None and item.value is not None else {}
            return Change(None, "clear", jsonpatch.make_patch(old, {}).patch, pending)

        return plan

    def _writing(self, plan: Plan) -> Steps[int]:
        return version_of((yield from self._store.writing(self.namespace, self.key, plan)))

    def _rolling_back(self, version: int) -> Steps[int]:
        found = yield step(self._store.changes, self.namespace, self.key, version=version)
        if not found:
            hint = " (0 is the empty profile: call clear())" if version == 0 else ""
            raise InvalidInputError(
                f"The profile {self.key!r} in {self.namespace!r} has no version {version}"
                f"{hint}; history() lists its versions."
            )
        target = found[0].document
        if target is None:
            raise InvalidInputError(
                f"Version {version} is a clear of the profile; call clear() to clear it again."
            )
        self._checked(target, f"Version {version}")
        return (yield from self._writing(self._replacing(target, "rollback")))

    def _clearing(self) -> Steps[None]:
        if self.policy == "background":
            self._background.cancel()
        pending = yield step(self._store.pending, self.namespace, self.key)
        yield from self._writing(self._plan_clear(pending))

    def put(self, document: Mapping[str, Any]) -> int:
        """Replace the profile with ``document``; returns the new version.

        Raises:
            InvalidProfileError: the document does not match the schema.
        """
        return run(self._writing(self._plan_put(document)))

    async def aput(self, document: Mapping[str, Any]) -> int:
        """Async :meth:`put`."""
        return await arun(self._writing(self._plan_put(document)))

    def update(self, patch: Sequence[Mapping[str, Any]] | str | jsonpatch.JsonPatch) -> int:
        """Apply RFC 6902 operations to the profile; returns the new version.

        Raises:
            InvalidProfileError: an operation does not apply, or the result
                does not match the schema; the profile is unchanged.
        """
        return run(self._writing(self._plan_patch(patch)))

    async def aupdate(self, patch: Sequence[Mapping[str, Any]] | str | jsonpatch.JsonPatch) -> int:
        """Async :meth:`update`."""
        return await arun(self._writing(self._plan_patch(patch)))

    def rollback(self, version: int) -> int:
        """Restore the document of ``version`` as a new version; returns that new version.

        Raises:
            InvalidInputError: there is no such version, or it was a clear.
            InvalidProfileError: that document does not match the current schema.
        """
        return run(self._rolling_back(version))

    async def arollback(self, version: int) -> int:
        """Async :meth:`rollback`."""
        return await arun(self._rolling_back(version))

    def clear(self) -> None:
        """Empty the profile and drop its queued turns, as a recorded change.

        The history keeps the old document (and the dropped turns), so
        :meth:`rollback` can bring it back. A ``once`` profile can be written
        again after a clear. To erase a profile and its history for good, use
        ``memory.store.delete(namespace, key)``.
        """
        run(self._clearing())

    async def aclear(self) -> None:
        """Async :meth:`clear`: the same steps, awaited."""
        await arun(self._clearing())

    # -- LangChain's interface --------------------------------------------------

    @property
    def memory_variables(self) -> list[str]:
        """The prompt variables this memory fills: ``[memory_key]``."""
        return [self.memory_key]

    def _render(self, document: dict[str, Any] | None) -> str | list[BaseMessage]:
        if not document:
            return [] if self.return_messages else ""
        if self.format == "text":
            text = yaml.safe_dump(
                document, sort_keys=False, allow_unicode=True, default_flow_style=False
            ).strip()
        else:
            text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
        return [SystemMessage(content=text)] if self.return_messages else text

    @property
    def buffer(self) -> str | list[BaseMessage]:
        """The profile as the prompt shows it."""
        return self._render(self.get())

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """``{memory_key: profile}``: compact JSON, a text block, or ``[SystemMessage]``."""
        return {self.memory_key: self._render(self.get())}

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`."""
        return {self.memory_key: self._render(await self.aget())}

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing."""
        turn_messages_for(self, inputs, outputs)

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Queue the turn, then update the profile if the policy says so.

        A failing model never raises here: the failure is recorded in
        :meth:`history` and the turn stays queued for the next update.
        """
        run(self._saving(turn_messages_for(self, inputs, outputs)))

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async :meth:`save_context`: the same steps, awaited."""
        await arun(self._saving(turn_messages_for(self, inputs, outputs)))

    def _saving(self, turn: list[BaseMessage]) -> Steps[None]:
        store, ns, key = self._store, self.namespace, self.key
        if self.policy == "once" and self._frozen((yield step(store.load, ns, key))):
            return
        yield step(store.add_pending, ns, key, turn)
        if self.policy == "background" and self._background.schedule():
            return  # the scheduler runs the update after the quiet period
        if self.policy in ("turn", "once", "background") or (
            self.policy == "every_n" and (yield step(store.count_pending, ns, key)) >= self.every_n
        ):
            yield from self._refreshing()

    # -- updating from conversation ---------------------------------------------

    def _session(
        self, item: ProfileItem | None, turns: Sequence[PendingTurn], tools: bool
    ) -> UpdateSession:
        document = self._document(item) or {}
        return UpdateSession(
            schema=self._schema,
            document=document,
            turns=[turn.messages for turn in turns],
            name=self.key,
            instructions=self.instructions,
            sections=plan_sections(document, self.max_document_tokens, self._count),
            max_retries=self.max_retries,
            tools=tools,
        )

    def _count(self, text: str) -> int:
        return self._counter([HumanMessage(content=text)])

    def _giving_up(
        self, item: ProfileItem | None, turns: Sequence[PendingTurn], outcome: UpdateOutcome
    ) -> Steps[UpdateResult]:
        """Record a failed update (its turns stay queued) and say so."""
        error = outcome.error or ""
        store, ns, key = self._store, self.namespace, self.key
        yield step(store.record_failure, ns, key, error=error, raw=outcome.raw, turns=turns)
        logger.warning(
            "Profile %r in %r was not updated from %d turn(s); kept the previous version "
            "and the turns: %s",
            *(key, ns, len(turns), error),
        )
        return UpdateResult("failed", version_of(item), 0, error)

    def refresh(self) -> UpdateResult:
        """Fold the queued turns into the profile now, in batches of ``max_turns_per_update``.

        Stops at the first failed batch (recorded in the history, its turns
        kept). Returns what happened.

        Raises:
            ConfigError: the memory has no llm, or its model has no tool
                calling under ``update_method="tool"``.
        """
        return run(self._refreshing())

    async def arefresh(self) -> UpdateResult:
        """Async :meth:`refresh`: the same steps, with the model call awaited."""
        return await arun(self._refreshing())

    def _refreshing(self) -> Steps[UpdateResult]:
        caller, model, tools = self._bound
        store, ns, key = self._store, self.namespace, self.key
        result, conflicts = UpdateResult("idle", 0), 0
        while True:
            item = yield step(store.load, ns, key)
            if self._frozen(item):
                return merge_results(result, UpdateResult("frozen", version_of(item)))
            turns = yield step(store.pending, ns, key, limit=self.max_turns_per_update)
            if not turns:
                return merge_results(result, UpdateResult("idle", version_of(item)))
            session = self._session(item, turns, tools)
            while (request := session.request()) is not None:
                try:
                    reply = yield step(caller.invoke, request, bound=model, unlocked=True)
                except LLMError as exc:  # a provider error or a timeout: a recorded failure
                    session.fail(str(exc))
                else:
                    session.receive(reply)
            outcome = session.outcome()
            if not outcome.ok:
                return merge_results(result, (yield from self._giving_up(item, turns, outcome)))
            if not outcome.operations:
                yield step(store.drop_pending, ns, key, [t.id for t in turns])
                unchanged = UpdateResult("unchanged", version_of(item), len(turns))
                result = merge_results(result, unchanged)
                continue
            written = yield step(
                store.commit,
                *(ns, key, outcome.document),
                expected_version=version_of(item),
                kind="update",
                patch=list(outcome.operations),
                turns=turns,
            )
            if written is not None:
                updated = UpdateResult("updated", written.version, len(turns))
                result = merge_results(result, updated)
                continue
            conflicts += 1
            if conflicts >= _MAX_CONFLICTS:
                contended = replace(
                    outcome,
                    error=f"Other writers changed the profile {_MAX_CONFLICTS} times while it "
                    "was being updated; the turns are kept for the next update.",
                )
                return merge_results(result, (yield from self._giving_up(item, turns, contended)))

    # -- background policy ------------------------------------------------------

    def _background_refresh(self) -> None:
        result = self.refresh()
        logger.debug("Profile %r in %r: background update %s", self.key, self.namespace, result)

    def flush(self, *, timeout: float | None = None) -> bool:
        """Run this profile's pending background update now and wait for it.

        Returns:
            True when no update of this profile is pending or running (always,
            under the other policies, whose updates finish inside ``save_context``).
        """
        return self.policy != "background" or self._background.flush(timeout=timeout)

    def close(self, *, timeout: float | None = None) -> bool:
        """Flush, then stop using the scheduler: later turns of this object update inline.

        The scheduler itself is left running (it may serve other memories);
        close a :class:`~memories.kernel.background.Debouncer` you made yourself.
        """
        return self._background.close(timeout=timeout)
