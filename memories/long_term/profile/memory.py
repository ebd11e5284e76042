"""``ProfileMemory``: one JSON document per user, kept current by a model through JSON patches.

Its I/O is loops of steps (:mod:`memories.kernel.steps`) over the store's methods, run
sync or async; compare-and-set writes come from the store base
(:meth:`~memories.stores.documents.BaseProfileStore.writing`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Literal

import jsonpatch
import yaml
from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import ConfigDict, Field, PrivateAttr

from memories.errors import ConfigError, InvalidProfileError
from memories.kernel.background import MemoryStatus
from memories.kernel.capabilities import Capabilities
from memories.kernel.patching import json_copy, parse_patch
from memories.kernel.steps import Steps, step, twins
from memories.long_term.profile.schema import ProfileSchema, schema_config
from memories.long_term.profile.update import (
    UpdateMethod,
    Updater,
    UpdateResult,
    bind_patch_tool,
)
from memories.long_term.stored import ExpiringDocumentMemory, TurnPolicy
from memories.stores.documents import (
    ProfileChange,
    ProfileItem,
    patching,
    replacing,
    version_of,
)

__all__ = ["Policy", "ProfileMemory", "ProfileStatus", "UpdateResult"]


Policy = Literal[TurnPolicy, "once"]


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


class ProfileMemory(ExpiringDocumentMemory):
    """A JSON document about a user, kept valid and current by a model.

    Args:
        schema: what the profile must look like: a JSON Schema dict, a
            Pydantic model class, or its import path ``"package.module:Class"``.
            None allows any JSON object.
        llm: the model that proposes updates: a LangChain model, or a string
            ``"provider:model"`` / ``"llamacpp:/path.gguf"`` (resolved at
            construction). Needed unless ``policy="manual"`` and the profile is
            only written with :meth:`put`.
        key: the profile's name within the namespace; several named profiles
            can share one namespace.
        format: ``"json"`` (compact JSON) or ``"text"`` (an indented block).
        policy: when queued turns are folded in: ``"turn"`` (every save),
            ``"every_n"``, ``"background"`` (after ``debounce`` seconds of
            quiet), ``"manual"`` (:meth:`refresh`), or ``"once"`` (frozen once
            written; ``clear()`` lets it be written again).
        max_document_tokens: the budget of document shown in one model call;
            larger documents are updated section by section.
        update_method: ``"auto"`` (tool calling when the model has it, else
            JSON text), ``"tool"`` or ``"json"``.

    The other arguments (``namespace``, ``url``, ``every_n``, ``memory_key``,
    ``ttl``, ``debounce``...) are those of
    :class:`~memories.long_term.stored.ExpiringDocumentMemory` and its parts.
    """

    config_type: ClassVar[str] = "profile"
    store_owner: ClassVar[str | None] = "profile"
    each_turn: ClassVar[tuple[str, ...]] = ("turn", "once", "background")
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace", deferred=True, expires=True
    )

    model_config = ConfigDict(populate_by_name=True)

    profile_schema: Any = Field(default=None, alias="schema")
    key: str = Field(default="profile", min_length=1)
    memory_key: str = Field(default="profile", min_length=1)
    format: Literal["json", "text"] = "json"
    policy: Policy = "turn"
    debounce: float = Field(default=5.0, ge=0)
    max_document_tokens: int = Field(default=2000, gt=0)
    update_method: UpdateMethod = "auto"

    _schema: ProfileSchema = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        if self.llm is None and self.policy != "manual":
            raise ConfigError(
                f"policy {self.policy!r} updates the profile with a model, but llm is None. "
                "Pass llm=..., or use policy='manual' and write with put()/update()."
            )
        self._schema = ProfileSchema(self.profile_schema)
        super().model_post_init(context)

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "profile_schema":
            return schema_config(value)
        return super()._config_value(name, value)

    def _document(self, item: ProfileItem | None) -> dict[str, Any] | None:
        """The profile as it stands: the stored document, else the schema's valid defaults."""
        if item is not None and item.value is not None:
            return item.value
        return self._schema.initial()

    def _frozen(self, item: ProfileItem | None) -> bool:
        return self.policy == "once" and item is not None and item.value is not None

    def _get_steps(self) -> Steps[dict[str, Any] | None]:
        """The profile document, or None when nothing valid has been written yet."""
        return self._document((yield step(self._store.load, self.namespace, self.key)))

    get, aget = twins(_get_steps)

    def _history_steps(self, *, failures: bool = True) -> Steps[list[ProfileChange]]:
        """Every accepted change (and failed update, unless ``failures=False``), oldest first."""
        failed = None if failures else False
        return (yield step(self._store.changes, self.namespace, self.key, failed=failed))

    history, ahistory = twins(_history_steps)

    def _status_steps(self) -> Steps[ProfileStatus]:
        """The version, the queued turns, and the last failure if nothing was accepted since."""
        (item, _, last), shown = yield from self._standing()
        return ProfileStatus(
            **shown,
            version=version_of(item),
            updated_at=item.updated_at if item else None,
            frozen=self._frozen(item),
            last_failure=last,
        )

    status, astatus = twins(_status_steps)

    def _checked(self, document: Any, what: str) -> Any:
        problems = self._schema.errors(document)
        if problems:
            raise InvalidProfileError(
                f"{what} does not match the schema of profile {self.key!r}:\n" + "\n".join(problems)
            )
        return document

    def _put_steps(
        self, document: Mapping[str, Any], *, expected_version: int | None = None
    ) -> Steps[int]:
        """Replace the profile with ``document``; returns the new version.

        Args:
            expected_version: write only if the profile is still at this version
                (``status().version``; 0: never written): a compare-and-set for
                callers that computed the document from what they read.

        Raises:
            InvalidProfileError: the document does not match the schema.
            VersionConflictError: the profile moved past ``expected_version``.
        """
        if not isinstance(document, Mapping):
            raise InvalidProfileError(
                f"A profile is a JSON object (a dict); got {type(document).__name__}."
            )
        target = self._checked(json_copy(document, "document"), "The document")
        return self._writing_document(
            replacing(target, "put", self._schema.initial()), expected_version
        )

    put, aput = twins(_put_steps)

    def _update_steps(
        self,
        patch: Sequence[Mapping[str, Any]] | str | jsonpatch.JsonPatch,
        *,
        expected_version: int | None = None,
    ) -> Steps[int]:
        """Apply RFC 6902 operations to the profile; returns the new version.

        Raises:
            InvalidProfileError: an operation does not apply, or the result
                does not match the schema; the profile is unchanged.
            VersionConflictError: the profile moved past ``expected_version`` (as in :meth:`put`).
        """
        plan = patching(parse_patch(patch), self._checked, self._schema.initial())
        return self._writing_document(plan, expected_version)

    update, aupdate = twins(_update_steps)

    def _rollback_steps(self, version: int, *, expected_version: int | None = None) -> Steps[int]:
        """Restore the document of ``version`` as a new version; returns that new version.

        Raises:
            InvalidInputError: there is no such version, or it was a clear.
            InvalidProfileError: that document does not match the current schema.
            VersionConflictError: the profile moved past ``expected_version`` (as in :meth:`put`).
        """
        steps = self._store.rolling_back(
            self.namespace,
            self.key,
            version,
            check=self._checked,
            initial=self._schema.initial(),
            expected_version=expected_version,
        )
        return version_of((yield from steps))

    rollback, arollback = twins(_rollback_steps)

    def _render(self, document: dict[str, Any] | None) -> str:
        if not document:
            return ""
        if self.format == "text":
            return yaml.safe_dump(
                document, sort_keys=False, allow_unicode=True, default_flow_style=False
            ).strip()
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"))

    @property
    def buffer(self) -> str | list[BaseMessage]:
        """The profile as the prompt shows it."""
        return self._prompt_value(self._render(self.get()))

    def _showing(self, inputs: Mapping[str, Any]) -> Steps[str]:
        return self._render((yield from self._get_steps()))

    def _queueing(self, turn: list[BaseMessage], *, due: bool = False) -> Steps[None]:
        at = (self.namespace, self.key)
        if self.policy == "once" and self._frozen((yield step(self._store.load, *at))):
            return
        yield from super()._queueing(turn, due=due)

    @cached_property
    def _updater(self) -> Updater:
        """The refresh loop, with the model (and the patch tool bound per ``update_method``)."""
        if self._caller is None:
            raise ConfigError(
                "This ProfileMemory has no llm, so it cannot update from conversation. "
                "Pass llm=..., or write the profile with put()/update()."
            )
        model, tools = bind_patch_tool(self._caller.model, self.update_method)
        return Updater(
            *(self._store, self.namespace, self.key, self._schema, self._caller, model, tools),
            instructions=self.instructions,
            max_retries=self.max_retries,
            max_document_tokens=self.max_document_tokens,
            max_turns=self.max_turns_per_update,
            count=lambda text: self._counter([HumanMessage(content=text)]),
            once=self.policy == "once",
            failing=self._failing,
        )

    def _refresh_steps(self) -> Steps[UpdateResult]:
        """Fold the queued turns into the profile now, in batches of ``max_turns_per_update``.

        Stops at the first failed batch (recorded in the history, its turns
        kept). Returns what happened.

        Raises:
            ConfigError: the memory has no llm, or its model has no tool
                calling under ``update_method="tool"``.
        """
        return self._updater.refreshing()

    refresh, arefresh = twins(_refresh_steps)
