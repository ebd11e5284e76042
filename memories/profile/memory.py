"""``ProfileMemory``: one JSON document per user, kept current by a model through JSON patches.

A profile is read with one key lookup, so it is cheap to show in every prompt.
It changes only through RFC 6902 patches that are applied to a copy and
validated against the schema before anything is stored; every accepted change
is kept with the patch and the turns that caused it, and can be rolled back.

The update cycle
----------------
``save_context`` queues the turn in the store (so a crash or a failing model
loses nothing), then the policy decides when the queued turns are folded in:
every turn, every ``every_n`` turns, in the background after a quiet period,
on demand with :meth:`ProfileMemory.refresh`, or ``once`` (the first accepted
document is frozen). An update shows the model the schema, the document and
the queued turns, and asks for patch operations (through a tool when the
model has tool calling, else as a bare JSON array). An invalid reply is sent
back with the error, up to ``max_retries`` times; if it is still invalid the
profile is kept, the failure is recorded with the model's replies, and the
turns stay queued for the next update.

Large profiles
--------------
When the document is over ``max_document_tokens``, it is split into sections
(top-level fields, and fields of objects that are themselves too large),
packed into as few groups as fit the budget. Each group gets its own model
call showing only that part, and may change only paths inside it. All groups
apply to one working copy that is validated as a whole; the update is kept
only if every group succeeds. A single value over budget (a long list) still
gets a call of its own, shown whole. For documents that keep growing, prefer
several named profiles (``key=``) in one namespace, each with its own schema.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import jsonpatch
import yaml
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

import memories.llm as models
from memories.base import BaseMemory
from memories.errors import (
    BackendError,
    ConfigError,
    InvalidInputError,
    InvalidProfileError,
    LLMError,
)
from memories.kernel.background import BackgroundWork, Debouncer, MemoryStatus

# A module import, not names: memories.llm imports memories.errors, which
# runs this package's __init__, so this module may load while that one is half-done.
from memories.kernel.capabilities import Capabilities
from memories.kernel.steps import Steps, arun, run, step
from memories.keys import turn_messages_for
from memories.namespaces import as_namespace
from memories.profile.patching import (
    PATCH_TOOL,
    PATCH_TOOL_NAME,
    apply_operations,
    check_operations,
    plan_sections,
)
from memories.profile.schema import ProfileSchema, model_path
from memories.profile.store import (
    DEFAULT_URL,
    Namespace,
    PendingTurn,
    ProfileChange,
    ProfileItem,
    ProfileStore,
)
from memories.profile.update import UpdateOutcome, UpdateSession
from memories.tokens import TokenCounter, resolve_token_counter

__all__ = ["Policy", "ProfileMemory", "ProfileStatus", "UpdateResult"]

logger = logging.getLogger(__name__)

Policy = Literal["turn", "every_n", "background", "manual", "once"]
UpdateMethod = Literal["auto", "tool", "json"]

_RANK = {"idle": 0, "frozen": 1, "unchanged": 2, "updated": 3, "failed": 4}

# How many times a write is recomputed when another writer got in first.
_MAX_CONFLICTS = 3
# A direct write recomputes without a model call, so it can afford many more tries.
_MAX_WRITE_TRIES = 100


@dataclass(frozen=True)
class UpdateResult:
    """What :meth:`ProfileMemory.refresh` did."""

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


@dataclass(frozen=True)
class _Write:
    """A change computed from a read of the profile, ready for a compare-and-set."""

    document: dict[str, Any] | None
    expected_version: int
    kind: str
    patch: list[dict[str, Any]]
    turns: Sequence[PendingTurn] = ()


class ProfileMemory(BaseMemory):
    """A JSON document about a user, kept valid and current by a model.

    Args:
        schema: what the profile must look like: a JSON Schema dict, a
            Pydantic model class, or its import path ``"package.module:Class"``.
            None allows any JSON object.
        llm: the model that proposes updates: a LangChain model (or any
            runnable taking messages, such as ``model.with_retry()``), or a
            string ``"provider:model"`` / ``"llamacpp:/path.gguf"``. Needed unless
            ``policy="manual"`` and the profile is only written with :meth:`put`.
        namespace: whose profile this is, as a tuple of labels (``("user-42",)``).
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
    llm: Any = None
    namespace: tuple[str, ...] = ("default",)
    key: str = "profile"
    url: str = DEFAULT_URL
    memory_key: str = "profile"
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
    _model: Runnable[Any, Any] | None = PrivateAttr(default=None)
    _tools: bool = PrivateAttr(default=False)
    _background: BackgroundWork = PrivateAttr()

    @field_validator("namespace", mode="before")
    @classmethod
    def _namespace(cls, value: Any) -> Namespace:
        return as_namespace(value)

    @field_validator("key", "memory_key")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value:
            raise ConfigError("key and memory_key must be non-empty strings.")
        return value

    def model_post_init(self, context: Any, /) -> None:
        if self.llm is None and self.policy != "manual":
            raise ConfigError(
                f"policy {self.policy!r} updates the profile with a model, but llm is None. "
                "Pass llm=..., or use policy='manual' and write with put()/update()."
            )
        if self.llm is not None and not isinstance(self.llm, str | Runnable):
            raise ConfigError(
                f"llm must be a LangChain model (or runnable) or a string 'provider:model'; "
                f"got {self.llm!r:.80}"
            )
        self._schema = ProfileSchema(self.profile_schema)
        self._counter = resolve_token_counter(self.token_counter)
        self._store = ProfileStore(self.url)
        # The profile, not this object: two memories on one profile share one job.
        self._background = BackgroundWork(
            ("profile", self.url, self.namespace, self.key),
            self._background_refresh,
            scheduler=self.scheduler,
            delay=self.debounce,
        )

    # -- configuration ----------------------------------------------------------

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "profile_schema":
            if isinstance(value, Mapping):
                return json.loads(json.dumps(value))
            if isinstance(value, type):
                path = model_path(value)
                if path is None:
                    raise ConfigError(
                        f"The schema {value.__qualname__} cannot be imported by name (it is "
                        "defined in __main__ or inside a function), so it has no config form. "
                        "Define it in a module and pass 'package.module:ClassName'."
                    )
                return path
        if name == "llm" and isinstance(value, Runnable):
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
        return await self._store.achanges(
            self.namespace, self.key, failed=None if failures else False
        )

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
            version=item.version if item else 0,
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

    # -- direct writes: pure plans, then a compare-and-set loop -----------------

    def _plan_put(self, document: Any) -> Callable[[ProfileItem | None], _Write]:
        if not isinstance(document, Mapping):
            raise InvalidProfileError(
                f"A profile is a JSON object (a dict); got {type(document).__name__}."
            )
        new = json.loads(_dump(document, "document"))
        self._raise_if_invalid(new, "The document")

        def plan(item: ProfileItem | None) -> _Write:
            old = self._document(item) or {}
            return _Write(new, _version(item), "put", jsonpatch.make_patch(old, new).patch)

        return plan

    def _plan_patch(self, patch: Any) -> Callable[[ProfileItem | None], _Write]:
        if isinstance(patch, jsonpatch.JsonPatch):
            patch = patch.patch
        if isinstance(patch, str):
            try:
                patch = json.loads(patch)
            except ValueError as exc:
                raise InvalidProfileError(f"The patch is not JSON: {exc}") from exc
        if not isinstance(patch, list):
            raise InvalidProfileError(
                f"A patch is a list of RFC 6902 operations; got {type(patch).__name__}."
            )
        operations = check_operations(json.loads(_dump(patch, "patch")))

        def plan(item: ProfileItem | None) -> _Write:
            new = apply_operations(self._document(item) or {}, operations)
            self._raise_if_invalid(new, "The patched document")
            return _Write(new, _version(item), "patch", operations)

        return plan

    def _plan_rollback(
        self, version: int, found: list[ProfileChange]
    ) -> Callable[[ProfileItem | None], _Write]:
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
        self._raise_if_invalid(target, f"Version {version}")

        def plan(item: ProfileItem | None) -> _Write:
            old = self._document(item) or {}
            return _Write(
                target, _version(item), "rollback", jsonpatch.make_patch(old, target).patch
            )

        return plan

    def _plan_clear(
        self, pending: list[PendingTurn]
    ) -> Callable[[ProfileItem | None], _Write | None]:
        def plan(item: ProfileItem | None) -> _Write | None:
            if (item is None or item.value is None) and not pending:
                return None
            old = item.value if item is not None and item.value is not None else {}
            return _Write(
                None,
                _version(item),
                "clear",
                jsonpatch.make_patch(old, {}).patch,
                pending,
            )

        return plan

    def _raise_if_invalid(self, document: Any, what: str) -> None:
        problems = self._schema.errors(document)
        if problems:
            raise InvalidProfileError(
                f"{what} does not match the schema of profile {self.key!r}:\n" + "\n".join(problems)
            )

    def _writing(self, plan: Callable[[ProfileItem | None], _Write | None]) -> Steps[int]:
        """Compare-and-set: read, plan the write on what was read, commit if nobody wrote since."""
        store, ns, key = self._store, self.namespace, self.key
        for _ in range(_MAX_WRITE_TRIES):
            item = yield step(store.load, ns, key)
            write = plan(item)
            if write is None:
                return _version(item)
            written = yield step(store.commit, ns, key, write.document, **_args(write))
            if written is not None:
                version: int = written.version
                return version
        raise self._contention(_MAX_WRITE_TRIES)

    def _contention(self, tries: int) -> BackendError:
        return BackendError(
            f"The profile {self.key!r} in {self.namespace!r} changed {tries} times "
            "while this write was being made; try again."
        )

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

    def _rolling_back(self, version: int) -> Steps[int]:
        found = yield step(self._store.changes, self.namespace, self.key, version=version)
        return (yield from self._writing(self._plan_rollback(version, found)))

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

    def _clearing(self) -> Steps[None]:
        if self.policy == "background":
            self._background.cancel()
        pending = yield step(self._store.pending, self.namespace, self.key)
        yield from self._writing(self._plan_clear(pending))

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

    def _turn(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> list[BaseMessage]:
        return turn_messages_for(self, inputs, outputs)

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing."""
        self._turn(inputs, outputs)

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Queue the turn, then update the profile if the policy says so.

        A failing model never raises here: the failure is recorded in
        :meth:`history` and the turn stays queued for the next update.
        """
        run(self._saving(self._turn(inputs, outputs)))

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async :meth:`save_context`: the same steps, awaited."""
        await arun(self._saving(self._turn(inputs, outputs)))

    def _saving(self, turn: list[BaseMessage]) -> Steps[None]:
        store, ns, key = self._store, self.namespace, self.key
        if self.policy == "once" and self._frozen((yield step(store.load, ns, key))):
            return
        yield step(store.add_pending, ns, key, turn)
        if self._schedule():
            return
        if self.policy in ("turn", "once", "background") or (
            self.policy == "every_n" and (yield step(store.count_pending, ns, key)) >= self.every_n
        ):
            yield from self._refreshing()

    # -- updating from conversation ---------------------------------------------

    def _bound_model(self) -> tuple[Runnable[Any, Any], bool]:
        """The model to call (with the patch tool bound when used) and whether tools are on."""
        if self._model is None:
            if self.llm is None:
                raise ConfigError(
                    "This ProfileMemory has no llm, so it cannot update from conversation. "
                    "Pass llm=..., or write the profile with put()/update()."
                )
            model = models.resolve_llm(self.llm) if isinstance(self.llm, str) else self.llm
            self._model, self._tools = _bind(model, self.update_method)
        return self._model, self._tools

    def _session(
        self, item: ProfileItem | None, turns: Sequence[PendingTurn], tools: bool
    ) -> UpdateSession:
        document = self._document(item) or {}
        sections = plan_sections(document, self.max_document_tokens, self._count)
        return UpdateSession(
            schema=self._schema,
            document=document,
            turns=[turn.messages for turn in turns],
            name=self.key,
            instructions=self.instructions,
            sections=sections,
            max_retries=self.max_retries,
            tools=tools,
        )

    def _count(self, text: str) -> int:
        return self._counter([HumanMessage(content=text)])

    def _log_failure(self, outcome: UpdateOutcome, turns: Sequence[PendingTurn]) -> None:
        logger.warning(
            "Profile %r in %r was not updated from %d turn(s); kept the previous version "
            "and the turns: %s",
            self.key,
            self.namespace,
            len(turns),
            outcome.error,
        )

    def _giving_up(
        self, item: ProfileItem | None, turns: Sequence[PendingTurn], outcome: UpdateOutcome
    ) -> Steps[UpdateResult]:
        """Record a failed update (its turns stay queued) and say so."""
        error = outcome.error or ""
        yield step(
            self._store.record_failure,
            self.namespace,
            self.key,
            error=error,
            raw=outcome.raw,
            turns=turns,
        )
        self._log_failure(outcome, turns)
        return UpdateResult("failed", _version(item), 0, error)

    def _call_model(self, model: Runnable[Any, Any], request: Any) -> Any:
        return models.invoke_model(model, request, timeout=self.llm_timeout)

    async def _acall_model(self, model: Runnable[Any, Any], request: Any) -> Any:
        return await models.ainvoke_model(model, request, timeout=self.llm_timeout)

    def refresh(self) -> UpdateResult:
        """Fold the queued turns into the profile now, in batches of ``max_turns_per_update``.

        Stops at the first failed batch (recorded in the history, its turns
        kept). Returns what happened.

        Raises:
            ConfigError: the memory has no llm, or it cannot be built.
        """
        return run(self._refreshing())

    async def arefresh(self) -> UpdateResult:
        """Async :meth:`refresh`: the same steps, with the model call awaited."""
        return await arun(self._refreshing())

    def _refreshing(self) -> Steps[UpdateResult]:
        model, tools = self._bound_model()
        store, ns, key = self._store, self.namespace, self.key
        result, conflicts = UpdateResult("idle", 0), 0
        while True:
            item = yield step(store.load, ns, key)
            if self._frozen(item):
                return _merge(result, UpdateResult("frozen", _version(item)))
            turns = yield step(store.pending, ns, key, limit=self.max_turns_per_update)
            if not turns:
                return _merge(result, UpdateResult("idle", _version(item)))
            session = self._session(item, turns, tools)
            while (request := session.request()) is not None:
                try:
                    reply = yield step(self._call_model, model, request, unlocked=True)
                except LLMError as exc:  # a provider error or a timeout: a recorded failure
                    session.fail(str(exc))
                else:
                    session.receive(reply)
            outcome = session.outcome()
            if not outcome.ok:
                return _merge(result, (yield from self._giving_up(item, turns, outcome)))
            if not outcome.operations:
                yield step(store.drop_pending, ns, key, [t.id for t in turns])
                result = _merge(result, UpdateResult("unchanged", _version(item), len(turns)))
                continue
            written = yield step(
                store.commit, ns, key, outcome.document, **_args(_accepted(item, turns, outcome))
            )
            if written is not None:
                result = _merge(result, UpdateResult("updated", written.version, len(turns)))
                continue
            conflicts += 1
            if conflicts >= _MAX_CONFLICTS:
                failed = yield from self._giving_up(item, turns, _contended(outcome))
                return _merge(result, failed)

    # -- background policy -------------------------------------------------------

    def _schedule(self) -> bool:
        """Under ``"background"``, (re)schedule the update; False when it must run inline."""
        return self.policy == "background" and self._background.schedule()

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


# -- pure helpers ---------------------------------------------------------------


def _version(item: ProfileItem | None) -> int:
    return item.version if item is not None else 0


def _args(write: _Write) -> dict[str, Any]:
    return {
        "expected_version": write.expected_version,
        "kind": write.kind,
        "patch": write.patch,
        "turns": write.turns,
    }


def _accepted(
    item: ProfileItem | None, turns: Sequence[PendingTurn], outcome: UpdateOutcome
) -> _Write:
    return _Write(outcome.document, _version(item), "update", list(outcome.operations), turns)


def _contended(outcome: UpdateOutcome) -> UpdateOutcome:
    return replace(
        outcome,
        error=f"Other writers changed the profile {_MAX_CONFLICTS} times while it was being "
        "updated; the turns are kept for the next update.",
    )


def _merge(before: UpdateResult, after: UpdateResult) -> UpdateResult:
    """The result of several batches: the most telling status, the turns added up."""
    status = max(before.status, after.status, key=_RANK.__getitem__)
    return UpdateResult(status, after.version, before.turns + after.turns, after.error)


def _dump(value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidProfileError(f"The {what} must be JSON-serialisable: {exc}") from exc


def _bind(model: Runnable[Any, Any], method: UpdateMethod) -> tuple[Runnable[Any, Any], bool]:
    """The model with the patch tool bound (and whether it is), per ``update_method``."""
    if method == "json":
        return model, False
    bind_tools = getattr(model, "bind_tools", None)
    if bind_tools is not None:
        for options in ({"tool_choice": PATCH_TOOL_NAME}, {}):
            try:
                return bind_tools([PATCH_TOOL], **options), True
            except NotImplementedError:
                break
            except (TypeError, ValueError):
                continue  # this provider does not take a forced tool choice
    if method == "tool":
        raise ConfigError(
            f"update_method='tool' but {type(model).__name__} has no tool calling; "
            "use update_method='auto' or 'json'."
        )
    return model, False
