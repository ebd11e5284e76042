"""Language models by name: ``"provider:model"`` strings, local GGUF files, or model objects.

- a langchain-core ``BaseLanguageModel`` (chat model or LLM) is used as it is;
- ``"llamacpp:/path/to/model.gguf"`` runs a local GGUF model through
  llama-cpp-python (``pip install 'memories[local]'``);
- any other ``"provider:model"`` goes to langchain's ``init_chat_model``
  (``"openai:gpt-4o-mini"``, ``"ollama:llama3.2"``), which names the provider
  package to install when it is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseLanguageModel

from memories.errors import ConfigError, MissingDependencyError

__all__ = ["LLMSpec", "resolve_llm"]

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
