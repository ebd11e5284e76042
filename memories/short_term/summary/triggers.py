"""When a running summary folds, and how much stays verbatim: ``trigger=`` and ``keep=``.

A size is a pair ``(kind, value)`` as in LangChain's ``SummarizationMiddleware``:
``tokens`` and ``messages`` of the unfolded turns, ``fraction`` of the model's
context window, and (trigger only) ``topic``: the newest exchange's embedding
falls below cosine ``t`` to the mean of up to three before it. The forms are
listed in docs/memories/summaries.md. This module is pure: it decides from the
summary state and, for ``topic``, a similarity the memory computes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.embeddings import Embeddings
from pydantic import BeforeValidator

from memories.errors import ConfigError
from memories.kernel.embeddings import cosine, embedding_batch
from memories.short_term.summary.state import SummaryState
from memories.stores.history.base import Entry

__all__ = [
    "KeepField",
    "Size",
    "TriggerField",
    "context_window",
    "fired",
    "kept_count",
    "parse_keep",
    "parse_triggers",
    "topic_similarity",
]

_TRIGGER_KINDS = ("tokens", "messages", "fraction", "topic")
_KEEP_KINDS = ("tokens", "messages", "fraction")


@dataclass(frozen=True)
class Size:
    """One ``(kind, value)`` pair of ``trigger=`` or ``keep=``."""

    kind: str
    """``tokens``, ``messages``, ``fraction`` or ``topic``."""
    value: float
    """The count, fraction or similarity threshold."""

    def describe(self) -> str:
        """``"tokens 500"``: how ``status()`` names the trigger that fired."""
        return f"{self.kind} {self.value:g}"

    def to_config(self) -> list[Any]:
        """The pair as a config writes it: ``["tokens", 500]``."""
        return [self.kind, int(self.value) if self.kind in ("tokens", "messages") else self.value]


def _size(value: Any, kinds: Sequence[str], what: str) -> Size:
    if isinstance(value, Size):
        return value
    if not isinstance(value, tuple | list) or len(value) != 2 or not isinstance(value[0], str):
        raise ConfigError(
            f"{what} takes pairs such as ('tokens', 4000), ('messages', 50) or "
            f"('fraction', 0.8); got {value!r:.80}."
        )
    kind, number = value
    if kind not in kinds:
        raise ConfigError(f"{what} kind {kind!r} is not one of {', '.join(kinds)}.")
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise ConfigError(f"{what} ({kind!r}, ...) needs a number, got {number!r:.40}.")
    if kind in ("tokens", "messages") and (not float(number).is_integer() or number < 1):
        raise ConfigError(f"{what} ({kind!r}, {number!r}) needs a whole number of at least 1.")
    if kind in ("fraction", "topic") and not 0 < number <= 1:
        raise ConfigError(f"{what} ({kind!r}, {number!r}) needs a number in (0, 1].")
    return Size(kind, float(number))


def parse_triggers(value: Any) -> tuple[Size, ...] | None:
    """``trigger=`` as pairs: None, one pair, or a list of pairs (ConfigError naming a bad one)."""
    if value is None:
        return None
    pairs = (
        value
        if isinstance(value, list)
        or (isinstance(value, tuple) and value and not isinstance(value[0], str))
        else [value]
    )
    if not pairs:
        raise ConfigError("trigger is an empty list; give at least one pair, or None.")
    return tuple(_size(pair, _TRIGGER_KINDS, "trigger") for pair in pairs)


def parse_keep(value: Any) -> Size | None:
    """``keep=`` as a pair, or None (ConfigError naming a bad one)."""
    return None if value is None else _size(value, _KEEP_KINDS, "keep")


#: A field holding ``trigger=``: None, one pair, or a list of pairs.
TriggerField = Annotated[tuple[Size, ...] | None, BeforeValidator(parse_triggers)]
#: A field holding ``keep=``: None or one pair.
KeepField = Annotated[Size | None, BeforeValidator(parse_keep)]


def context_window(model: Any) -> int | None:
    """The model's context window in tokens (``profile["max_input_tokens"]``), if it says."""
    profile = getattr(model, "profile", None)
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return int(window) if isinstance(window, int | float) and window > 0 else None


def fired(
    triggers: Sequence[Size], state: SummaryState, *, window: int | None, drift: float | None
) -> Size | None:
    """The first trigger that fires for ``state`` (``drift``: the topic similarity, if computed)."""
    for trigger in triggers:
        if trigger.kind == "tokens" and state.total > trigger.value:
            return trigger
        if trigger.kind == "messages" and len(state.seqs) > trigger.value:
            return trigger
        if trigger.kind == "fraction" and window and state.total > trigger.value * window:
            return trigger
        if trigger.kind == "topic" and drift is not None and drift < trigger.value:
            return trigger
    return None


def kept_count(state: SummaryState, keep: Size, *, window: int | None) -> int:
    """How many leading unfolded messages to fold so that ``keep`` stays (whole exchanges)."""
    if keep.kind == "messages":
        # At least the last N messages stay, back to the start of their exchange (as
        # LangChain's middleware moves its cut so as not to split a tool call).
        target = len(state.seqs) - int(keep.value)
        return max(cut for cut in [0, *state.boundaries()] if cut <= target)
    budget = keep.value if keep.kind == "tokens" else keep.value * (window or 0)
    return state.plan(high=int(budget), low=int(budget), chunk=max(state.total, 1))


def topic_similarity(
    state: SummaryState, unfolded: Sequence[Entry], embedder: Embeddings
) -> float | None:
    """Cosine similarity of the newest unfolded exchange to the mean of up to three before it.

    None when fewer than two exchanges are unfolded (nothing to drift from).
    """
    cuts = [0, *state.boundaries()]
    if len(cuts) < 3:
        return None
    by_seq = {e.seq: e.message for e in unfolded}
    exchanges = [
        "\n".join(str(by_seq[seq].text) for seq in state.seqs[a:b] if seq in by_seq)
        for a, b in itertools.pairwise(cuts)
    ][-4:]
    with embedding_batch(embedder, len(exchanges)):
        vectors = embedder.embed_documents(exchanges)
    newest, before = vectors[-1], vectors[:-1]
    mean = [sum(v[i] for v in before) / len(before) for i in range(len(newest))]
    return cosine(newest, mean)
