"""Test doubles for profile memory: a scripted chat model and a few schemas."""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import BaseModel, Field

from memories.kernel.namespaces import Namespace
from memories.stores.documents.base import BaseProfileStore
from memories.stores.documents.records import (
    AddPending,
    Change,
    Changes,
    Commit,
    CountPending,
    Delete,
    DropPending,
    KeyCount,
    KeyNamespaces,
    KeyPage,
    ListNamespaces,
    Load,
    Op,
    Pending,
    PendingTurn,
    ProfileChange,
    ProfileItem,
    RecordFailure,
    Search,
    version_of,
)

Reply = AIMessage | str | Exception | Callable[[list[BaseMessage]], AIMessage | str]


class ScriptedChatModel(BaseChatModel):
    """Answers each call with the next scripted reply and records every prompt.

    A reply is an AIMessage, a string, an exception to raise, or a callable of
    the prompt. With ``tool_calling=False``, ``bind_tools`` is unsupported, as
    on small local models.
    """

    replies: list[Any]
    tool_calling: bool = True
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        if not self.replies:
            raise AssertionError("the model was called more often than scripted")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            reply = reply(list(messages))
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=reply)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        if not self.tool_calling:
            raise NotImplementedError
        self.bound.append({"tools": list(tools), "tool_choice": tool_choice})
        return self.bind(tools=tools, tool_choice=tool_choice, **kwargs)


def tool_reply(*operations: dict[str, Any], call_id: str = "call_1") -> AIMessage:
    """A reply calling update_profile with these operations."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": "update_profile", "args": {"operations": list(operations)}, "id": call_id}
        ],
    )


def prompt_text(prompt: Sequence[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in prompt)


class UserProfile(BaseModel):
    """A small Pydantic schema, importable as 'tests.profile.fakes:UserProfile'."""

    name: str | None = None
    age: int | None = Field(default=None, ge=0)
    likes: list[str] = Field(default_factory=list)


USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "likes": {"type": "array", "items": {"type": "string"}, "default": []},
    },
    "additionalProperties": False,
}


class NotingChatModel(BaseChatModel):
    """Deterministic: records the last human line of the turns it is shown as ``/last``.

    Replies through the patch tool, so it exercises the same path as a real
    tool-calling model; for contract tests that need some change per turn.
    """

    @property
    def _llm_type(self) -> str:
        return "noting"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        transcript = str(messages[-1].content).rsplit("New conversation turns:\n", 1)[-1]
        humans = [line for line in transcript.splitlines() if line.startswith("Human: ")]
        last = humans[-1].removeprefix("Human: ") if humans else ""
        message = tool_reply({"op": "add", "path": "/last", "value": last})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        return self.bind(tools=tools, tool_choice=tool_choice, **kwargs)


class DictProfileStore(BaseProfileStore):
    """Profiles in dicts: a backend that implements only ``batch``.

    The store tests run against it beside the SQL store, so they check that
    the base derives everything else from ``batch`` alone.
    """

    def __init__(self) -> None:
        self.rows: dict[tuple[Namespace, str], ProfileItem] = {}
        self.log: list[tuple[Namespace, str, ProfileChange]] = []
        self.queue: list[tuple[Namespace, str, PendingTurn]] = []
        self.ids = itertools.count(1)
        self.lock = threading.Lock()

    def batch(self, ops: Sequence[Op], /) -> list[Any]:
        with self.lock:
            return [self._perform(op) for op in ops]

    def _perform(self, op: Op) -> Any:
        match op:
            case Load(ns, key):
                return self.rows.get((ns, key))
            case Commit(ns, key, change, expected):
                return self._commit(ns, key, change, expected)
            case RecordFailure(ns, key, error, raw, turns):
                messages = tuple(t.messages for t in turns)
                failure = ProfileChange(
                    next(self.ids), None, "failed", time.time(), None, (), messages, error, raw
                )
                self.log.append((ns, key, failure))
            case Changes(ns, key, version, failed, last):
                found = [
                    c
                    for n, k, c in self.log
                    if (n, k) == (ns, key)
                    and (version is None or c.version == version)
                    and (failed is None or c.ok != failed)
                ]
                return found[-last:] if last else found
            case AddPending(ns, key, messages):
                turn = PendingTurn(next(self.ids), messages, time.time())
                self.queue.append((ns, key, turn))
                return turn.id
            case Pending(ns, key, limit):
                return [t for n, k, t in self.queue if (n, k) == (ns, key)][:limit]
            case CountPending(ns, key):
                return sum((n, k) == (ns, key) for n, k, _ in self.queue)
            case DropPending(ns, key, ids):
                self._drop(ns, key, ids)
            case Delete(ns, key):
                self.rows.pop((ns, key), None)
                self.log = [entry for entry in self.log if entry[:2] != (ns, key)]
                self._drop(ns, key, [t.id for n, k, t in self.queue if (n, k) == (ns, key)])
            case Search(prefix, limit, offset):
                return self._documents(prefix)[offset : offset + limit]
            case KeyNamespaces(prefix, contains, limit, offset):
                return self._key_namespaces(prefix, contains, limit, offset)
            case KeyPage(ns, prefix, contains, limit, offset, field):
                found = [
                    item
                    for (n, key), item in self.rows.items()
                    if n == ns
                    and key.startswith(prefix)
                    and item.value is not None
                    and _holds(contains, key.removeprefix(prefix), item.value.get(field))
                ]
                found.sort(key=lambda item: item.key)
                return found[offset : offset + limit], len(found)
            case ListNamespaces(prefix, max_depth, limit, offset):
                found = {item.namespace[:max_depth] for item in self._documents(prefix or ())}
                return sorted(found)[offset : offset + limit]
        return None

    def _commit(self, ns: Namespace, key: str, change: Change, expected: int) -> ProfileItem | None:
        old = self.rows.get((ns, key))
        if version_of(old) != expected:
            return None
        now = time.time()
        created = old.created_at if old is not None else now
        item = ProfileItem(ns, key, copy.deepcopy(change.document), expected + 1, created, now)
        self.rows[(ns, key)] = item
        turns = tuple(t.messages for t in change.turns)
        entry = ProfileChange(
            next(self.ids), expected + 1, change.kind, now, item.value, tuple(change.patch), turns
        )
        self.log.append((ns, key, entry))
        self._drop(ns, key, [t.id for t in change.turns])
        return item

    def _key_namespaces(
        self, prefix: str, contains: str, limit: int, offset: int
    ) -> tuple[list[KeyCount], int]:
        keys = [*self.rows, *((n, k) for n, k, _ in self.log), *((n, k) for n, k, _ in self.queue)]
        names = sorted(
            {n for n, k in keys if k.startswith(prefix) and contains in ".".join(n)},
            key=".".join,
        )
        found = []
        for ns in names[offset : offset + limit]:
            held = [
                item
                for (n, k), item in self.rows.items()
                if n == ns and k.startswith(prefix) and item.value is not None
            ]
            found.append(KeyCount(ns, len(held)))
        return found, len(names)

    def _drop(self, ns: Namespace, key: str, ids: Sequence[int]) -> None:
        self.queue = [q for q in self.queue if not (q[:2] == (ns, key) and q[2].id in ids)]

    def _documents(self, prefix: Namespace) -> list[ProfileItem]:
        found = [
            item
            for item in self.rows.values()
            if item.value is not None and item.namespace[: len(prefix)] == prefix
        ]
        return sorted(found, key=lambda item: (".".join(item.namespace), item.key))


def _holds(text: str, key: str, field: Any) -> bool:
    """Whether ``key`` or ``field`` (its JSON, unless a string) contains ``text``, any case."""
    if not isinstance(field, str):
        field = "" if field is None else json.dumps(field, ensure_ascii=False)
    return text.lower() in key.lower() or text.lower() in field.lower()
