"""Model updates owed by saved turns, queued in the history's state and run in order.

A save writes the turn and the update it owes (a *job*: the strings the prompts
need) together, then runs the queue: jobs in order, each one's model calls
unlocked, its writes applied only if the job is still first and unchanged. A
failed call leaves the job queued and counted in ``status()``; a call the budget
refuses waits, uncounted. Written once as steps, so sync and async share it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage
from langchain_core.prompts import BasePromptTemplate
from pydantic import Field, PrivateAttr

from memories.core.base import ChatMemory
from memories.core.parts import ModelMemory
from memories.errors import BudgetExceededError, ConfigError, LLMError
from memories.kernel.background import MemoryStatus
from memories.kernel.capabilities import Capabilities
from memories.kernel.keys import input_text_for
from memories.kernel.messages import format_buffer
from memories.kernel.steps import Step, Steps, step, twins
from memories.long_term.entities.prompts import PROMPT_CHECK
from memories.short_term.summary.prompts import prompt_config

__all__ = ["Job", "QueuedUpdates"]

logger = logging.getLogger(__name__)

#: One queued update: JSON data (the prompts' strings and how far it got).
Job = dict[str, Any]


class QueuedUpdates(ModelMemory, ChatMemory):
    """A chat memory whose saves owe model updates, queued until they succeed.

    Implementing a subclass: :meth:`_job` (the update a turn owes),
    :meth:`_advancing` (the steps moving one job on, its model calls through
    :meth:`_asking`) and :meth:`_load_memory_variables_steps` (the steps of a load).
    """

    #: A session's chat log, with what the model made of it kept beside (entities, a graph).
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="session", chat_log=True, exportable=True
    )
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    k: int = Field(default=3, ge=0)

    def model_post_init(self, context: Any, /) -> None:
        if self.llm is None:
            raise ConfigError(
                f"{type(self).__name__} needs an llm: pass llm=<a LangChain model> or "
                "llm='provider:model'."
            )
        self._caller  # noqa: B018  (resolve now: a bad model fails at construction)

    @property
    def _io_lock(self) -> threading.Lock:
        return self._lock

    @classmethod
    def _prompt_fields(cls) -> list[str]:
        """The fields typed :data:`~memories.long_term.entities.prompts.PromptField`."""
        return [name for name, field in cls.model_fields.items() if PROMPT_CHECK in field.metadata]

    def to_config(self) -> dict[str, Any]:
        """The config; an in-memory store or graph (the default) is not written."""
        config = super().to_config()
        for name in self.session_stores:
            if config.get(name) == {"type": "memory"}:
                del config[name]
        return config

    def _config_value(self, name: str, value: Any) -> Any:
        if name in self._prompt_fields():
            template = prompt_config(value)
            if not isinstance(template, str):
                raise ConfigError(f"{name} = {value!r:.60} has no config form; give its template.")
            return template
        return super()._config_value(name, value)

    def _state_writers(self) -> dict[str, Any]:
        """The model and the prompts that write the entities (and the queue of updates)."""
        prompts = {name: getattr(self, name) for name in self._prompt_fields()}
        return {**super()._state_writers(), **prompts}

    def _advancing(self, job: Job) -> Steps[tuple[Job | None, list[Step]]]:
        """Move ``job`` on: the job after it (None: done) and the steps applying its result.

        Raises:
            LLMError: a model call failed (the job stays as it was).
        """
        raise NotImplementedError(f"{type(self).__name__} must define _advancing()")

    def _job(self, text: str) -> Steps[Job]:
        """The update a turn whose input is ``text`` owes (read after the turn is appended)."""
        raise NotImplementedError(f"{type(self).__name__} must define _job()")

    def _context_saving(
        self, inputs: dict[str, Any], outputs: dict[str, Any], *, appended: bool
    ) -> Steps[None]:
        """Save the turn, then the model update it owes (entity summaries, triples)."""
        messages, text = self._turn(inputs, outputs), input_text_for(self, inputs)
        return self._saving_turn(messages, self._job(text), appended=appended)

    def _load_memory_variables_steps(self, inputs: dict[str, Any]) -> Steps[dict[str, Any]]:
        """The prompt's variables: what the model knows of what the input names (one call)."""
        raise NotImplementedError(
            f"{type(self).__name__} must define _load_memory_variables_steps()"
        )

    load_memory_variables, aload_memory_variables = twins(
        _load_memory_variables_steps, runner="_run", write=False
    )

    def _window(self) -> Steps[list[BaseMessage]]:
        """The last ``k`` exchanges (LangChain: the last ``2 * k`` messages); none for 0."""
        if self.k == 0:
            return []
        entries = yield step(self.chat_memory.last_exchanges, self.k)
        return [entry.message for entry in entries]

    def _selection(self) -> Steps[list[BaseMessage]]:
        return (yield from self._window())

    def _buffer(self, messages: list[BaseMessage]) -> str:
        return format_buffer(messages, self.human_prefix, self.ai_prefix)

    def _asking(self, prompt: BasePromptTemplate, **values: Any) -> Steps[str]:
        """The model's reply to ``prompt`` filled with ``values``, as ``LLMChain.predict`` sends it.

        A prompt value goes to the model as it is: a chat model gets its
        messages, an LLM its string, as in LangChain's chains.

        Raises:
            LLMError: the model raised or timed out.
        """
        assert self._caller is not None  # checked at construction
        reply = yield step(self._caller.invoke, prompt.format_prompt(**values), unlocked=True)
        return str(reply.text) if isinstance(reply, BaseMessage) else str(reply)

    def _reading_state(self) -> Steps[dict[str, Any]]:
        stored = yield step(self.chat_memory.load_state, self.state_key)
        return stored or {"jobs": [], "failures": 0, "last_error": None}

    def _saving_state(self, state: dict[str, Any]) -> Steps[None]:
        yield step(self.chat_memory.save_state, self.state_key, state)

    def _saving_turn(
        self, messages: list[BaseMessage], making_job: Steps[Job], *, appended: bool
    ) -> Steps[None]:
        """Append the turn (unless ``appended``), queue the job it owes (made after), run the queue.

        On SQL the turn and its job are one transaction, committed before the
        first model call.
        """
        if not appended:
            yield step(self.chat_memory.append, messages)
        job = yield from making_job
        state = yield from self._reading_state()
        yield from self._saving_state({**state, "jobs": [*state["jobs"], job]})
        yield from self._working()

    def _working(self) -> Steps[int]:
        """Run the queued jobs in order; stop at the first failure. Returns the jobs left."""
        while True:
            state = yield from self._reading_state()
            if not state["jobs"]:
                return 0
            job = state["jobs"][0]
            try:
                after, writes = yield from self._advancing(job)
            except BudgetExceededError as exc:
                # Not a failure: the job waits for the next period, counting nothing.
                self._unanswered("the model update of a saved turn", exc, "the turn waits, queued")
                return len(state["jobs"])
            except LLMError as exc:
                return (yield from self._failed(job, exc))
            current = yield from self._reading_state()
            if not current["jobs"] or current["jobs"][0] != job:
                continue  # another turn or a clear moved the queue: read it again
            for write in writes:
                _ = yield write  # the runner sends each result back
            rest = current["jobs"][1:]
            jobs = rest if after is None else [after, *rest]
            yield from self._saving_state({"jobs": jobs, "failures": 0, "last_error": None})

    def _failed(self, job: Job, error: LLMError) -> Steps[int]:
        current = yield from self._reading_state()
        if not current["jobs"] or current["jobs"][0] != job:
            return len(current["jobs"])
        failures = current["failures"] + 1
        logger.warning(
            "%s (session %r): the model update of a saved turn failed (%s); the turn is kept "
            "and %d update job(s) stay queued, retried on the next save or flush() "
            "(%d consecutive failures).",
            type(self).__name__,
            self.chat_memory.session_id,
            error,
            len(current["jobs"]),
            failures,
        )
        yield from self._saving_state({**current, "failures": failures, "last_error": str(error)})
        return len(current["jobs"])

    def _unanswered(self, what: str, error: LLMError, then: str) -> None:
        """Log a model call that gave nothing: failed (a warning), or refused by the budget.

        A refusal is no failure (the work waits for the next period): logged
        at info, and counted nowhere as failed.
        """
        name, session = type(self).__name__, self.chat_memory.session_id
        if isinstance(error, BudgetExceededError):
            logger.info("%s (session %r): %s deferred: %s; %s.", name, session, what, error, then)
        else:
            logger.warning("%s (session %r): %s failed (%s); %s.", name, session, what, error, then)

    def _flush_steps(self, *, timeout: float | None = None) -> Steps[bool]:
        """Retry the queued updates now. True when none is left."""
        return (yield from self._working()) == 0

    flush, aflush = twins(_flush_steps, lock="_lock")

    def _status_steps(self) -> Steps[MemoryStatus]:
        """The updates still queued, and the failures that keep them there."""
        state = yield from self._reading_state()
        return MemoryStatus(
            pending=len(state["jobs"]),
            failures=state["failures"],
            last_error=state["last_error"],
            model=self.model_usage(),
        )

    status, astatus = twins(_status_steps, lock="_lock")
