"""A bounded conversation with a model, written once: ask, read the reply, retry with the error.

A :class:`Conversation` holds the rules of a structured exchange (the
profile's patches, the instructions' revisions) with no I/O: what to send
next, each reply or failure, an invalid reply fed back a bounded number of
times. :func:`conversing` drives one as steps, for the sync and async paths.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable

from memories.errors import BudgetExceededError, ConfigError, LLMError
from memories.kernel.llm import ModelCaller
from memories.kernel.steps import Steps, step

__all__ = [
    "CheckedReply",
    "Conversation",
    "OperationsReply",
    "UpdateMethod",
    "bind_reply_tool",
    "conversing",
    "operations_tool",
    "parse_json_reply",
    "proposed_items",
    "reply_text",
]

#: How a model answers: ``"tool"`` (a forced tool call), ``"json"`` (JSON text),
#: ``"auto"`` (the tool when the model has tool calling, else JSON text).
UpdateMethod = Literal["auto", "tool", "json"]

T_co = TypeVar("T_co", covariant=True)


class Conversation(Protocol[T_co]):
    """The rules of one exchange with a model, as a state machine with no I/O."""

    def request(self) -> list[BaseMessage] | None:
        """The messages to send next, or None when the exchange is over."""

    def receive(self, reply: BaseMessage) -> None:
        """Take the model's reply: accept it, queue a retry with the error, or give up."""

    def fail(self, error: str) -> None:
        """End the exchange as failed (the model call itself raised)."""

    def outcome(self) -> T_co:
        """What the exchange produced; called once :meth:`request` returns None."""


R = TypeVar("R")


@dataclass
class CheckedReply(Generic[R]):
    """A :class:`Conversation` that asks once and checks the reply, sending errors back.

    A subclass implements :meth:`_accept` (the reply's value, or :class:`LLMError`
    saying what is wrong) and :attr:`fix` (what to reply instead); the retries,
    tool-call bookkeeping and raw replies are kept here.

    Args:
        opening: the first messages.
        max_retries: how many times a bad reply is sent back before the exchange fails.
    """

    opening: list[BaseMessage]
    max_retries: int
    _conversation: list[BaseMessage] = field(init=False)
    _raw: list[str] = field(init=False, default_factory=list)
    _accepted: R | None = field(init=False, default=None)
    _error: str | None = field(init=False, default=None)
    _attempt: int = field(init=False, default=0)
    _done: bool = field(init=False, default=False)

    #: What the model is asked to do after a rejected reply.
    fix = "Reply again with the corrected answer."

    def __post_init__(self) -> None:
        self._conversation = list(self.opening)

    def _accept(self, reply: BaseMessage) -> R:
        raise NotImplementedError(f"{type(self).__name__} must define _accept()")

    @property
    def accepted(self) -> R | None:
        """The accepted reply's value; None when the exchange failed."""
        return None if self._error is not None else self._accepted

    def request(self) -> list[BaseMessage] | None:
        """The messages to send next, or None when the exchange is over."""
        return None if self._done else list(self._conversation)

    def receive(self, reply: BaseMessage) -> None:
        """Accept the reply, or send the error back, or give up."""
        self._raw.append(reply_text(reply))
        try:
            self._accepted = self._accept(reply)
        except LLMError as exc:
            self._retry(reply, str(exc))
            return
        self._done = True

    def fail(self, error: str) -> None:
        """End the exchange as failed."""
        self._error = error
        self._done = True

    def _retry(self, reply: BaseMessage, error: str) -> None:
        self._attempt += 1
        if self._attempt > self.max_retries:
            self.fail(error)
            return
        self._conversation.append(reply)
        calls = []
        if isinstance(reply, AIMessage):
            calls = [*reply.tool_calls, *reply.invalid_tool_calls]
        rejected = f"Rejected: {error}\n{self.fix}"
        if calls:  # a chat API wants every tool call answered before the next turn
            self._conversation.extend(
                ToolMessage(rejected, tool_call_id=call.get("id") or f"call_{i}")
                for i, call in enumerate(calls)
            )
        else:
            self._conversation.append(HumanMessage(rejected))


@dataclass
class OperationsReply(CheckedReply[R]):
    """A :class:`CheckedReply` whose model answers with a list of operations.

    Args:
        tools: whether the model answers through the reply tool named
            :attr:`tool_name` (:func:`operations_tool`), else with JSON text.
    """

    tools: bool
    #: The reply tool's name, which a rejected tool call is asked to call again.
    tool_name: ClassVar[str]

    @property
    def fix(self) -> str:  # type: ignore[override]
        if self.tools:
            return f"Call {self.tool_name} again with corrected operations."
        return "Reply again with the corrected operations."


def conversing(
    session: Conversation[R], caller: ModelCaller, model: Runnable[Any, Any] | None = None
) -> Steps[R]:
    """Steps running ``session`` against the model (``model``: with tools bound, if any).

    Model calls are made with the runner's lock released; a provider error or a
    timeout fails the exchange, but a spent budget's
    :class:`~memories.errors.BudgetExceededError` goes up to the memory, which defers the work.
    """
    asked = False
    while (request := session.request()) is not None:
        try:
            reply = yield step(caller.invoke, request, bound=model, retry=asked, unlocked=True)
            asked = True
        except BudgetExceededError:
            raise
        except LLMError as exc:
            session.fail(str(exc))
        else:
            session.receive(reply if isinstance(reply, BaseMessage) else AIMessage(str(reply)))
    return session.outcome()


def reply_text(reply: BaseMessage | str) -> str:
    """The raw reply as it is recorded: its text, and its tool calls as JSON."""
    if isinstance(reply, str):
        return reply
    text = str(reply.text)
    if isinstance(reply, AIMessage) and (reply.tool_calls or reply.invalid_tool_calls):
        made = [*reply.tool_calls, *reply.invalid_tool_calls]
        calls = [{"name": c["name"], "args": c["args"]} for c in made]
        dumped = json.dumps(calls, ensure_ascii=False, default=str)
        return f"{text}\n{dumped}" if text else dumped
    return text


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


def parse_json_reply(text: str, *, accepts: Callable[[Any], bool], hint: str) -> Any:
    """The JSON value a text reply holds: alone, fenced, or the first in prose that ``accepts``.

    Raises:
        LLMError: no JSON value found; the message ends with ``hint`` (what to reply).
    """
    stripped = text.strip()
    if not stripped:
        raise LLMError(f"Your reply was empty. {hint}")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(stripped)] + [stripped]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", stripped):
        try:
            value, _ = decoder.raw_decode(stripped, match.start())
        except ValueError:
            continue
        if accepts(value):
            return value
    raise LLMError(hint)


def operations_tool(
    name: str, description: str, operation: dict[str, Any], about: str | None = None
) -> dict[str, Any]:
    """A reply tool (OpenAI function format) whose one argument is a list of operations.

    Args:
        name: the tool's name.
        description: what calling it does.
        operation: the JSON schema of one operation (an object).
        about: the list's own description, if any.
    """
    operations: dict[str, Any] = {"type": "array"}
    if about is not None:
        operations["description"] = about
    operations["items"] = operation
    parameters = {
        "type": "object",
        "properties": {"operations": operations},
        "required": ["operations"],
    }
    function = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


def bind_reply_tool(
    model: Runnable[Any, Any], tool: dict[str, Any], name: str, method: UpdateMethod
) -> tuple[Runnable[Any, Any], bool]:
    """The model with the reply tool ``tool`` bound (and whether it is), per ``method``.

    Raises:
        ConfigError: ``method`` is ``"tool"`` and the model has no tool calling.
    """
    if method == "json":
        return model, False
    bind_tools = getattr(model, "bind_tools", None)
    if bind_tools is not None:
        for options in ({"tool_choice": name}, {}):
            try:
                return bind_tools([tool], **options), True
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


def proposed_items(
    reply: BaseMessage | str,
    tool_name: str,
    hint: str,
    *,
    keys: tuple[str, ...] = ("operations",),
    single: str | None = None,
) -> list[Any]:
    """The items a reply proposes: from its calls of ``tool_name``, else the JSON list in its text.

    The list may stand alone, sit under one of ``keys``, or come as a JSON string;
    an object with a ``single`` key is one item.

    Raises:
        LLMError: another tool called, invalid tool arguments, or no list (``hint``
            says what to reply).
    """
    if isinstance(reply, AIMessage) and reply.invalid_tool_calls:
        bad = reply.invalid_tool_calls[0]
        raise LLMError(
            f"The arguments of your {bad['name']} call are not valid JSON "
            f"({bad.get('error') or 'unparseable'}). Call {tool_name} again with "
            'arguments {"operations": [...]}.'
        )
    if isinstance(reply, AIMessage) and reply.tool_calls:
        found: list[Any] = []
        for call in reply.tool_calls:
            if call["name"] != tool_name:
                raise LLMError(f"You called {call['name']!r}; the only tool is {tool_name!r}.")
            found.extend(_listed(call["args"], hint, keys, single))
        return found
    named = (*keys, single)
    value = parse_json_reply(
        reply if isinstance(reply, str) else str(reply.text),
        accepts=lambda v: (
            isinstance(v, list) or (isinstance(v, dict) and any(k in v for k in named))
        ),
        hint=hint,
    )
    return _listed(value, hint, keys, single)


def _listed(value: Any, hint: str, keys: tuple[str, ...], single: str | None) -> list[Any]:
    if isinstance(value, dict):
        if single is not None and single in value:
            return [value]
        value = next((value[key] for key in keys if key in value), value)
    if isinstance(value, str):  # some models send the array as a JSON string
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    if not isinstance(value, list):
        shown = json.dumps(value, default=str)[:200]
        raise LLMError(f"Expected a JSON array of operations, got {shown}. {hint}")
    return value
