"""Test doubles for profile memory: a scripted chat model and a few schemas."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import BaseModel, Field

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
