"""Running summaries: LangChain's ``ConversationSummary[Buffer]Memory``.

Both fold older turns into a summary written by ``llm`` (or extractively with
none). The summary and the fold point live in the history beside the log
(:class:`SummaryState`), so a restart continues it and a fold deletes nothing;
a failed fold keeps summary and turns, is counted (:meth:`status`) and retried
with backoff. docs/memories/summaries.md compares the rules with LangChain's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, ClassVar, Literal

from langchain_classic.memory.prompt import SUMMARY_PROMPT
from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import Field, PrivateAttr

from memories.core.base import ChatMemory
from memories.core.parts import CountsTokens, DeferredMemory, ModelMemory
from memories.core.state import Cursors, SeenState
from memories.errors import BudgetExceededError, ConfigError, LLMError
from memories.kernel.capabilities import Capabilities
from memories.kernel.checks import whole_number
from memories.kernel.messages import format_buffer
from memories.kernel.steps import Steps, arun, blocking_twin, run, step, twins
from memories.short_term.summary.prompts import (
    MessageClassField,
    SummaryPromptField,
    message_class_config,
    prompt_config,
)
from memories.short_term.summary.state import SummaryState, SummaryStatus
from memories.short_term.summary.summarizer import Summarizer
from memories.short_term.summary.triggers import (
    KeepField,
    Size,
    TriggerField,
    context_window,
    fired,
    kept_count,
    topic_similarity,
)
from memories.stores.history.base import Entry

__all__ = [
    "SUMMARY_PROMPT",
    "ConversationSummaryBufferMemory",
    "SummaryBufferMemory",
    "SummaryMemory",
    "SummaryState",
    "SummaryStatus",
]

logger = logging.getLogger(__name__)


class _RunningSummaryMemory(ModelMemory, CountsTokens, DeferredMemory, ChatMemory):
    """What the summary and summary-buffer memories share (arguments: :class:`SummaryMemory`)."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="session", chat_log=True, exportable=True, deferred=True, expires=True
    )

    prompt: SummaryPromptField = SUMMARY_PROMPT
    summary_message_cls: MessageClassField = SystemMessage
    max_token_limit: int = Field(default=2000, gt=0)
    initial_summary: str = ""
    max_summary_tokens: int | None = Field(default=None, gt=0)
    summarize: Literal["inline", "background"] = "inline"
    trigger: TriggerField = None
    keep: KeepField = None
    topic_embeddings: Embeddings | str | None = None

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _epoch: int = PrivateAttr(default=0)
    _llm_calls: int = PrivateAttr(default=0)

    def model_post_init(self, context: Any, /) -> None:
        # Resolve now, so a bad counter or model fails at construction, not on a later turn.
        self._counter  # noqa: B018
        self._caller  # noqa: B018
        sizes = [*(self.trigger or ()), *([self.keep] if self.keep else [])]
        if any(size.kind == "fraction" for size in sizes) and context_window(self._model) is None:
            raise ConfigError(
                f"('fraction', f) is a share of the model's context window, and "
                f"{type(self._model).__name__ if self._model else 'no llm'} gives none "
                "(profile['max_input_tokens']); use ('tokens', N) instead."
            )

    def _counting_model(self) -> Any:
        return self._model

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "trigger" and value is not None:
            return [size.to_config() for size in value]
        if name == "keep" and value is not None:
            return value.to_config()
        if name == "summary_message_cls":
            value = message_class_config(value)
        if name == "prompt":
            value = prompt_config(value)
        return super()._config_value(name, value)

    # -- what each memory decides ---------------------------------------------------

    def _fold_count(self, state: SummaryState) -> int:
        """How many leading unfolded messages to fold now (0: none)."""
        raise NotImplementedError(f"{type(self).__name__} must define _fold_count()")

    def _default_keep(self, firing: Size, window: int | None) -> Size:
        """What stays verbatim when ``firing`` fired and ``keep`` is None: nothing here."""
        return Size("messages", 0)

    @cached_property
    def _topic_embedder(self) -> Embeddings:
        from memories.kernel.embeddings import resolve_embeddings

        return resolve_embeddings(self.topic_embeddings)

    def _topic_drift(self, state: SummaryState, unfolded: Sequence[Entry]) -> float | None:
        """How similar the newest exchange is to the ones before it (None: too few to say)."""
        return topic_similarity(state, unfolded, self._topic_embedder)

    _atopic_drift = blocking_twin(_topic_drift)

    def _planning(
        self, state: SummaryState, unfolded: Sequence[Entry]
    ) -> Steps[tuple[int, str | None]]:
        """How many messages to fold now, and the ``trigger=`` pair that says so."""
        if self.trigger is None:
            return self._fold_count(state), None
        window = context_window(self._model)
        drift = None
        if any(t.kind == "topic" for t in self.trigger):
            drift = yield step(self._topic_drift, state, unfolded)
        firing = fired(self.trigger, state, window=window, drift=drift)
        if firing is None:
            return 0, None
        keep = self.keep or self._default_keep(firing, window)
        return kept_count(state, keep, window=window), firing.describe()

    def _clip_cap(self) -> int | None:
        """The most tokens of one message a fold sends (None: whole messages)."""
        return self.max_token_limit

    def _summary_messages(self, summary: str) -> list[BaseMessage]:
        """The messages the summary is shown as, before the unfolded turns."""
        return [self.summary_message_cls(content=summary)] if summary else []

    def _extractive_budget(self) -> int:
        return self.max_summary_tokens or self.max_token_limit

    def _state_writers(self) -> dict[str, Any]:
        """The model and the prompt that write the summary."""
        return {**super()._state_writers(), "prompt": self.prompt}

    def _predict_new_summary_steps(
        self, messages: Sequence[BaseMessage], existing_summary: str
    ) -> Steps[str]:
        """The summary of ``existing_summary`` followed by ``messages`` (LangChain's method).

        The model's, or extractive without one.

        Raises:
            LLMError: the LLM raised, timed out or returned empty text.
        """
        if self._caller is not None:
            self._llm_calls += 1
        summarizer = Summarizer(
            self._caller, self.prompt, self._counter, self._extractive_budget(),
            self.human_prefix, self.ai_prefix,
        )  # fmt: skip
        return (yield from summarizer.summarizing(messages, existing_summary))

    predict_new_summary, apredict_new_summary = twins(_predict_new_summary_steps)

    @property
    def llm_calls(self) -> int:
        """Summary calls this object made to its LLM (failed ones too), since it was made."""
        return self._llm_calls

    # -- pure steps shared by the sync and async twins ----------------------------------

    def _shown(self, state: SummaryState, unfolded: Sequence[Entry]) -> list[BaseMessage]:
        start = state.window(self.max_token_limit)
        if start:
            log = logger.warning if state.failures else logger.info
            log(
                "%s (session %r): %d unfolded messages (%d tokens) are over max_token_limit=%d "
                "because %s; showing the newest %d that fit. They are kept and will be "
                "folded into the summary.",
                type(self).__name__,
                self.chat_memory.session_id,
                len(state.seqs),
                state.total,
                self.max_token_limit,
                f"folding failed ({state.last_error})"
                if state.failures
                else "a fold has not run yet",
                len(state.seqs) - start,
            )
        return self._summary_messages(state.summary) + state.shown(unfolded, start)

    def _failed(self, state: SummaryState, error: LLMError) -> SummaryState:
        failed = state.failed(str(error))
        logger.warning(
            "%s (session %r): folding %d messages into the summary failed (%s); the summary "
            "and the messages are unchanged; retrying after %d more turns.",
            type(self).__name__,
            self.chat_memory.session_id,
            len(state.seqs),
            error,
            failed.retry_in,
        )
        return failed

    # -- I/O: steps written once; the kernel runs them sync or async, under the lock ----

    @property
    def _io_lock(self) -> threading.Lock:
        return self._lock

    def _reading(self) -> Steps[tuple[SummaryState, list[Entry]]]:
        """The state brought up to date with the log (not saved) and the unfolded entries."""
        history = self.chat_memory
        horizon = yield from self._horizon()
        stored, changes = yield from self._seen.reading(history, self.state_key, _cursors)
        initial = "" if self._epoch else self.initial_summary  # cleared: none, as LangChain's
        fresh = SummaryState(summary=initial, counter=self._counter_id)
        state = (fresh if stored is None else stored).forgotten(horizon)
        if changes is None:  # nothing stored: the whole log is unfolded
            changes = yield step(history.changes, after=state.folded, edits_after=state.edits)
        unfolded = changes.entries
        if changes.touches(state.folded):
            logger.info("%s: an edit changed a summarised message; summarising anew", self)
            unfolded = yield step(history.entries)
        state = state.edited(changes, fresh)
        state = state.counted(unfolded, self._counter_id, lambda m: self._counter([m]))
        return state, unfolded

    @cached_property
    def _seen(self) -> SeenState[SummaryState]:
        """The state this process saw last: its cursors are the guess of the next read."""
        return SeenState(SummaryState.from_state)

    def _storing(self, state: SummaryState) -> Steps[None]:
        """Save ``state``, and remember it as the one this process saw last."""
        stored = state.to_state()
        yield step(self.chat_memory.save_state, self.state_key, stored)
        self._seen.saw(stored, state)

    def _folding(self, *, force: bool = False, raise_errors: bool = False) -> Steps[SummaryState]:
        """Fold what is over the limit (several calls if far over), saving as it goes.

        The lock is let go only around the model call, whose result is saved only if
        nobody folded or cleared meanwhile; a failure saves the backoff alone.
        """
        while True:
            epoch = self._epoch
            state, unfolded = yield from self._reading()
            count, trigger = yield from self._planning(state, unfolded)
            state, cut = state.to_fold(count, force=force)
            yield from self._storing(state)
            if cut is None:
                return state
            try:
                messages = state.fold_input(unfolded, cut, cap=self._clip_cap())
                summary = yield from self._predict_new_summary_steps(messages, state.summary)
            except BudgetExceededError as exc:
                # Not a failure: no backoff; the turns stay unfolded until the next period.
                logger.info("%s: fold deferred: %s", self, exc)
                if raise_errors:
                    raise
                current, _ = yield from self._reading()
                return current
            except LLMError as exc:
                current, _ = yield from self._reading()
                if epoch == self._epoch and current.same_fold(state):
                    current = self._failed(current, exc)
                    yield from self._storing(current)
                if raise_errors:
                    raise
                return current
            current, _ = yield from self._reading()
            if epoch != self._epoch or not current.same_fold(state):
                logger.info("%s: the session changed during a fold; discarding it", self)
                return current
            after = replace(current.folded_through(cut, summary), trigger=trigger)
            yield from self._storing(after)
            force = False

    def _selection(self) -> Steps[list[BaseMessage]]:
        state, unfolded = yield from self._reading()
        return self._shown(state, unfolded)

    def _update(self) -> Steps[None]:
        # Unlocked: a full scheduler may run the job inline, and the job takes the lock.
        if self._in_background and (yield step(self._schedule, unlocked=True)):
            return
        yield from self._folding()

    def _clear_steps(self) -> Steps[None]:
        self._epoch += 1
        if self._in_background:
            self._background.cancel()
        yield from super()._clear_steps()

    def _schedule(self) -> bool:
        """(Re)schedule this session's background fold; False once closed (fold inline then)."""
        return self._background.schedule()

    _aschedule = blocking_twin(_schedule)

    @property
    def _in_background(self) -> bool:
        return self.summarize == "background"

    def _background_key(self) -> tuple[int, str, str]:
        """This session's fold (two memories on one history and state key share it)."""
        return (id(self.chat_memory), self.chat_memory.session_id, self.state_key)

    def _background_job(self) -> None:
        state = run(self._folding(raise_errors=True), lock=self._lock)
        logger.debug("%s: background fold done, %d tokens unfolded", self, state.total)
        # The fold has read what it needed: the session's expired rows can go now.
        swept = self._sweep_session()
        if swept:
            logger.debug("%s: retention swept %d rows", self, swept)

    def status(self) -> SummaryStatus:
        """Where the summary stands (reads the history; no LLM call)."""
        state, _ = run(self._reading(), lock=self._lock)
        return replace(state.status(background=self._background_status()), model=self.model_usage())

    # -- LangChain's extras -----------------------------------------------------------

    def _prune_steps(self) -> Steps[None]:
        """Fold now what is over the limit, even during backoff (LangChain's method).

        Raises:
            LLMError: the LLM failed (the summary and the log are unchanged).
        """
        yield from self._folding(force=True, raise_errors=True)

    prune, aprune = twins(_prune_steps, lock="_lock")

    def _current_summary(self) -> str:
        return run(self._reading(), lock=self._lock)[0].summary

    def _setting_summary(self, summary: str) -> Steps[None]:
        state, _ = yield from self._reading()
        yield from self._storing(replace(state, summary=summary))

    def _set_summary(self, summary: str) -> None:
        run(self._setting_summary(summary), lock=self._lock)


class SummaryBufferMemory(_RunningSummaryMemory):
    """The newest turns verbatim, and a running summary of the older ones.

    When the verbatim turns pass ``max_token_limit`` tokens, the oldest whole
    exchanges are folded into the summary down to ``low_water`` of the limit, so
    one LLM call absorbs several turns. The value is ``[summary message, *turns]``
    (``"System: <summary>\\nHuman: ...\\nAI: ..."`` as a string), with no summary
    message while the summary is empty.

    Args:
        low_water: after a fold the verbatim turns hold at most this fraction of
            ``max_token_limit`` (lower: fewer LLM calls, fewer verbatim turns).
            None: LangChain's rule, the oldest messages one by one until the rest
            fits (one call per prune), as :class:`ConversationSummaryBufferMemory`.
        moving_summary_buffer: LangChain's name for ``initial_summary`` in this class.
        (and the arguments of :class:`SummaryMemory`, but ``buffer``.)
    """

    config_type: ClassVar[str] = "summary_buffer"
    langchain_names: ClassVar[dict[str, str]] = {"moving_summary_buffer": "initial_summary"}

    low_water: float | None = Field(default=0.4, ge=0.0, le=1.0)

    def _fold_count(self, state: SummaryState) -> int:
        limit = self.max_token_limit
        if self.low_water is None:
            return state.plan_exact(limit)
        return state.plan(high=limit, low=int(limit * self.low_water), chunk=2 * limit)

    def _clip_cap(self) -> int | None:
        return None if self.low_water is None else self.max_token_limit

    def _default_keep(self, firing: Size, window: int | None) -> Size:
        """``low_water`` of what the trigger measured (the newest exchange after a topic change)."""
        share = 1.0 if self.low_water is None else self.low_water
        if firing.kind == "topic":
            return Size("messages", 1)
        if firing.kind == "messages":
            return Size("messages", int(firing.value * share))
        limit = firing.value * (window or 0) if firing.kind == "fraction" else firing.value
        return Size("tokens", int(limit * share))

    def _extractive_budget(self) -> int:
        return self.max_summary_tokens or max(1, self.max_token_limit // 2)

    @property
    def moving_summary_buffer(self) -> str:
        """The running summary of the folded turns (LangChain's attribute)."""
        return self._current_summary()

    @moving_summary_buffer.setter
    def moving_summary_buffer(self, summary: str) -> None:
        self._set_summary(summary)


class ConversationSummaryBufferMemory(SummaryBufferMemory):
    """LangChain's ``ConversationSummaryBufferMemory``: ``low_water=None`` by default."""

    config_type: ClassVar[str] = "conversation_summary_buffer"

    low_water: float | None = Field(default=None, ge=0.0, le=1.0)


class SummaryMemory(_RunningSummaryMemory):
    """A running summary of the whole conversation (LangChain's ``ConversationSummaryMemory``).

    Every turn is folded into the summary as it is saved (after the quiet period
    in background mode); turns not folded yet (a fold pending or failed) follow
    the summary verbatim, the newest within ``max_token_limit`` tokens.

    Args:
        llm, llm_kwargs, llm_timeout: the summarizer, as
            :class:`~memories.core.parts.ModelMemory` takes it (a timed-out fold
            is retried later); None: the offline extractive summarizer.
        prompt: the summary prompt (template or template string) with ``summary`` and ``new_lines``.
        summary_message_cls: the message class the summary is shown as.
        max_token_limit: the token budget of the turns shown verbatim.
        token_counter: as :class:`~memories.core.parts.CountsTokens`.
        max_summary_tokens: with no ``llm``, the extractive summary's budget
            (default ``max_token_limit``).
        summarize: ``"inline"`` folds while saving; ``"background"`` on a worker
            thread once the session has been quiet for ``debounce`` seconds.
        debounce, scheduler: background mode's quiet period and worker
            (:class:`~memories.core.parts.DeferredMemory`).
        initial_summary: the summary a new session starts with (kept if saved; none after clear).
        buffer: LangChain's name for ``initial_summary`` in this class.
    """

    config_type: ClassVar[str] = "summary"
    langchain_names: ClassVar[dict[str, str]] = {"buffer": "initial_summary"}

    def _fold_count(self, state: SummaryState) -> int:
        return state.plan(high=0, low=0, chunk=2 * self.max_token_limit)

    def _summary_messages(self, summary: str) -> list[BaseMessage]:
        # LangChain shows the summary message even while it is empty.
        return [self.summary_message_cls(content=summary)]

    def _format(self, messages: list[BaseMessage]) -> str | list[BaseMessage]:
        if self.return_messages:
            return messages
        lines = format_buffer(messages[1:], self.human_prefix, self.ai_prefix)
        return "\n".join(part for part in (str(messages[0].text), lines) if part)

    @property
    def buffer(self) -> str:
        """The running summary (LangChain's attribute; assignable)."""
        return self._current_summary()

    @buffer.setter
    def buffer(self, summary: str) -> None:
        self._set_summary(summary)

    async def abuffer(self) -> str:
        """Async :attr:`buffer`."""
        state, _ = await arun(self._reading(), lock=self._lock)
        return state.summary

    @classmethod
    def from_messages(
        cls, llm: Any, chat_memory: Any, *, summarize_step: int = 2, **kwargs: Any
    ) -> SummaryMemory:
        """A memory over an existing history, its messages summarized now (LangChain's method).

        As LangChain, ``summarize_step`` messages per call from the saved summary;
        each step is saved, so an LLM failure keeps the steps done so far.

        Raises:
            LLMError: a summary call failed.
        """
        whole_number(summarize_step, "summarize_step", least=1)
        memory = cls(llm=llm, chat_memory=chat_memory, **kwargs)
        run(memory._summarizing_log(summarize_step), lock=memory._lock)
        return memory

    def _summarizing_log(self, summarize_step: int) -> Steps[None]:
        state, unfolded = yield from self._reading()
        for i in range(0, len(unfolded), summarize_step):
            chunk = unfolded[i : i + summarize_step]
            messages = [e.message for e in chunk]
            summary = yield from self._predict_new_summary_steps(messages, state.summary)
            state = state.folded_through(chunk[-1].seq, summary)
            yield from self._storing(state)


def _cursors(state: SummaryState) -> Cursors:
    """Where a summary state's reads of the log start: after its folded and edit cursors."""
    return state.folded, state.edits
