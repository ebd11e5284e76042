"""Scripted reflecting models for the instructions memory."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr


def revise(text: str, reason: str = "the feedback asked for it", prompt: str = "main") -> str:
    """A model reply revising one prompt."""
    revision = {"prompt": prompt, "text": text, "reason": reason}
    return json.dumps({"reflection": "noted", "revisions": [revision]})


class DigestModel(BaseChatModel):
    """Revises "main" to a text that depends only on what it was shown (deterministic)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "digest"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        digest = hashlib.sha1(messages[-1].text.encode()).hexdigest()[:8]
        reply = revise(f"Be helpful. Lesson {digest}.")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


class FlakyModel(BaseChatModel):
    """Replies from a script; an Exception in the script is raised instead of replied."""

    script: list[Any] = Field(default_factory=list)
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "flaky"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        with self._lock:
            self.prompts.append(list(messages))
            reply = self.script.pop(0) if self.script else '{"revisions": []}'
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])
