"""Extending a running summary: by a model with LangChain's prompt, or extractively offline.

It formats the new lines as LangChain does, fills the prompt's ``summary`` and
``new_lines`` and calls the model with the runner's lock let go; with no model
it uses :class:`~memories.short_term.summary.extractive.ExtractiveSummarizer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, get_buffer_string
from langchain_core.prompts import BasePromptTemplate

from memories.kernel.llm import ModelCaller
from memories.kernel.steps import Steps, step
from memories.kernel.tokens import TokenCounter
from memories.short_term.summary.extractive import ExtractiveSummarizer

__all__ = ["Summarizer"]


@dataclass(frozen=True)
class Summarizer:
    """How one memory extends its summary (built from its arguments; cheap to build)."""

    caller: ModelCaller | None
    """The model, or None for the extractive summarizer."""
    prompt: BasePromptTemplate
    """The prompt, with the variables ``summary`` and ``new_lines``."""
    counter: TokenCounter
    """Counts the extractive summary's tokens."""
    extractive_budget: int
    """The extractive summary's budget in tokens."""
    human_prefix: str = "Human"
    ai_prefix: str = "AI"

    def summarizing(self, messages: Sequence[BaseMessage], existing_summary: str) -> Steps[str]:
        """The summary of ``existing_summary`` then ``messages`` (a model call is unlocked)."""
        human, ai = self.human_prefix, self.ai_prefix
        if self.caller is None:
            extract = ExtractiveSummarizer(self.extractive_budget, self.counter)
            return extract(messages, existing_summary, human_prefix=human, ai_prefix=ai)
        new_lines = get_buffer_string(messages, human_prefix=human, ai_prefix=ai)
        prompt = self.prompt.format_prompt(summary=existing_summary, new_lines=new_lines)
        return (yield step(self.caller.invoke_text, prompt, unlocked=True))
