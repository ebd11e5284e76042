"""``SummarizationMiddleware`` for ``create_agent``: summarise, and never lose the history.

A drop-in for LangChain's ``SummarizationMiddleware`` (same arguments), built on
the running summary of :mod:`memories.short_term.summary.memory`: the thread keeps
every message (the summary and its fold point live in state keys of their own), a
failing summary call changes nothing (it is logged and retried after a backoff),
and a fold never separates a tool call from its results. The docs' Agents and
LangGraph page compares it with LangChain's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.prompts import PromptTemplate
from langgraph.runtime import Runtime

from memories.errors import ConfigError, LLMError
from memories.kernel.llm import ModelCaller, resolve_llm
from memories.kernel.steps import Steps, twins
from memories.kernel.tokens import counter_for
from memories.short_term.summary.state import SummaryState
from memories.short_term.summary.summarizer import Summarizer
from memories.short_term.summary.triggers import (
    Size,
    context_window,
    fired,
    kept_count,
    parse_keep,
    parse_triggers,
)

__all__ = ["SummarizationMiddleware", "SummaryAgentState"]

logger = logging.getLogger(__name__)

#: The text the summary is shown under (LangChain's, word for word).
SUMMARY_LEAD = "Here is a summary of the conversation to date:\n\n"


class SummaryAgentState(AgentState[Any]):
    """The agent state, with where the running summary stands."""

    summary: NotRequired[str]
    """The summary of every message up to ``summarized_through``."""
    summarized_through: NotRequired[str]
    """The id of the last message folded into the summary."""
    summary_failures: NotRequired[int]
    """Consecutive failed summary calls (0 or absent: the last one worked)."""
    summary_retry_in: NotRequired[int]
    """Model calls still to skip before the summary is tried again (backoff)."""


class SummarizationMiddleware(AgentMiddleware[SummaryAgentState, Any]):
    """Summarise older messages for the model, keeping the thread whole.

    Args:
        model: the summarising model (a chat model or ``"provider:model"``).
        trigger: when to fold: ``("tokens", N)``, ``("messages", N)``,
            ``("fraction", f)`` of ``model``'s context window, or a list (any
            fires). None: never (as LangChain's).
        keep: what the model still sees verbatim after a fold (whole
            exchanges; default ``("messages", 20)``, as LangChain's).
        token_counter: counts a list of messages (default LangChain's
            ``count_tokens_approximately``).
        summary_prompt: the prompt, with ``{messages}`` (LangChain's form; the
            running summary is put before the new messages) or ``{summary}``
            and ``{new_lines}``.
        timeout: seconds one summary call may take before it counts as failed.
        max_tokens_before_summary: older form of ``trigger=("tokens", N)``.
        messages_to_keep: older form of ``keep=("messages", N)``.
    """

    state_schema = SummaryAgentState

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        trigger: Any = None,
        keep: Any = ("messages", 20),
        token_counter: Callable[[Sequence[BaseMessage]], int] | None = None,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        timeout: float | None = 120.0,
        max_tokens_before_summary: int | None = None,
        messages_to_keep: int | None = None,
    ) -> None:
        super().__init__()
        if max_tokens_before_summary is not None:
            if trigger is not None:
                raise ConfigError(
                    "Give trigger=('tokens', N) or the older max_tokens_before_summary=N, not "
                    "both; trigger is the current form."
                )
            trigger = ("tokens", max_tokens_before_summary)
        if messages_to_keep is not None:
            if keep != ("messages", 20):
                raise ConfigError(
                    "Give keep=('messages', N) or the older messages_to_keep=N, not both; "
                    "keep is the current form."
                )
            keep = ("messages", messages_to_keep)
        self.model = resolve_llm(model) if isinstance(model, str) else model
        self.trigger: tuple[Size, ...] = parse_triggers(trigger) or ()
        kept = parse_keep(keep)
        if kept is None:
            raise ConfigError("keep must be a pair such as ('messages', 20), not None.")
        self.keep: Size = kept
        self.window = context_window(self.model)
        if self.window is None and any(s.kind == "fraction" for s in (*self.trigger, self.keep)):
            raise ConfigError(
                f"('fraction', f) is a share of the model's context window, and "
                f"{type(self.model).__name__} gives none; use ('tokens', N)."
            )
        if any(s.kind == "topic" for s in self.trigger):
            raise ConfigError("('topic', t) is a trigger of the summary memories, not of this.")
        self.count = token_counter or count_tokens_approximately
        template = summary_prompt
        if "{messages}" in template:
            template = template.replace(
                "{messages}", "Summary so far:\n{summary}\n\nNew messages:\n{new_lines}"
            )
        self._summarizer = Summarizer(
            ModelCaller(self.model, {}, timeout),
            PromptTemplate.from_template(template),
            counter_for(None),
            0,
        )

    @property
    def name(self) -> str:
        return "MemoriesSummarization"

    def _plan(self, state: dict[str, Any]) -> tuple[list[BaseMessage], SummaryState] | None:
        """The messages to fold now and the state they extend, or None (no fold)."""
        if not self.trigger:
            return None
        unfolded = _after(state["messages"], state.get("summarized_through"))
        pending = SummaryState(
            summary=state.get("summary", ""),
            seqs=tuple(range(len(unfolded))),
            counts=tuple(self.count([m]) for m in unfolded),
            starts=tuple(not isinstance(m, ToolMessage) for m in unfolded),
            failures=int(state.get("summary_failures") or 0),
            retry_in=int(state.get("summary_retry_in") or 0),
        )
        if fired(self.trigger, pending, window=self.window, drift=None) is None:
            return None
        cut = kept_count(pending, self.keep, window=self.window)
        return (unfolded[:cut], pending) if cut > 0 else None

    def _before_model_steps(
        self, state: SummaryAgentState, runtime: Runtime[Any]
    ) -> Steps[dict[str, Any] | None]:
        """The steps of one fold: the state update, or None (no fold)."""
        plan = self._plan(dict(state))
        if plan is None:
            return None
        folded, pending = plan
        ready, through = pending.to_fold(len(folded), force=False)
        if through is None:  # a backoff turn: skipped, and counted
            return {"summary_retry_in": ready.retry_in}
        try:
            new = yield from self._summarizer.summarizing(folded, pending.summary)
        except LLMError as exc:
            failed = pending.failed(str(exc))
            logger.warning(
                "Summary not updated (messages and summary kept; tried again in %d model "
                "calls): %s",
                failed.retry_in + 1,
                exc,
            )
            return {"summary_failures": failed.failures, "summary_retry_in": failed.retry_in}
        done: dict[str, Any] = {"summary": new, "summarized_through": folded[-1].id}
        if pending.failures:
            done.update(summary_failures=0, summary_retry_in=0)
        return done

    before_model, abefore_model = twins(_before_model_steps)

    def _shown(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state: dict[str, Any] = dict(request.state)
        summary, through = state.get("summary"), state.get("summarized_through")
        if not isinstance(summary, str) or not summary:
            return request
        lead = HumanMessage(
            SUMMARY_LEAD + summary, additional_kwargs={"lc_source": "summarization"}
        )
        shown: list[Any] = [lead, *_after(request.messages, through)]
        return request.override(messages=shown)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(self._shown(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(self._shown(request))


def _after(messages: Sequence[BaseMessage], message_id: str | None) -> list[BaseMessage]:
    """The messages after the one with ``message_id`` (all of them when it is absent)."""
    ids = [m.id for m in messages]
    if message_id is None or message_id not in ids:
        return list(messages)
    return list(messages[ids.index(message_id) + 1 :])
