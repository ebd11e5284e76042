"""The last ``k`` exchanges: LangChain's ``ConversationBufferWindowMemory``."""

from __future__ import annotations

from typing import Any, ClassVar

from langchain_core.messages import BaseMessage
from pydantic import Field

from memories.core.base import ChatMemory
from memories.kernel.steps import Steps, step

__all__ = ["WindowMemory"]


class WindowMemory(ChatMemory):
    """Shows the last ``k`` exchanges.

    An exchange is a human message and everything after it until the next
    human message (the AI reply, tool calls and their results), so the window
    always starts on a human message and never cuts a tool call from its
    result. With plain human/AI turns this is LangChain's last ``2 * k``
    messages. Loading reads only the window from the history (one query on SQL).

    Args:
        k: how many exchanges to show; ``0`` shows nothing.
    """

    config_type: ClassVar[str] = "window"
    _makes_calls: ClassVar[bool] = False

    k: int = Field(default=5, ge=0, description="exchanges to show; 0 shows nothing")

    def _selection(self) -> Steps[list[BaseMessage]]:
        if self.k == 0:
            return []
        entries = yield step(self.chat_memory.last_exchanges, self.k)
        return [entry.message for entry in entries]

    def _state_parameters(self) -> dict[str, Any]:
        return {"k": self.k}
