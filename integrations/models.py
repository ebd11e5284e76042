"""Language models by name: ``"provider:model"`` strings, local GGUF files, or model objects.

- a langchain-core ``BaseLanguageModel`` (chat model or LLM) is used as it is;
- ``"llamacpp:/path/to/model.gguf"`` runs a local GGUF model through
  llama-cpp-python (``pip install 'memories[local]'``);
- any other ``"provider:model"`` goes to langchain's ``init_chat_model``
  (``"openai:gpt-4o-mini"``, ``"ollama:llama3.2"``), which names the provider
  package to install when it is missing.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import warnings
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseLanguageModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from memories.errors import ConfigError, LLMError, MissingDependencyError

__all__ = [
    "LLMSpec",
    "ainvoke_model",
    "ainvoke_text",
    "invoke_model",
    "invoke_text",
    "resolve_llm",
]

LLMSpec = BaseLanguageModel | str

LLAMACPP_PREFIX = "llamacpp:"


def resolve_llm(spec: Any, **options: Any) -> BaseLanguageModel:
    """Turn a model object or a model string into a langchain-core model.

    Args:
        spec: a model object, ``"provider:model"`` or ``"llamacpp:<path.gguf>"``.
        options: keyword arguments for the model's constructor (``temperature``...).

    Raises:
        ConfigError: a string of the wrong shape, or a GGUF path that does not exist.
        MissingDependencyError: the provider's package is not installed.
    """
    if isinstance(spec, BaseLanguageModel):
        return spec
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(
            f"llm must be a LangChain model or a string 'provider:model' "
            f"(e.g. 'openai:gpt-4o-mini', 'llamacpp:/models/m.gguf'); got {spec!r:.80}"
        )
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
            "CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install 'memories[local]' langchain-community",
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
        timeout: seconds to wait for the answer. The call runs on a daemon
            thread so the wait can end; a call that outlives it is abandoned
            (its result discarded), not interrupted.

    Raises:
        LLMError: the model raised or took longer than ``timeout``. The
            model's own exception is the cause.
    """
    if timeout is None:
        return _guarded(model, lambda: model.invoke(prompt))
    outcome: list[Any] = []
    context = contextvars.copy_context()

    def call() -> None:
        try:
            outcome.append(("ok", context.run(model.invoke, prompt)))
        except BaseException as exc:  # re-raised in the caller's thread below
            outcome.append(("error", exc))

    name = f"{threading.current_thread().name}:llm-call"
    thread = threading.Thread(target=call, name=name, daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise LLMError(f"{_name(model)} gave no answer within {timeout} s; giving up on this call.")
    kind, value = outcome[0]
    if kind == "error":
        raise _llm_error(model, value) from value
    return value


async def ainvoke_model(
    model: Runnable[Any, Any], prompt: LanguageModelInput, /, *, timeout: float | None = None
) -> Any:
    """Async :func:`invoke_model`: the same checks, with ``model.ainvoke``."""
    try:
        return await asyncio.wait_for(model.ainvoke(prompt), timeout)
    except TimeoutError as exc:
        raise LLMError(
            f"{_name(model)} gave no answer within {timeout} s; giving up on this call."
        ) from exc
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


def _guarded(model: Runnable[Any, Any], call: Any) -> Any:
    try:
        return call()
    except Exception as exc:
        raise _llm_error(model, exc) from exc


def _llm_error(model: Runnable[Any, Any], exc: BaseException) -> LLMError:
    return LLMError(f"{_name(model)} failed: {type(exc).__name__}: {exc}")


def _text(model: BaseLanguageModel, result: Any) -> str:
    text = str(result.text) if isinstance(result, BaseMessage) else str(result)
    text = text.strip()
    if not text:
        raise LLMError(f"{_name(model)} returned empty text: {result!r:.200}")
    return text


def _name(model: Runnable[Any, Any]) -> str:
    # A model with tools bound is a RunnableBinding; name the model inside.
    return type(getattr(model, "bound", model)).__name__
