"""The model layer: language models by name, resolved at construction, called with a timeout.

A memory's ``llm`` (:data:`LLMField`) is a langchain-core model as it is,
``"llamacpp:/path/to/model.gguf"`` (``pip install 'chat-memories[local]'``), or
any other ``"provider:model"`` for langchain's ``init_chat_model``, which names
the provider package to install when it is missing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

from langchain_core.language_models import BaseChatModel, BaseLanguageModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BeforeValidator

from memories.errors import ConfigError, LLMError, MissingDependencyError
from memories.kernel.accounting import (
    Budget,
    Call,
    Ledger,
    ModelUsage,
    Spending,
    current_namespace,
    measured,
)
from memories.kernel.imports import install_hint
from memories.kernel.steps import bounded_call, to_thread

__all__ = [
    "LLMField",
    "LLMSpec",
    "ModelCaller",
    "ModelUsage",
    "ainvoke_model",
    "ainvoke_text",
    "check_llm_spec",
    "invoke_model",
    "invoke_text",
    "resolve_llm",
]

LLMSpec = BaseLanguageModel | str

T = TypeVar("T")

LLAMACPP_PREFIX = "llamacpp:"

logger = logging.getLogger(__name__)


def check_llm_spec(spec: Any) -> Any:
    """The shape check of an ``llm`` field: None, a LangChain model, or ``"provider:model"``.

    Raises:
        ConfigError: anything else (the message shows the accepted forms).
    """
    if spec is None or isinstance(spec, BaseLanguageModel):
        return spec
    if isinstance(spec, str) and ":" in spec:
        return spec
    raise ConfigError(
        f"llm must be a LangChain model or a string 'provider:model' "
        f"(e.g. 'openai:gpt-4o-mini', 'llamacpp:/models/m.gguf'); got {spec!r:.80}"
    )


#: The type of a memory's ``llm`` field. Its config form is the string; a
#: model object has none (``to_config`` says so).
LLMField = Annotated[Any, BeforeValidator(check_llm_spec)]


class ModelCaller:
    """A memory's model: resolved once (at construction), called with a timeout, metered.

    Its methods (``invoke_text`` and ``ainvoke_text``) are the steps a memory's
    loop yields; every call, its tokens, time and failure are counted in :attr:`usage`.

    Args:
        spec: what the ``llm`` field holds (a model or ``"provider:model"``).
        options: constructor options for a model given by name.
        timeout: seconds to wait for one answer (None: no limit).
        ledger: where the calls are counted (a new one if None).
        budget: the cap on a namespace's calls or tokens per period, or None.
        spending: where the budget's spending and every call are kept (None: in this process).
        memory: the memory the calls are recorded under (its ``usage_name``).

    Raises:
        ConfigError, MissingDependencyError: as :func:`resolve_llm`.
    """

    def __init__(
        self,
        spec: Any,
        options: dict[str, Any],
        timeout: float | None,
        *,
        ledger: Ledger | None = None,
        budget: Budget | None = None,
        spending: Spending | None = None,
        memory: str = "memory",
    ) -> None:
        self.model = resolve_llm(spec, **options)
        self.timeout = timeout
        self.ledger = Ledger() if ledger is None else ledger
        self.budget = budget
        self.spending = spending
        self.memory = memory
        self._span = _span_attributes(self.model)

    @property
    def usage(self) -> ModelUsage:
        """The calls so far, with their tokens, failures and time."""
        return self.ledger.total("model")

    def invoke(
        self,
        prompt: LanguageModelInput,
        /,
        *,
        bound: Runnable[Any, Any] | None = None,
        retry: bool = False,
    ) -> Any:
        """The model's reply (``bound``: the model with tools bound, if any).

        ``retry``: this call asks again after a rejected reply (counted as a retry).

        Raises:
            BudgetExceededError: the namespace's budget is spent (no call is made).
            LLMError: as :func:`invoke_model`.
        """
        with self._measured(retry) as call:
            return self._metered(
                call, invoke_model(bound or self.model, prompt, timeout=self.timeout)
            )

    async def ainvoke(
        self,
        prompt: LanguageModelInput,
        /,
        *,
        bound: Runnable[Any, Any] | None = None,
        retry: bool = False,
    ) -> Any:
        """Async :meth:`invoke`."""
        async with self._ameasured(retry) as call:
            reply = await ainvoke_model(bound or self.model, prompt, timeout=self.timeout)
            return self._metered(call, reply)

    def invoke_text(self, prompt: LanguageModelInput, /) -> str:
        """The reply's text, stripped; empty text is an :class:`LLMError` (counted as failed)."""
        with self._measured(False) as call:
            reply = invoke_model(self.model, prompt, timeout=self.timeout)
            return _text(self.model, self._metered(call, reply))

    async def ainvoke_text(self, prompt: LanguageModelInput, /) -> str:
        """Async :meth:`invoke_text`."""
        async with self._ameasured(False) as call:
            reply = await ainvoke_model(self.model, prompt, timeout=self.timeout)
            return _text(self.model, self._metered(call, reply))

    @contextmanager
    def _measured(self, retry: bool) -> Iterator[Call]:
        """The call's span and counters; refused first when the budget is spent."""
        reserved = self._reserve()
        call: Call | None = None
        try:
            with self._recorded(retry) as call:
                yield call
        finally:
            self._spend(reserved, call)

    @asynccontextmanager
    async def _ameasured(self, retry: bool) -> AsyncIterator[Call]:
        """Async :meth:`_measured`: a budget's database is reached from a worker thread."""
        reserved = await self._off_loop(self._reserve)
        call: Call | None = None
        try:
            with self._recorded(retry) as call:
                yield call
        finally:
            await self._off_loop(self._spend, reserved, call)

    def _reserve(self) -> tuple[str, int] | None:
        """The one place a budget is checked, counting the call before it is made.

        Returns the namespace and period it was counted in (None without a budget).

        Raises:
            BudgetExceededError: the period's allowance is spent.
        """
        if self.budget is None:
            return None
        namespace = current_namespace()
        return namespace, self.budget.reserve(namespace, spending=self.spending)

    def _spend(self, reserved: tuple[str, int] | None, call: Call | None) -> None:
        """Add an ended call's tokens to its period, then record it (a failure is only logged)."""
        if call is None:
            return
        if reserved is not None and self.budget is not None:
            namespace, start = reserved
            self.budget.spend(namespace, call.usage, start=start, spending=self.spending)
        if self.spending is not None:
            try:
                self.spending.record_call(self.memory, current_namespace(), call.usage)
            except Exception:
                logger.warning("Could not record a model call of %s", self.memory, exc_info=True)

    async def _off_loop(self, work: Callable[..., T], /, *args: Any) -> T:
        """``work(*args)``: on a worker thread when it may wait for the budget's database."""
        if self.spending is None:
            return work(*args)
        return await to_thread(work, *args)

    @contextmanager
    def _recorded(self, retry: bool) -> Iterator[Call]:
        """The call's span and its counters in the ledger."""
        attributes = self._span
        name = f"{attributes['gen_ai.operation.name']} {attributes['gen_ai.request.model']}"
        with measured("model", name, attributes, ledger=self.ledger) as call:
            if retry:
                call.set(retries=1)
            yield call

    def _metered(self, call: Call, reply: Any) -> Any:
        """Take the reply's token counts into the call's record."""
        tokens = getattr(reply, "usage_metadata", None) or {}
        if tokens:
            call.set(
                input_tokens=int(tokens.get("input_tokens", 0)),
                output_tokens=int(tokens.get("output_tokens", 0)),
            )
            call.attribute("gen_ai.usage.input_tokens", call.usage.input_tokens)
            call.attribute("gen_ai.usage.output_tokens", call.usage.output_tokens)
        else:
            call.set(unmetered=1)
        return reply

    def __repr__(self) -> str:
        return f"ModelCaller({_name(self.model)}, timeout={self.timeout})"


def resolve_llm(spec: Any, **options: Any) -> BaseLanguageModel:
    """Turn a model object or a model string into a langchain-core model.

    Args:
        spec: a model object, ``"provider:model"`` or ``"llamacpp:<path.gguf>"``.
        options: keyword arguments for the model's constructor (``temperature``...).

    Raises:
        ConfigError: a string of the wrong shape, or a GGUF path that does not exist.
        MissingDependencyError: the provider's package is not installed.
    """
    if check_llm_spec(spec) is None:
        raise ConfigError(
            "llm is None: this needs a model (a LangChain model or 'provider:model')."
        )
    if isinstance(spec, BaseLanguageModel):
        return spec
    if spec.startswith(LLAMACPP_PREFIX):
        return _llamacpp(Path(spec.removeprefix(LLAMACPP_PREFIX)).expanduser(), options)
    return _init_chat_model(spec, options)


def _llamacpp(path: Path, options: dict[str, Any]) -> BaseLanguageModel:
    if not path.is_file():
        raise ConfigError(f"The GGUF model file {str(path)!r} does not exist.")
    try:
        import llama_cpp  # noqa: F401  (ChatLlamaCpp's own import error is less helpful)

        with warnings.catch_warnings():
            # The package announces its sunset on import; the user did not import it.
            warnings.filterwarnings("ignore", ".*langchain-community.*sunset", DeprecationWarning)
            from langchain_community.chat_models import ChatLlamaCpp
    except ImportError as exc:
        raise MissingDependencyError(
            "llamacpp: models",
            f"CMAKE_ARGS='-DGGML_NATIVE=OFF' {install_hint('local')}",
        ) from exc
    settings: dict[str, Any] = {
        "n_ctx": 4096,
        "temperature": 0.0,
        "max_tokens": 512,
        "verbose": False,
    }
    settings.update(options)
    return ChatLlamaCpp(model_path=str(path), **settings)


def _init_chat_model(spec: str, options: dict[str, Any]) -> BaseLanguageModel:
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise MissingDependencyError(f"the model {spec!r}", "pip install langchain") from exc
    try:
        return init_chat_model(spec, **options)
    except ImportError as exc:
        provider = spec.split(":", 1)[0]
        raise MissingDependencyError(
            f"the model {spec!r}", f"pip install langchain-{provider.replace('_', '-')}"
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"Cannot make the model {spec!r}: {exc}") from exc


# -- calling a model with a timeout, errors translated ---------------------------


def invoke_model(
    model: Runnable[Any, Any], prompt: LanguageModelInput, /, *, timeout: float | None = None
) -> Any:
    """Call ``model`` (a model, or a runnable such as one with tools bound) and return its reply.

    Args:
        model: a chat model, an LLM, or a runnable wrapping one.
        prompt: what ``model.invoke`` takes (a string, messages, a prompt value).
        timeout: seconds to wait; the call runs on a daemon thread and one that
            outlives it is abandoned, not interrupted.

    Raises:
        LLMError: the model raised or took longer than ``timeout`` (its exception is the cause).
    """
    try:
        if timeout is None:
            return model.invoke(prompt)
        name = f"{threading.current_thread().name}:llm-call"
        return bounded_call(lambda: model.invoke(prompt), timeout, name=name)
    except TimeoutError as exc:
        raise _no_answer(model, timeout) from exc
    except Exception as exc:
        raise _llm_error(model, exc) from exc


async def ainvoke_model(
    model: Runnable[Any, Any], prompt: LanguageModelInput, /, *, timeout: float | None = None
) -> Any:
    """Async :func:`invoke_model`: the same checks, with ``model.ainvoke``."""
    try:
        return await asyncio.wait_for(model.ainvoke(prompt), timeout)
    except TimeoutError as exc:
        raise _no_answer(model, timeout) from exc
    except Exception as exc:
        raise _llm_error(model, exc) from exc


def invoke_text(
    model: BaseLanguageModel, prompt: LanguageModelInput, /, *, timeout: float | None = None
) -> str:
    """Call ``model`` and return its text, stripped (see :func:`invoke_model`).

    Raises:
        LLMError: the model raised, took longer than ``timeout``, or returned
            empty text. The model's own exception is the cause.
    """
    return _text(model, invoke_model(model, prompt, timeout=timeout))


async def ainvoke_text(
    model: BaseLanguageModel, prompt: LanguageModelInput, /, *, timeout: float | None = None
) -> str:
    """Async :func:`invoke_text`: the same checks, with ``model.ainvoke``."""
    return _text(model, await ainvoke_model(model, prompt, timeout=timeout))


def _no_answer(model: Runnable[Any, Any], timeout: float | None) -> LLMError:
    return LLMError(f"{_name(model)} gave no answer within {timeout} s; giving up on this call.")


def _llm_error(model: Runnable[Any, Any], exc: BaseException) -> LLMError:
    return LLMError(f"{_name(model)} failed: {type(exc).__name__}: {exc}")


def _text(model: BaseLanguageModel, result: Any) -> str:
    text = str(result.text) if isinstance(result, BaseMessage) else str(result)
    text = text.strip()
    if not text:
        raise LLMError(f"{_name(model)} returned empty text: {result!r:.200}")
    return text


def _span_attributes(model: BaseLanguageModel) -> dict[str, str]:
    """A model call's span attributes (OpenTelemetry GenAI conventions), from what LangChain
    reports of the model (its LangSmith parameters), else from its fields and class."""
    try:
        reported = model._get_ls_params()
    except Exception:  # a third-party model's own override may fail; the names are optional
        reported = {}
    names = (getattr(model, attribute, None) for attribute in ("model_name", "model", "model_id"))
    name = reported.get("ls_model_name") or next(
        (n for n in names if isinstance(n, str) and n), None
    )
    attributes = {
        "gen_ai.operation.name": "chat" if isinstance(model, BaseChatModel) else "text_completion",
        "gen_ai.request.model": str(name or type(model).__name__),
    }
    if reported.get("ls_provider"):
        attributes["gen_ai.provider.name"] = str(reported["ls_provider"])
    return attributes


def _name(model: Runnable[Any, Any]) -> str:
    # A model with tools bound is a RunnableBinding; name the model inside.
    return type(getattr(model, "bound", model)).__name__
