"""The memory contract every memory class implements.

:class:`BaseMemory` is LangChain's classic memory interface (see
:mod:`memories.core.langchain`) plus ``to_config()``. A memory over a chat
history subclasses :class:`ChatMemory` and writes one loop of steps,
``_selection`` (and ``_update`` if it derives state): docs/architecture.md,
"Writing a memory", shows the window memory whole. Any other memory subclasses
:class:`BaseMemory` and picks its turn with :func:`memories.kernel.keys.select_turn`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import threading
import types
import typing
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar, TypeGuard

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from memories.core.langchain import LangChainBaseMemory
from memories.core.state_keys import StateKeys, state_key_of
from memories.errors import ConfigError, InvalidInputError
from memories.kernel.accounting import Accounts, Ledger, operation, tracer
from memories.kernel.background import MemoryStatus
from memories.kernel.capabilities import Capabilities, capabilities_of
from memories.kernel.keys import turn_messages_for
from memories.kernel.messages import checked_message, checked_messages, format_buffer
from memories.kernel.retention import Retention, Sweeps
from memories.kernel.steps import Steps, arun, blocking_twin, run, step, to_thread, twins
from memories.stores.compaction import compactions
from memories.stores.erasure import StoreShare
from memories.stores.history.base import ChatHistory, MessageRef
from memories.stores.history.langchain import LangChainHistory
from memories.stores.history.memory import InMemoryHistory
from memories.stores.history.retained import RetainedHistory
from memories.stores.sql import Database

__all__ = ["BaseMemory", "ChatMemory", "keeps_chat_log"]


class BaseMemory(LangChainBaseMemory):
    """A conversation memory: LangChain's classic interface, configurable by dict.

    Constructor arguments are keyword arguments with defaults, stored under the
    same name; an unknown argument is an error. Conversation state lives in a
    backend, never in these fields, so ``to_config()`` round-trips exactly.
    """

    model_config = ConfigDict(
        arbitrary_types_allowed=True, extra="forbid", validate_assignment=True
    )

    #: The name this class has in configs and in the registry (``"buffer"``, ...).
    config_type: ClassVar[str]
    #: What this class can do; tools read this, never ``hasattr`` or the class name.
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: LangChain's names for arguments that this class names otherwise
    #: (``{"buffer": "initial_summary"}``): accepted, and stored under ours.
    langchain_names: ClassVar[dict[str, str]] = {}
    #: Fields besides the chat history holding a store of one session's data (an
    #: entity store, a graph): a per-session config puts each on its session too.
    session_stores: ClassVar[tuple[str, ...]] = ()
    #: The field naming this memory's data among memories of its type in one
    #: database (``key`` for a stored document): see :meth:`usage_name`.
    data_name_field: ClassVar[str] = "memory_key"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Written once here rather than in each memory: every operation a class
        # defines is counted and traced, and every status it returns says what it cost.
        for name in _OPERATIONS:
            for method in (name, "a" + name):
                if method in vars(cls):
                    setattr(cls, method, _traced(vars(cls)[method], name))
        for name in ("status", "astatus"):
            if name in vars(cls):
                setattr(cls, name, _accounted(vars(cls)[name]))

    @model_validator(mode="before")
    @classmethod
    def _langchain_names(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or not cls.langchain_names.keys() & data.keys():
            return data
        data = dict(data)
        for theirs, ours in cls.langchain_names.items():
            if theirs in data:
                if ours in data:
                    raise ConfigError(f"Give either {theirs!r} or {ours!r}, not both.")
                data[ours] = data.pop(theirs)
        return data

    @model_validator(mode="before")
    @classmethod
    def _no_bools_for_numbers(cls, data: Any) -> Any:
        # Pydantic reads True as 1: `max_token_limit: true` in a YAML file would
        # quietly become a limit of one token. A number must be a number.
        if isinstance(data, Mapping):
            for name, value in data.items():
                field = cls.model_fields.get(name)
                if isinstance(value, bool) and field is not None and _numeric(field.annotation):
                    raise ConfigError(f"{name} must be a number, got {value!r}")
        return data

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            # Pydantic wraps the ConfigErrors our validators raise; give the user ours back.
            raise ConfigError(f"Bad options for {type(self).__name__}: {_reasons(exc)}") from exc

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise ConfigError(
                f"Bad value for {type(self).__name__}.{name}: {_reasons(exc)}"
            ) from exc
        if name in type(self).model_fields:
            # Configuration changed: forget what was derived from it (cached properties),
            # but not what the memory has cost so far (the ledger is not derived from it).
            for base in type(self).__mro__:
                for attribute, member in vars(base).items():
                    if isinstance(member, cached_property) and attribute != "_ledger":
                        self.__dict__.pop(attribute, None)

    # -- copying and pickling, as LangChain's memories allow ---------------------

    def __getstate__(self) -> dict[Any, Any]:
        """Configuration and private state; cached properties and locks are made anew."""
        state = super().__getstate__()
        fields = type(self).model_fields
        state["__dict__"] = {k: v for k, v in state["__dict__"].items() if k in fields}
        private = state.get("__pydantic_private__") or {}
        state["__pydantic_private__"] = {
            k: v for k, v in private.items() if not isinstance(v, _PROCESS_LOCAL)
        }
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        private = self.__pydantic_private__ if self.__pydantic_private__ is not None else {}
        for name, attribute in self.__private_attributes__.items():
            if name not in private:
                private[name] = attribute.get_default(call_default_factory=True)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        copied = type(self).__new__(type(self))
        copied.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return copied

    # -- the kernel's surface: composition, checking, deferred work ------------

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing.

        A composite checks every member first, so a turn one rejects is written by none.

        Raises:
            InvalidInputError: the turn cannot be stored.
        """
        if not isinstance(inputs, Mapping) or not isinstance(outputs, Mapping):
            raise InvalidInputError(
                f"inputs and outputs must be dicts, got {type(inputs).__name__} and "
                f"{type(outputs).__name__}."
            )

    def leaves(self) -> list[LangChainBaseMemory]:
        """The memories that hold data: this one, or a composite's members (flattened)."""
        return [self]

    def erasure_shares(self, *, session: bool, namespace: bool) -> list[StoreShare]:
        """What this memory keeps of its session's and its namespace's owner, a record per store.

        For :func:`memories.erase_user`; a class that stores data says where and
        calls ``super()``, so a class with two stores lists both.
        """
        return []

    def flush(self, *, timeout: float | None = None) -> bool:
        """Finish deferred work now and wait for it (at most ``timeout`` seconds).

        Returns:
            True when nothing is pending or running any more; a memory that
            defers nothing returns True at once.
        """
        return True

    def close(self, *, timeout: float | None = None) -> bool:
        """Flush, then defer nothing more: later turns of this object do their work inline."""
        return self.flush(timeout=timeout)

    aflush, aclose = blocking_twin(flush), blocking_twin(close)

    def status(self) -> MemoryStatus:
        """Where this memory's deferred work stands (nothing, by default)."""
        return MemoryStatus(usage=self.usage())

    def usage(self) -> Accounts:
        """What this memory's work has cost in this process: model calls, embedding
        batches and store transactions, with tokens, failures, retries and time,
        per kind and per namespace. Nothing is sent anywhere."""
        return self._ledger.snapshot()

    def _operation(self, name: str, /, *, joins: bool = True) -> operation:
        """One operation of this memory, counted and traced (see ``accounting.operation``)."""
        return operation(
            self._ledger,
            name,
            owner=self,
            namespace=self.usage_namespace(),
            memory_type=getattr(self, "config_type", type(self).__name__),
            joins=joins,
        )

    @cached_property
    def _ledger(self) -> Ledger:
        """Where this memory's calls are counted (see :mod:`memories.kernel.accounting`)."""
        return Ledger()

    #: Whether the class's operations may call a model or embeddings; a class
    #: that never does (a buffer, a window) has only its store's transactions to count.
    _makes_calls: ClassVar[bool] = True

    @cached_property
    def _accounted(self) -> bool:
        """Whether an operation of this memory has calls to count, decided once, when built.

        Without any (and with no tracer provider) a save or a load runs without an operation.
        """
        return self._makes_calls or self._spending_database() is not None

    def usage_namespace(self) -> str:
        """The namespace this memory's calls are counted (and budgeted) under."""
        return "default"

    def usage_name(self) -> str:
        """The name its calls are recorded under: its type, plus its data's name if not the default.

        Two memories of one type sharing a database (``"profile:work"``) keep apart
        rows; the default name keeps the type alone, so older rows stay its own.
        """
        kind = getattr(self, "config_type", type(self).__name__)
        field = type(self).model_fields.get(self.data_name_field)
        if field is None:
            return kind
        name = getattr(self, self.data_name_field)
        return kind if name == field.default else f"{kind}:{name}"

    def _deferred_reason(self) -> str | None:
        """Why formation waits now (a spent budget), or None."""
        return None

    def _spending_database(self) -> Database | None:
        """The SQL database a budget keeps its spending in (None: in this process)."""
        return None

    async def astatus(self) -> MemoryStatus:
        """Async :meth:`status`."""
        return await to_thread(self.status)

    def to_config(self) -> dict[str, Any]:
        """A config that :func:`memories.create_memory` turns back into an equal memory.

        Holds the ``type`` and every argument that differs from its default.

        Raises:
            ConfigError: an argument (a model object, a custom callable) has no
                config form; pass it by name or rebuild the memory in code.
        """
        config: dict[str, Any] = {"type": self.config_type}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            default = field.get_default(call_default_factory=True)
            if value == default:
                continue
            if field.exclude:
                raise ConfigError(
                    f"{type(self).__name__}.{name} is set to {value!r:.60}, which has no config "
                    "form; leave it at its default to describe this memory by config."
                )
            form = self._config_value(name, value)
            if isinstance(default, ChatHistory) and form == self._config_value(name, default):
                continue
            config[field.alias or name] = form
        return config

    def _config_value(self, name: str, value: Any) -> Any:
        """The config form of one argument; subclasses extend it for their own types."""
        if isinstance(value, ChatHistory):
            try:
                return value.to_config()
            except NotImplementedError as exc:
                raise ConfigError(
                    f"{type(self).__name__}.{name} is a {value!r}, which has no config form; "
                    "use a memories history (SQLiteHistory, SQLHistory) to describe it by config."
                ) from exc
        if isinstance(value, Retention):
            return value.to_config()
        if value is None or isinstance(value, str | int | float | bool):
            return value
        if isinstance(value, list | tuple) and all(isinstance(v, str | int | float) for v in value):
            return list(value)
        if isinstance(value, Mapping):  # a dict of options (llm_kwargs, filter, metadata, prompts)
            return dict(value)
        raise ConfigError(
            f"{type(self).__name__}.{name} = {value!r:.80} has no config form. "
            "Give it by name (a string) or build this memory in code."
        )


#: The operations counted and traced (and their async twins), each a span over its calls.
_OPERATIONS = (
    "save_context",
    "save_messages",
    "load_memory_variables",
    "clear",
    "sweep",
    "refresh",
    "flush",
)


def _traced(method: Any, name: str) -> Any:
    """``method`` run as one operation of its memory (see ``accounting.operation``)."""

    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def atraced(self: BaseMemory, *args: Any, **kwargs: Any) -> Any:
            if not self._accounted and tracer() is None:
                return await method(self, *args, **kwargs)
            with self._operation(name):
                return await method(self, *args, **kwargs)

        return atraced

    @functools.wraps(method)
    def traced(self: BaseMemory, *args: Any, **kwargs: Any) -> Any:
        if not self._accounted and tracer() is None:
            return method(self, *args, **kwargs)
        with self._operation(name):
            return method(self, *args, **kwargs)

    return traced


def _accounted(method: Any) -> Any:
    """``status`` (or ``astatus``) with the memory's usage, and why its pending work waits."""

    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def astatus(self: BaseMemory) -> Any:
            # The budget's look may reach a database: on a worker thread.
            return await to_thread(_with_accounts, self, await method(self))

        return astatus

    @functools.wraps(method)
    def status(self: BaseMemory) -> Any:
        return _with_accounts(self, method(self))

    return status


def _with_accounts(memory: BaseMemory, result: Any) -> Any:
    deferred = memory._deferred_reason() if result.pending else None
    return dataclasses.replace(result, usage=memory.usage(), deferred=deferred)


#: Objects that belong to one process and are made anew in a copy.
_PROCESS_LOCAL = (type(threading.Lock()), type(threading.RLock()), threading.Condition)


def _numeric(annotation: Any) -> bool:
    """Whether a field's type is a number (int, float, or one of them or None)."""
    if typing.get_origin(annotation) in _UNIONS:
        return set(typing.get_args(annotation)) - {type(None)} <= {int, float}
    return annotation in (int, float)


_UNIONS = (typing.Union, types.UnionType)


def _reasons(exc: ValidationError) -> str:
    """Pydantic's errors as one line each, with our own error messages kept word for word."""
    lines = []
    for error in exc.errors():
        cause = (error.get("ctx") or {}).get("error")
        where = ".".join(str(p) for p in error["loc"])
        message = str(cause) if isinstance(cause, Exception) else error["msg"]
        if not isinstance(cause, Exception) and "input" in error and where:
            message = f"{message}, got {error['input']!r:.80}"
        lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)


class ChatMemory(BaseMemory, Sweeps):
    """A memory over a chat history: buffer, window, token buffer, summaries.

    Args:
        chat_memory: where the session's messages live: a memories history
            (``InMemoryHistory`` by default, ``SQLiteHistory`` to survive a
            restart), any LangChain ``BaseChatMessageHistory``, or a history
            config dict such as ``{"type": "sqlite", "path": "chat.db", "session_id": "u1"}``.
        memory_key: the variable the memory fills in the prompt.
        input_key: the chain input to store; by default the only input that is
            not a memory variable or ``"stop"``.
        output_key: the chain output to store; by default the only output, or ``"output"``.
        return_messages: give a list of messages instead of one string.
        human_prefix, ai_prefix: the speaker names of human and AI messages in the string form.
        retention: how much raw history to keep, ``{"keep_days": 7}`` or
            ``{"keep_messages": 200}`` (:class:`~memories.kernel.retention.Retention`):
            older messages are hidden from every read and deleted by :meth:`sweep`;
            derived state (a summary) stays. None keeps everything.
    """

    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="session", chat_log=True, exportable=True, expires=True
    )

    chat_memory: ChatHistory = Field(default_factory=InMemoryHistory)
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    retention: Retention | None = None

    @field_validator("retention", mode="before")
    @classmethod
    def _as_retention(cls, value: Any) -> Retention | None:
        return Retention.of(value)

    @model_validator(mode="after")
    def _retained(self) -> ChatMemory:
        # The history is seen through the retention, so every read of every
        # subclass hides what expired; its config stays the wrapped history's.
        history = self.chat_memory
        held = history.history if isinstance(history, RetainedHistory) else history
        try:
            wanted = held if self.retention is None else RetainedHistory(held, self.retention)
        except NotImplementedError as exc:
            raise ConfigError(str(exc)) from exc
        if wanted is not history:
            self.__dict__["chat_memory"] = wanted
        return self

    def _horizon(self) -> Steps[int | None]:
        """The seq through which the retention hides the log; no step at all without one."""
        if self.retention is None:
            return None
        return (yield step(self.chat_memory.horizon))

    def sweep(
        self, *, batch: int = 500, dry_run: bool = False, own: bool = False
    ) -> dict[str, int]:
        """Delete the raw history the retention expires now; rows removed per session.

        On a shared database every session goes through the same retention;
        with ``own``, only this memory's session. Derived state stays. Without
        a retention nothing expires: ``{}``.
        """
        history = self.chat_memory
        if not isinstance(history, RetainedHistory):
            return {}
        if own:
            return {history.session_id: history.sweep_session(batch=batch, dry_run=dry_run)}
        return history.sweep(batch=batch, dry_run=dry_run)

    def _sweep_session(self) -> int:
        """Delete what the retention expired in this memory's own session (background jobs)."""
        history = self.chat_memory
        return history.sweep_session() if isinstance(history, RetainedHistory) else 0

    @field_validator("chat_memory", mode="before")
    @classmethod
    def _as_history(cls, value: Any) -> ChatHistory:
        if isinstance(value, ChatHistory):
            return value
        if isinstance(value, BaseChatMessageHistory):
            return LangChainHistory(value)
        if isinstance(value, Mapping):
            from memories.core.config import create_history

            return create_history(value)
        raise ConfigError(
            f"chat_memory must be a history (memories.InMemoryHistory, SQLiteHistory, a "
            f"LangChain BaseChatMessageHistory) or a history config dict; got {value!r:.80}"
        )

    # -- what subclasses implement --------------------------------------------

    @abstractmethod
    def _selection(self) -> Steps[list[BaseMessage]]:
        """The steps that read and return the messages this memory shows now."""

    def _update(self) -> Steps[None]:
        """The steps that bring derived state up to date after a save (default: none)."""
        return
        yield  # a generator with no steps

    @property
    def _io_lock(self) -> threading.Lock | None:
        """The lock the kernel holds while it runs this memory's steps (default: none)."""
        return None

    # -- running the steps (the kernel's runners) -----------------------------

    def _run(self, steps: Steps[Any], *, write: bool) -> Any:
        """Run steps under this memory's lock, as one batch of the history (one transaction)."""
        return run(steps, lock=self._io_lock, batch=self.chat_memory.batch(write=write))

    async def _arun(self, steps: Steps[Any], *, write: bool) -> Any:
        """Async :meth:`_run`: the steps before a model call (most loops: all) on a thread."""
        return await arun(steps, lock=self._io_lock, batch=self.chat_memory.batch(write=write))

    def _saving(self, messages: list[BaseMessage], *, appended: bool = False) -> Steps[None]:
        if not appended:
            yield step(self.chat_memory.append, messages)
        yield from self._update()

    def _context_saving(
        self, inputs: dict[str, Any], outputs: dict[str, Any], *, appended: bool
    ) -> Steps[None]:
        """The steps that save a chain run (``appended``: the history already holds it).

        The turn's messages are made now, so a bad turn raises before any step runs.
        """
        return self._saving(self._turn(inputs, outputs), appended=appended)

    def _editing(self, edit: Steps[list[int]]) -> Steps[None]:
        """Run a history edit's steps, then bring derived state up to date with it."""
        yield from edit
        yield from self._update()

    def _state_parameters(self) -> dict[str, Any]:
        """The arguments that shape this memory's derived state (default: none)."""
        return {}

    def _state_writers(self) -> dict[str, Any]:
        """What writes the state without starting it afresh when changed (a model, its prompt).

        Not in :attr:`state_key`: a new model continues the summary. Members
        of a combined memory on one history with one key must agree on it.
        """
        return {}

    def usage_namespace(self) -> str:
        """The session: a chat log's calls are counted and budgeted under its ``session_id``."""
        return self.chat_memory.session_id

    def _spending_database(self) -> Database | None:
        """The history's database, when it has one (a budget's spending then joins the turn)."""
        return self.chat_memory.database

    @cached_property
    def _state_keys(self) -> StateKeys:
        return StateKeys(state_key_of(self.config_type, self._state_parameters()), self.memory_key)

    @property
    def state_key(self) -> str:
        """Where this memory keeps its derived state (:mod:`memories.core.state_keys`).

        Changing ``max_token_limit`` starts a fresh state, renaming ``memory_key``
        keeps it; computed once per configuration and history (every turn reads it).
        """
        return self._state_keys.of(self.chat_memory)

    # -- LangChain's interface, written once ----------------------------------

    @property
    def memory_variables(self) -> list[str]:
        """The prompt variables this memory fills: ``[memory_key]``."""
        return [self.memory_key]

    def _turn(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> list[BaseMessage]:
        """The messages a chain run is stored as; raises before anything is written."""
        return turn_messages_for(self, inputs, outputs)

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing."""
        self._turn(inputs, outputs)

    def _save_context_steps(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> Steps[None]:
        """Append the run's input and output to the history, then update derived state."""
        return self._context_saving(inputs, outputs, appended=False)

    save_context, asave_context = twins(_save_context_steps, runner="_run", write=True)

    def _follow_context_steps(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> Steps[None]:
        """Take a chain run that another memory on this history session saved already.

        Only what this memory derives follows (a summary, a cursor, owed entity
        updates): a combined memory saves a turn to a shared history once this way
        (:func:`memories.core.combined.saves_of`).
        """
        return self._context_saving(inputs, outputs, appended=True)

    follow_context, afollow_context = twins(_follow_context_steps, runner="_run", write=True)

    def _follow_history_steps(self) -> Steps[None]:
        """Bring derived state up to date with messages or edits another memory wrote here."""
        return self._update()

    follow_history, afollow_history = twins(_follow_history_steps, runner="_run", write=True)

    def _save_messages_steps(self, messages: Sequence[BaseMessage], /) -> Steps[None]:
        """Write whole messages (an agent turn with its tool calls), then update derived state.

        Unlike ``save_context`` (one input, one output), it keeps a turn's tool calls
        and results together. The list has LangGraph's ``add_messages`` semantics: a
        message whose id is shown replaces it, ``RemoveMessage(id=...)`` removes one,
        ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` removes all before it.

        Raises:
            InvalidInputError: an item is not a LangChain message, or a
                ``RemoveMessage`` names an unknown id (nothing is written).
        """
        return self._editing(self.chat_memory.writing(checked_messages(messages)))

    save_messages, asave_messages = twins(_save_messages_steps, runner="_run", write=True)

    # -- edits by id (see memories.stores.history.edits) ------------------------------

    def _delete_messages_steps(self, ids: Sequence[MessageRef], /) -> Steps[None]:
        """Remove messages by id (or log seq); derived state (counts, summary) follows.

        A tool call and its results go together, so the memory never shows an
        orphan; the log keeps the removed messages (``chat_memory.records()``).

        Raises:
            InvalidInputError: an id matches no shown message (nothing is changed).
        """
        return self._editing(self.chat_memory.deleting(ids))

    delete_messages, adelete_messages = twins(_delete_messages_steps, runner="_run", write=True)

    def _edit_message_steps(self, id: MessageRef, new_message: BaseMessage, /) -> Steps[None]:
        """Show ``new_message`` in place of the message with ``id`` (or log seq).

        Raises:
            InvalidInputError: no shown message has that id, or ``new_message``
                is not a message (nothing is changed).
        """
        return self._editing(self.chat_memory.replacing(id, checked_message(new_message)))

    edit_message, aedit_message = twins(_edit_message_steps, runner="_run", write=True)

    def _keep_last_steps(self, n: int, /) -> Steps[None]:
        """Remove every message but the last ``n`` (never splitting a tool call from its results).

        Raises:
            InvalidInputError: ``n`` is not a count >= 0.
        """
        return self._editing(self.chat_memory.cutting(n))

    keep_last, akeep_last = twins(_keep_last_steps, runner="_run", write=True)

    def _load_memory_variables_steps(self, inputs: dict[str, Any]) -> Steps[dict[str, Any]]:
        """``{memory_key: buffer}``: a string, or messages with ``return_messages=True``."""
        return {self.memory_key: self._format((yield from self._selection()))}

    load_memory_variables, aload_memory_variables = twins(
        _load_memory_variables_steps, runner="_run", write=False
    )

    def erasure_shares(self, *, session: bool, namespace: bool) -> list[StoreShare]:
        """The session's log and state in the history, when erasing a session."""
        found = super().erasure_shares(session=session, namespace=namespace)
        history = self.chat_memory
        if isinstance(history, RetainedHistory):  # expired messages not swept yet go too
            history = history.history
        if session and isinstance(history, ChatHistory):
            files = compactions(history.database)
            found.append(StoreShare(repr(history), history.held, history.clear, files))
        return found

    def _clear_steps(self) -> Steps[None]:
        """Erase the session: its messages and every memory's state in the history."""
        yield step(self.chat_memory.clear)

    clear, aclear = twins(_clear_steps, lock="_io_lock")

    def _format(self, messages: list[BaseMessage]) -> str | list[BaseMessage]:
        if self.return_messages:
            return messages
        return format_buffer(messages, self.human_prefix, self.ai_prefix)

    @property
    def buffer(self) -> str | list[BaseMessage]:
        """What the memory shows, as a string or as messages (``return_messages``)."""
        return self._format(self.load_messages())

    async def abuffer(self) -> str | list[BaseMessage]:
        """Async :attr:`buffer`."""
        return self._format(await self.aload_messages())

    @property
    def buffer_as_str(self) -> str:
        """What the memory shows, as LangChain's ``get_buffer_string``."""
        return format_buffer(self.load_messages(), self.human_prefix, self.ai_prefix)

    async def abuffer_as_str(self) -> str:
        """Async :attr:`buffer_as_str`."""
        return format_buffer(await self.aload_messages(), self.human_prefix, self.ai_prefix)

    @property
    def buffer_as_messages(self) -> list[BaseMessage]:
        """What the memory shows, as messages."""
        return self.load_messages()

    async def abuffer_as_messages(self) -> list[BaseMessage]:
        """Async :attr:`buffer_as_messages`."""
        return await self.aload_messages()

    def _load_messages_steps(self) -> Steps[list[BaseMessage]]:
        """What the memory shows, as messages (:attr:`buffer_as_messages` as a method)."""
        return (yield from self._selection())

    load_messages, aload_messages = twins(_load_messages_steps, runner="_run", write=False)


def keeps_chat_log(memory: Any, /) -> TypeGuard[ChatMemory]:
    """Whether ``memory`` declares a chat log (and so has :class:`ChatMemory`'s methods)."""
    return capabilities_of(memory).chat_log
