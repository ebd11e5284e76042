"""A scripted model for entity graphs: answers each line by a script, naming things by alias.

The script maps a line the user says to the operations a good model would
propose. A value written ``"@Name"`` (an entity) or ``"@subject predicate
object"`` (a relation) is replaced by its alias in the prompt, as a real
model reads it; an entity not shown is named as is (it may be created in the
same reply), a relation not shown leaves the operation out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class GraphScript(BaseChatModel):
    """Replies JSON operations from ``script``; ``faults`` replaces replies by number (1-based)."""

    script: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    faults: dict[int, Any] = Field(default_factory=dict)
    calls: int = 0
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "graph-script"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1  # one caller at a time in these tests
        self.prompts.append(list(messages))
        fault = self.faults.get(self.calls)
        if isinstance(fault, Exception):
            raise fault
        reply = fault if fault is not None else json.dumps(self.operations(messages[1].text))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])

    def operations(self, body: str) -> list[dict[str, Any]]:
        shown, _, turns = body.partition("\n\nNew conversation turns:\n")
        entities = {
            re.split(r" \(|: ", text, maxsplit=1)[0]: alias
            for alias, text in re.findall(r"^(e\d+): (.*)$", shown, flags=re.MULTILINE)
        }
        relations = re.findall(r"^(r\d+): (.*)$", shown, flags=re.MULTILINE)
        said = re.findall(r"^Human: (.*)$", turns, flags=re.MULTILINE)
        operations = []
        for line in said:
            for template in self.script.get(line, []):
                operation = _resolved(template, entities, relations)
                if operation is not None:
                    operations.append(operation)
        return operations


def _resolved(
    template: dict[str, Any], entities: dict[str, str], relations: list[tuple[str, str]]
) -> dict[str, Any] | None:
    operation = dict(template)
    for key in ("id", "into", "subject", "object"):
        value = operation.get(key)
        if isinstance(value, str) and value.startswith("@"):
            operation[key] = entities.get(value[1:], value[1:])
    for key in ("replaces",):
        wanted = operation.get(key)
        if isinstance(wanted, list):
            found = [a for phrase in wanted for a, text in relations if text.startswith(phrase[1:])]
            if len(found) != len(wanted):
                return None  # the relation was not shown: a careful model leaves it
            operation[key] = found
    return operation
