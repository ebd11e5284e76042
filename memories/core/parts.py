"""Parts a memory class composes by inheriting: a model to call, work deferred to the background.

:class:`ModelMemory` gives the ``llm`` argument, resolved at construction;
:class:`DeferredMemory` the background mode with ``flush`` / ``close`` written
once; :class:`CountsTokens` the ``token_counter``.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import cached_property
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from pydantic import Field

from memories.core.base import BaseMemory
from memories.errors import BudgetExceededError, ConfigError
from memories.kernel.accounting import Budget, BudgetField, Spending
from memories.kernel.background import BackgroundWork, Debouncer, JobStatus
from memories.kernel.capabilities import capabilities_of
from memories.kernel.llm import LLMField, ModelCaller, ModelUsage
from memories.kernel.tokens import TokenCounter, counter_for, stable_id
from memories.stores.compaction import compactions
from memories.stores.erasure import StoreShare
from memories.stores.spending import SQLSpending

__all__ = ["CountsTokens", "DeferredMemory", "ModelMemory"]


class ModelMemory(BaseMemory):
    """A memory that calls a model: ``llm``, ``llm_kwargs``, ``llm_timeout``, ``budget``.

    Args:
        llm: a LangChain chat model or LLM, ``"provider:model"`` (LangChain's
            ``init_chat_model``, e.g. ``"openai:gpt-4o-mini"``),
            ``"llamacpp:/path/model.gguf"``, or None.
        llm_kwargs: constructor options for an ``llm`` given as a string
            (``{"temperature": 0}``, ``{"n_ctx": 2048}``).
        llm_timeout: seconds to wait for one model reply (None: forever).
        budget: a cap on the model calls or tokens of this memory's namespace per
            period, e.g. ``{"tokens": 50000, "per": "day"}``
            (:class:`~memories.kernel.accounting.Budget`). Past it no call is
            made: the work waits and ``status().deferred`` says until when.
    """

    llm: LLMField = None
    llm_kwargs: dict[str, Any] = Field(default_factory=dict)
    llm_timeout: float | None = Field(default=120.0, ge=0)
    budget: BudgetField = None

    def _state_writers(self) -> dict[str, Any]:
        """The model that writes this memory's state (see ``ChatMemory._state_writers``)."""
        return {"llm": self.llm, "llm_kwargs": self.llm_kwargs}

    @cached_property
    def _caller(self) -> ModelCaller | None:
        """The model, resolved (a missing provider package fails here); None without one."""
        if self.llm is None:
            return None
        if self.llm_kwargs and not isinstance(self.llm, str):
            raise ConfigError(
                "llm_kwargs configure a model given by name ('provider:model'); "
                "set the options on the model object instead."
            )
        return ModelCaller(
            self.llm,
            self.llm_kwargs,
            self.llm_timeout,
            ledger=self._ledger,
            budget=self.budget,
            spending=self._spending,
            memory=self.usage_name(),
        )

    @cached_property
    def _spending(self) -> Spending | None:
        """Where the budget's spending and the model calls are kept: the memory's SQL database.

        None without one: then the budget is kept in this process, the calls only in its ledger.
        """
        database = self._spending_database()
        return None if database is None else SQLSpending(database)

    def erasure_shares(self, *, session: bool, namespace: bool) -> list[StoreShare]:
        """Also the budget spending and model usage rows this memory keeps under its usage
        namespace, when erasing what that names: the session of a chat memory, the
        namespace of a long-term one (never another person's session's rows)."""
        found = super().erasure_shares(session=session, namespace=namespace)
        store, named = self.usage_store, self.usage_namespace()
        erasing = session if capabilities_of(self).scope == "session" else namespace
        if erasing and store is not None and named != "default":
            where = f"model usage and budget spending in {store.database!r}, namespace {named}"
            erase, files = (lambda: store.erase(named)), compactions(store.database)
            found.append(StoreShare(where, lambda: store.held(named), erase, files))
        return found

    @property
    def usage_store(self) -> SQLSpending | None:
        """Where this memory's model calls are recorded per day (its SQL database), or None."""
        spending = self._spending
        return spending if isinstance(spending, SQLSpending) else None

    @property
    def _model(self) -> BaseLanguageModel | None:
        return None if self._caller is None else self._caller.model

    def model_usage(self) -> ModelUsage:
        """What this memory's model calls have cost in this process: calls, tokens, failures, time.

        Tokens are the model's own count (``usage_metadata``); a reply without one
        counts as ``unmetered``.
        """
        return ModelUsage() if self._caller is None else self._caller.usage

    def _deferred_reason(self) -> str | None:
        budget: Budget | None = self.budget
        if budget is None:
            return None
        try:
            budget.check(self.usage_namespace(), spending=self._spending)
        except BudgetExceededError as exc:
            return str(exc)
        return None

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "budget" and isinstance(value, Budget):
            return value.to_config()
        if name == "llm" and not isinstance(value, str | None):
            raise ConfigError(
                f"{type(self).__name__}.llm is a {type(value).__name__} object, which has no "
                "config form (its client, keys and settings cannot be written down safely). "
                "Pass the model by name, e.g. llm='openai:gpt-4o-mini' with llm_kwargs or "
                "'llamacpp:/path.gguf', or build this memory in code."
            )
        return super()._config_value(name, value)


class CountsTokens(BaseMemory):
    """A memory that counts tokens: ``token_counter``, and the identity state is keyed on.

    Args:
        token_counter: None/``"tiktoken"`` (offline), ``"chars"``, a callable,
            or a LangChain model (see :func:`memories.kernel.tokens.counter_for`).
            None counts with :meth:`_counting_model`'s own counter when the
            memory names one and it works here (as LangChain counts), else tiktoken.
    """

    token_counter: Any = None

    def _counting_model(self) -> Any:
        """The model whose counter counts when ``token_counter`` is None (None: tiktoken)."""
        return None

    @cached_property
    def _counter(self) -> TokenCounter:
        return counter_for(self.token_counter, self._counting_model())

    @cached_property
    def _counter_id(self) -> str:
        """The counter's stable identity: state counted by another counter is recounted."""
        return stable_id(self._counter)

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "token_counter" and self._counter.name is not None:
            return self._counter.name
        return super()._config_value(name, value)


class DeferredMemory(BaseMemory):
    """A memory whose work after a save (a fold, an update) may run in the background.

    A subclass says whether it runs in the background now (:attr:`_in_background`),
    under which key (:meth:`_background_key`: memories on the same data share one
    job) and what the job is (:meth:`_background_job`).

    Args:
        debounce: the quiet period before the background job runs, in seconds.
        scheduler: the :class:`~memories.kernel.background.Debouncer` that runs
            it; by default one worker thread shared by the whole process.
    """

    debounce: float = Field(default=1.0, ge=0)
    scheduler: Debouncer | None = Field(default=None, exclude=True)

    @property
    def _in_background(self) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must define _in_background")

    def _background_key(self) -> Hashable:
        raise NotImplementedError(f"{type(self).__name__} must define _background_key()")

    def _background_job(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define _background_job()")

    @cached_property
    def _background(self) -> BackgroundWork:
        return BackgroundWork(
            self._background_key(),
            self._accounted_job,
            scheduler=self.scheduler,
            delay=self.debounce,
        )

    def _accounted_job(self) -> None:
        """The background job as one operation of this memory (counted and traced)."""
        with self._operation("background_update", joins=False):
            self._background_job()

    def _background_status(self) -> JobStatus | None:
        """The scheduler's counters in background mode, else None (for ``status()``)."""
        return self._background.status() if self._in_background else None

    def flush(self, *, timeout: float | None = None) -> bool:
        """Run this memory's pending background job now and wait for it.

        Returns:
            True when no job of this memory is pending or running (always
            outside background mode, where the work finishes inside ``save_context``).
        """
        return not self._in_background or self._background.flush(timeout=timeout)

    def close(self, *, timeout: float | None = None) -> bool:
        """Flush, then do later turns' work inline; the scheduler (maybe shared) keeps running."""
        return self._background.close(timeout=timeout)
