"""A scripted model for collections: answers each turn by a script, naming memories by alias.

The script maps a line the user says to the operations a good model would
propose. An update or delete names the memory by a phrase it contains; the
model finds that memory's alias in the prompt, as a real model reads it.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

#: (op, phrase of the memory to change or None, new content or None)
Script = dict[str, list[tuple[str, str | None, str | None]]]


class CollectionScript(BaseChatModel):
    """Replies JSON operations from ``script``; ``faults`` replaces replies by number (1-based)."""

    script: dict[str, list[Any]] = Field(default_factory=dict)
    faults: dict[int, Any] = Field(default_factory=dict)
    calls: int = 0
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "collection-script"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        with self._lock:
            self.calls += 1
            self.prompts.append(list(messages))
            fault = self.faults.get(self.calls)
        if isinstance(fault, Exception):
            raise fault
        reply = fault if fault is not None else json.dumps(self.operations(messages[1].text))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])

    def operations(self, body: str) -> list[dict[str, Any]]:
        listed, _, turns = body.partition("\n\nNew conversation turns:\n")
        aliases = dict(re.findall(r"^(m\d+): (.*)$", listed, flags=re.MULTILINE))
        said = re.findall(r"^Human: (.*)$", turns, flags=re.MULTILINE)
        operations: list[dict[str, Any]] = []
        for line in said:
            for op, phrase, content in self.script.get(line, []):
                item: dict[str, Any] = {"op": op}
                if phrase is not None:
                    matches = [a for a, text in aliases.items() if phrase in text]
                    if not matches:
                        continue  # the memory was not shown: a careful model leaves it
                    item["id"] = matches[0]
                if content is not None:
                    item["content"] = content
                operations.append(item)
        return operations
