"""A rule-following offline chat model for the entity and knowledge-graph memories.

Its reply is a function of the prompt alone, so LangChain's class and ours,
shown the same prompts, get the same replies whatever the order of calls:
- an entity extraction prompt: the capitalised words of the last line, or ``NONE``;
- an entity summarization prompt: the existing summary plus the last line;
- a knowledge triple prompt: ``(Word, verb, Word)`` for each pair of
  capitalised words of the last line (the verb: its first lowercase word, or
  ``is near``), or ``NONE``.
It records every prompt, and fails the calls whose numbers are in ``fail_calls``.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

LAST_LINE = re.compile(r"Human: (.*)\n\n?(?:Output:|Updated summary:)\s*$", re.DOTALL)


def names(text: str) -> list[str]:
    return re.findall(r"\b[A-Z][a-z]+\b", text)


class RuleModel(BaseChatModel):
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    fail_calls: set[int] = Field(default_factory=set)
    calls: int = 0
    #: Replies to every entity extraction / triple prompt, instead of the rules.
    entities_reply: str | None = None
    triples_reply: str | None = None

    @property
    def _llm_type(self) -> str:
        return "rule-model"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        self.calls += 1
        if self.calls in self.fail_calls:
            raise ConnectionError(f"call {self.calls} failed (scripted)")
        prompt = str(messages[-1].content)
        text = reply(messages)
        if "knowledge triples" in prompt and self.triples_reply is not None:
            text = self.triples_reply
        elif "Extract all of the proper nouns" in prompt and self.entities_reply is not None:
            text = self.entities_reply
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


def reply(messages: list[BaseMessage]) -> str:
    prompt = str(messages[-1].content)
    found = LAST_LINE.search(prompt.rsplit("Last line of conversation", 1)[-1])
    last = found.group(1).strip() if found else ""
    if "Update the summary of the provided entity" in prompt:
        existing = prompt.split("Existing summary of ", 1)[1].split(":\n", 1)[1]
        existing = existing.split("\n\nLast line of conversation:", 1)[0].strip()
        return f"{existing} | {last}".strip(" |")
    words = list(dict.fromkeys(names(last)))
    if "knowledge triples" in prompt:
        verbs = re.findall(r"\b[a-z]+\b", last)
        relation = verbs[0] if verbs else "is near"
        triples = [f"({a}, {relation}, {b})" for a, b in itertools.pairwise(words)]
        return "<|>".join(triples) or "NONE"
    return ", ".join(words) or "NONE"
