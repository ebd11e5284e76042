"""Fake summarizing models for the summary tests: scripted answers, failures on demand."""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.llms import LLM
from pydantic import Field

RAISE = "<raise>"
EMPTY = "<empty>"
HANG = "<hang>"


class ScriptedLLM(LLM):
    """Answers the summary prompt from a script and records every prompt it gets.

    A script item is the answer, or :data:`RAISE` (raise ``ConnectionError``),
    :data:`EMPTY` (answer blank text), :data:`HANG` (block until ``release``
    is set). With the script used up it does ``default`` when set, else
    answers ``"summary <n>"`` for the n-th call.
    """

    script: list[str] = Field(default_factory=list)
    default: str | None = None
    prompts: list[str] = Field(default_factory=list)
    threads: list[str] = Field(default_factory=list)
    release: threading.Event = Field(default_factory=threading.Event)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> int:
        return len(self.prompts)

    def _call(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> str:
        self.prompts.append(prompt)
        self.threads.append(threading.current_thread().name)
        action = self.script.pop(0) if self.script else self.default
        if action == RAISE:
            raise ConnectionError("the provider is down")
        if action == EMPTY:
            return "  \n"
        if action == HANG:
            self.release.wait(30)
            return "too late"
        return action if action is not None else f"summary {self.calls}"
