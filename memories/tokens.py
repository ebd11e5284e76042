"""Token counting: one number per message, computed once when it is saved.

A counter is anything that turns a list of messages into a token count —
the shape of LangChain's ``trim_messages(token_counter=...)``:

- ``None`` or ``"tiktoken"`` / ``"tiktoken:<encoding>"``: tiktoken (cl100k_base by
  default), loaded offline when needed;
- ``"chars"``: about four characters a token, for tests and rough budgets;
- a callable ``(list[BaseMessage]) -> int``;
- a LangChain model: its ``get_num_tokens_from_messages``.

Memories count each message once, alone, when they first see it, and keep the
number; they never re-count the buffer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from memories.errors import ConfigError
from memories.messages import message_text

__all__ = [
    "CharCounter",
    "TiktokenCounter",
    "TokenCounter",
    "TokenCounterSpec",
    "resolve_token_counter",
]

# OpenAI's chat format spends about this many tokens framing each message.
_TOKENS_PER_MESSAGE = 3


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of messages; ``name`` is what a config stores (or None)."""

    @property
    def name(self) -> str | None: ...

    def __call__(self, messages: Sequence[BaseMessage], /) -> int: ...


@dataclass(frozen=True)
class TiktokenCounter:
    """Tokens of each message's role, name, text and tool calls, plus framing."""

    encoding_name: str = "cl100k_base"

    @property
    def name(self) -> str:
        return f"tiktoken:{self.encoding_name}"

    def __call__(self, messages: Sequence[BaseMessage], /) -> int:
        encode = _encoding(self.encoding_name).encode_ordinary
        total = 0
        for message in messages:
            total += _TOKENS_PER_MESSAGE + _role_tokens(self.encoding_name, message.type)
            total += len(encode(message_text(message)))
            if message.name:
                total += len(encode(message.name))
        return total


def _encoding(name: str) -> Any:
    # Imported here: integrations imports memories, so a top-level import would be circular.
    from integrations.tiktoken_counter import load_encoding

    return load_encoding(name)


@functools.cache
def _role_tokens(encoding_name: str, role: str) -> int:
    return len(_encoding(encoding_name).encode_ordinary(role))


@dataclass(frozen=True)
class CharCounter:
    """About one token per ``chars_per_token`` characters; no tokenizer needed."""

    chars_per_token: int = 4

    @property
    def name(self) -> str:
        return "chars"

    def __call__(self, messages: Sequence[BaseMessage], /) -> int:
        return sum(
            _TOKENS_PER_MESSAGE + -(-len(message_text(m)) // self.chars_per_token) for m in messages
        )


@dataclass(frozen=True)
class _CallableCounter:
    func: Callable[[list[BaseMessage]], int]
    name: str | None = None

    def __call__(self, messages: Sequence[BaseMessage], /) -> int:
        count = self.func(list(messages))
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ConfigError(
                f"The token counter {self.func!r} returned {count!r}; it must return an int >= 0."
            )
        return count


TokenCounterSpec = str | Callable[[list[BaseMessage]], int] | Any | None


def resolve_token_counter(spec: TokenCounterSpec) -> TokenCounter:
    """Turn any accepted counter spec into a :class:`TokenCounter`.

    Raises:
        ConfigError: an unknown name or an object that cannot count tokens.
    """
    if spec is None:
        return TiktokenCounter()
    if isinstance(spec, TokenCounter):
        return spec
    if isinstance(spec, str):
        kind, _, option = spec.partition(":")
        if kind == "tiktoken":
            return TiktokenCounter(option or "cl100k_base")
        if kind == "chars" and not option:
            return CharCounter()
        raise ConfigError(
            f"Unknown token counter {spec!r}. Use 'tiktoken', 'tiktoken:<encoding>', 'chars', "
            "a callable (list[BaseMessage]) -> int, or a LangChain model."
        )
    method = getattr(spec, "get_num_tokens_from_messages", None)
    if callable(method):
        return _CallableCounter(method)
    if callable(spec):
        return _CallableCounter(spec)
    raise ConfigError(
        f"Cannot count tokens with {spec!r}: pass 'tiktoken', 'chars', a callable "
        "(list[BaseMessage]) -> int, or a LangChain model."
    )
