"""An offline chat model for the CLI, the demo, the examples and the tests.

``ScriptedChatModel`` replies from a script, then echoes what it was shown;
it accepts tools, so a script can drive a ``create_agent`` agent through
tool calls with no network and no key.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

__all__ = ["ScriptedChatModel", "echo_reply"]


class ScriptedChatModel(BaseChatModel):
    """An offline chat model: replies from a script, then echoes; records every prompt.

    ``memories chat``, the demo and the examples use it when no model is
    configured, the tests to drive agents; ``bind_tools`` returns the model
    itself, so a script may hold AI messages with tool calls.

    Args:
        responses: replies in order: strings or ``AIMessage`` objects.
        echo: when the script is used up, reply with a line that says what the
            model was shown (otherwise start the script again).
    """

    responses: list[str | AIMessage] = Field(default_factory=list)
    echo: bool = True
    prompts: list[list[BaseMessage]] = Field(default_factory=list, exclude=True)
    """Every message list the model was called with, in order."""

    _next: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "memories-scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self.prompts.append(list(messages))
            if self._next >= len(self.responses) and (self.echo or not self.responses):
                reply: str | AIMessage = echo_reply(messages)
            else:
                reply = self.responses[self._next % len(self.responses)]
                self._next += 1
        message = AIMessage(content=reply) if isinstance(reply, str) else reply.model_copy()
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """Tools are accepted and ignored: tool calls come from the script."""
        return self


def echo_reply(messages: Sequence[BaseMessage]) -> str:
    """An offline reply that shows what the model was given: the last user line and the context."""
    last = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    earlier = sum(1 for m in messages if not isinstance(m, SystemMessage)) - 1
    system = sum(len(m.text) for m in messages if isinstance(m, SystemMessage))
    return (
        f"(offline echo) You said: {last!r}. "
        f"I was shown {max(earlier, 0)} earlier messages and {system} characters of system text."
    )
