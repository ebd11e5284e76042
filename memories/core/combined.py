"""Memories made of other memories: LangChain's ``CombinedMemory``,
``ReadOnlySharedMemory`` and ``SimpleMemory``, for any of our memories."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any, ClassVar, NamedTuple

from pydantic import Field, field_validator, model_validator

from memories.core.base import BaseMemory, ChatMemory, keeps_chat_log
from memories.core.langchain import LangChainBaseMemory
from memories.errors import ConfigError
from memories.kernel.accounting import Accounts
from memories.kernel.background import MemoryStatus
from memories.kernel.capabilities import Capabilities
from memories.kernel.steps import Steps, step, twins

__all__ = ["CombinedMemory", "ReadOnlySharedMemory", "Save", "SimpleMemory", "saves_of"]


class CombinedMemory(BaseMemory):
    """Several memories at once; each fills its own prompt variables.

    Unlike LangChain's, each member saves the run without the other members'
    variables in the inputs, so members need no ``input_key``. Members whose chat
    log is one history session share it: the first writes each turn, the others
    follow it (:func:`saves_of`), so the log holds every turn once.
    """

    config_type: ClassVar[str] = "combined"
    capabilities: ClassVar[Capabilities] = Capabilities(composite=True)

    memories: list[LangChainBaseMemory]

    @field_validator("memories")
    @classmethod
    def _distinct_variables(cls, value: list[LangChainBaseMemory]) -> list[LangChainBaseMemory]:
        seen: set[str] = set()
        for memory in value:
            overlap = seen.intersection(memory.memory_variables)
            if overlap:
                # LangChain's message, word for word (its missing space included), then ours.
                raise ConfigError(
                    f"The same variables {overlap} are found in multiplememory object, which is "
                    "not allowed by CombinedMemory. Give each memory a distinct memory_key."
                )
            seen.update(memory.memory_variables)
        return value

    @model_validator(mode="after")
    def _one_writer_per_state(self) -> CombinedMemory:
        """Members on one history session with one state key keep one state: they must agree."""
        seen: dict[tuple[Hashable, str], ChatMemory] = {}
        for member in _members(self):
            if not keeps_chat_log(member):
                continue
            where = (member.chat_memory.log_key(), member._state_keys.key)
            first = seen.setdefault(where, member)
            if first is not member and first._state_writers() != member._state_writers():
                raise ConfigError(
                    f"The members {first.memory_key!r} and {member.memory_key!r} "
                    f"({member.config_type}) would keep one state in one history session "
                    f"({member.chat_memory!r}) but write it with different models or prompts. "
                    "Give each its own session_id, or both the same model and prompt (one "
                    "state, shown under two names)."
                )
        return self

    @property
    def memory_variables(self) -> list[str]:
        return [v for memory in self.memories for v in memory.memory_variables]

    def leaves(self) -> list[LangChainBaseMemory]:
        """Every member that holds data, nested composites flattened."""
        return [leaf for memory in self.memories for leaf in leaves_of(memory)]

    def flush(self, *, timeout: float | None = None) -> bool:
        """Flush every member (each within ``timeout``); True when all are done."""
        return all([m.flush(timeout=timeout) for m in self._ours()])

    def close(self, *, timeout: float | None = None) -> bool:
        """Close every member; True when all finished their deferred work."""
        return all([m.close(timeout=timeout) for m in self._ours()])

    def status(self) -> MemoryStatus:
        """The members' deferred work added up (the last error of any member that has one)."""
        statuses = [m.status() for m in self._ours()]
        errors = [s.last_error for s in statuses if s.last_error]
        return MemoryStatus(
            pending=sum(s.pending for s in statuses),
            failures=sum(s.failures for s in statuses),
            last_error=errors[-1] if errors else None,
        )

    def usage(self) -> Accounts:
        """The members' usage added up, per kind and per namespace."""
        return Accounts.merged(m.usage() for m in self._ours())

    def _ours(self) -> list[BaseMemory]:
        return [m for m in self.leaves() if isinstance(m, BaseMemory)]

    def _inputs_for(self, inputs: dict[str, Any]) -> dict[str, Any]:
        ours = set(self.memory_variables)
        return {k: v for k, v in inputs.items() if k not in ours}

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for memory in self.memories:
            merged.update(memory.load_memory_variables(inputs))
        return merged

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The members load at once; of their errors, the first member's is raised (as in sync)."""
        loaded = await asyncio.gather(
            *(m.aload_memory_variables(inputs) for m in self.memories), return_exceptions=True
        )
        if failed := [data for data in loaded if isinstance(data, BaseException)]:
            raise failed[0]
        return {k: v for d in loaded if not isinstance(d, BaseException) for k, v in d.items()}

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Check the turn against every member that can check (ours) before any writes."""
        super().check_turn(inputs, outputs)
        own_inputs = self._inputs_for(inputs)
        for memory in self.memories:
            if isinstance(memory, BaseMemory):
                memory.check_turn(own_inputs, outputs)

    def _save_context_steps(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> Steps[None]:
        """Save the turn to every member, each shared history once.

        A turn any member rejects is written by none.
        """
        self.check_turn(inputs, outputs)
        own_inputs = self._inputs_for(inputs)
        for save in saves_of(self):
            if save.follower is not None:
                yield step(save.follower.follow_context, own_inputs, outputs)
            else:
                yield step(save.memory.save_context, own_inputs, outputs)

    save_context, asave_context = twins(_save_context_steps)

    def _clear_steps(self) -> Steps[None]:
        """Clear every member."""
        for memory in self.memories:
            yield step(memory.clear)

    clear, aclear = twins(_clear_steps)

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "memories":
            return [_member_config(m) for m in value]
        return super()._config_value(name, value)


class _WritesNothing(BaseMemory):
    """A memory whose save and clear do nothing: what it shows is not its own to change."""

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Saves nothing."""

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Saves nothing."""

    def clear(self) -> None:
        """Clears nothing."""

    async def aclear(self) -> None:
        """Clears nothing."""


class ReadOnlySharedMemory(_WritesNothing):
    """Another memory, readable but not writable: for a tool or sub-chain that must not save.

    Its save saves nothing (the wrapped memory belongs to another chain), and its
    clear clears nothing (the shared memory's data stays: LangChain's behaviour).
    """

    config_type: ClassVar[str] = "read_only"
    capabilities: ClassVar[Capabilities] = Capabilities(composite=True)

    memory: LangChainBaseMemory

    @property
    def memory_variables(self) -> list[str]:
        return list(self.memory.memory_variables)

    def leaves(self) -> list[LangChainBaseMemory]:
        """The wrapped memory's leaves."""
        return leaves_of(self.memory)

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return self.memory.load_memory_variables(inputs)

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return await self.memory.aload_memory_variables(inputs)

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "memory":
            return _member_config(value)
        return super()._config_value(name, value)


class SimpleMemory(_WritesNothing):
    """Fixed values that never change between runs (a persona, a date).

    Its save and clear do nothing: the values are configuration, not conversation state.
    """

    config_type: ClassVar[str] = "simple"
    capabilities: ClassVar[Capabilities] = Capabilities()

    memories: dict[str, Any] = Field(default_factory=dict)

    @property
    def memory_variables(self) -> list[str]:
        return list(self.memories)

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return dict(self.memories)

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return dict(self.memories)


def _member_config(memory: LangChainBaseMemory) -> dict[str, Any]:
    if isinstance(memory, BaseMemory):
        return memory.to_config()
    raise ConfigError(
        f"{type(memory).__name__} is not a memories memory, so it has no config form."
    )


def leaves_of(memory: LangChainBaseMemory) -> list[LangChainBaseMemory]:
    """The memories that hold data under ``memory`` (a LangChain memory is its own leaf)."""
    return memory.leaves() if isinstance(memory, BaseMemory) else [memory]


class Save(NamedTuple):
    """One memory a save reaches, and how it takes the turn."""

    memory: LangChainBaseMemory
    """The memory (a member of a combined memory, nested ones flattened)."""
    follower: ChatMemory | None
    """The memory itself when a memory before it writes to the same history
    session: it follows that write (``follow_context``, ``follow_history``)
    instead of writing the turn again; None when it saves the turn itself."""


def saves_of(memory: LangChainBaseMemory, /) -> list[Save]:
    """The memories a save of ``memory`` reaches, in order, each writing or following.

    Nested combined memories are flattened; a read-only member is reached but
    writes nothing. Of the chat memories on one history session
    (:meth:`~memories.stores.history.base.ChatHistory.log_key`), the first writes
    the turn and the others follow it.
    """
    written: set[Hashable] = set()
    saves = []
    for member in _members(memory):
        follower = None
        if keeps_chat_log(member):
            where = member.chat_memory.log_key()
            follower = member if where in written else None
            written.add(where)
        saves.append(Save(member, follower))
    return saves


def _members(memory: LangChainBaseMemory) -> list[LangChainBaseMemory]:
    if isinstance(memory, CombinedMemory):
        return [leaf for member in memory.memories for leaf in _members(member)]
    return [memory]
