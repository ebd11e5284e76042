"""Recall settings, with defaults checked across datasets (``benchmarks/recall_datasets.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from memories.errors import ConfigError
from memories.stores.recall.lexical import BM25Index
from memories.stores.recall.text import Analyzer, StopwordSet

__all__ = ["RecallConfig", "RecallField", "RecallMode"]

RecallMode = Literal["dense", "bm25", "hybrid"]
_MODES = ("dense", "bm25", "hybrid")
_FUSIONS = ("min_max", "rrf")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@dataclass(frozen=True)
class RecallConfig:
    """How stored turns are ranked for a query; each field's default is said beside it.

    ``benchmarks/recall_datasets.py`` chooses the defaults leave-one-dataset-out over LoCoMo,
    LongMemEval sessions and small memories filled by ``save_context``.
    """

    mode: RecallMode = "hybrid"
    """Which rankers to use: ``"dense"`` (embeddings), ``"bm25"`` (lexical) or ``"hybrid"``."""
    candidates: int = 100
    """How many candidates to take from each ranker before fusion."""
    fusion: Literal["min_max", "rrf"] = "min_max"
    """How hybrid mode fuses: weighted min-max normalised scores, or reciprocal rank."""
    dense_weight: float = 0.4
    """Weight of the dense ranking in hybrid fusion; the lexical one gets ``1 - dense_weight``."""
    rrf_k: float = 60.0
    """Damping constant when ``fusion="rrf"``."""
    neighbour_weight: float = 0.5
    """Share of a neighbouring turn's score that a turn borrows; 0 disables smoothing."""
    neighbour_window: int = 2
    """How many turns either side of a turn count as its neighbours."""
    bm25_k1: float = 1.2
    """BM25 term-frequency saturation."""
    bm25_b: float = 0.0
    """BM25 length normalisation; conversational turns rank best without it."""
    stopwords: StopwordSet = "nltk"
    """Stopword list of the lexical analyzer."""
    stem: bool = True
    """Whether the lexical analyzer stems words (needs PyStemmer)."""
    lexical_dates: bool = True
    """Whether the lexical text of a turn starts with its date, so "in May 2023" can match."""
    speaker_weight: float = 1.0
    """When a query names exactly one speaker, that speaker's turns score ``1 + speaker_weight``
    times higher (speakers come from a turn's ``speakers`` metadata); 0 turns it off."""

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ConfigError(
                f"Unknown recall mode {self.mode!r}; use one of: {', '.join(_MODES)}."
            )
        if self.fusion not in _FUSIONS:
            raise ConfigError(f"Unknown fusion {self.fusion!r}; use one of: {', '.join(_FUSIONS)}.")
        if self.candidates < 1:
            raise ConfigError(f"candidates must be >= 1, got {self.candidates!r}.")
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ConfigError(f"dense_weight must be between 0 and 1, got {self.dense_weight!r}.")
        if self.neighbour_weight < 0 or self.neighbour_window < 0:
            raise ConfigError(
                "neighbour_weight and neighbour_window must be >= 0, got "
                f"{self.neighbour_weight!r} and {self.neighbour_window!r}."
            )
        if not 0.0 <= self.speaker_weight <= 100.0:
            raise ConfigError(
                f"speaker_weight must be between 0 and 100, got {self.speaker_weight!r}."
            )
        if self.rrf_k < 0 or self.bm25_k1 < 0 or not 0.0 <= self.bm25_b <= 1.0:
            raise ConfigError(
                f"Need rrf_k >= 0, bm25_k1 >= 0 and 0 <= bm25_b <= 1; got {self.rrf_k!r}, "
                f"{self.bm25_k1!r}, {self.bm25_b!r}."
            )

    @property
    def uses_dense(self) -> bool:
        """Whether recall needs the dense (embedding) candidates."""
        return self.mode != "bm25"

    @property
    def uses_lexical(self) -> bool:
        """Whether recall needs the lexical (BM25) candidates."""
        return self.mode != "dense"

    def analyzer(self) -> Analyzer:
        """The lexical analyzer: this config's stopwords and stemming."""
        return Analyzer(stopwords=self.stopwords, stem=self.stem)

    def lexical_index(self) -> BM25Index:
        """A new, empty :class:`BM25Index` with this config's BM25 and analyzer settings."""
        return BM25Index(k1=self.bm25_k1, b=self.bm25_b, analyzer=self.analyzer())

    def lexical_text(self, text: str, /, *, when: date | None = None) -> str:
        """The text to put in the lexical index for a turn said on ``when``."""
        if not self.lexical_dates or when is None:
            return text
        # Month names are spelt out by hand: strftime("%B") follows the C locale.
        return f"On {when.day} {_MONTHS[when.month - 1]} {when.year}, {text}"

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain values; ``RecallConfig.from_dict`` reverses it."""
        return asdict(self)

    def overrides(self) -> dict[str, Any]:
        """The settings that differ from the defaults (a config's short form)."""
        defaults = RecallConfig()
        return {name: v for name, v in self.to_dict().items() if v != getattr(defaults, name)}

    @classmethod
    def coerce(cls, value: Any, /) -> RecallConfig:
        """``value`` if it is a config, else a config built from a dict of its fields.

        Raises:
            ConfigError: anything else, or an unknown field.
        """
        if isinstance(value, RecallConfig):
            return value
        if isinstance(value, Mapping):
            return cls.from_dict(dict(value))
        raise ConfigError(f"recall must be a RecallConfig or a dict of its fields, got {value!r}")

    @classmethod
    def from_dict(cls, values: dict[str, Any], /) -> RecallConfig:
        """Build a config from :meth:`to_dict` output; unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"Unknown RecallConfig option(s) {unknown}; valid options: {sorted(known)}."
            )
        return cls(**values)


#: A model field holding a recall config: a :class:`RecallConfig` or a dict of its fields.
RecallField = Annotated[RecallConfig, BeforeValidator(RecallConfig.coerce)]
