"""What a memory's work costs: model calls, embedding batches, store operations; counted, traced.

Each memory holds a :class:`Ledger` counting its work per kind and namespace,
bounded at ``max_namespaces`` (the least recently used fold into
:data:`OTHER_NAMESPACES`). With ``opentelemetry-api`` installed each operation
is a span with a child per call, carrying no memory text and no namespace; a
:class:`Budget` caps a namespace's model calls or tokens per period. The
figures and span names are in docs/deployment.md ("Accounting, tracing and budgets").
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from memories.errors import BudgetExceededError, ConfigError, InvalidInputError
from memories.kernel.checks import whole_number
from memories.kernel.lru import LRU
from memories.kernel.times import utc

__all__ = [
    "KINDS",
    "OTHER_NAMESPACES",
    "Accounts",
    "Budget",
    "BudgetField",
    "Call",
    "InProcessSpending",
    "Ledger",
    "ModelUsage",
    "Spending",
    "carried",
    "current_namespace",
    "measured",
    "operation",
    "tracer",
]

Kind = Literal["model", "embedding", "store"]
#: What a ledger counts: model calls, embedding batches, store transactions.
KINDS: tuple[Kind, ...] = ("model", "embedding", "store")
#: Where a ledger folds the namespaces it no longer has room for.
OTHER_NAMESPACES = "(other namespaces)"
#: The namespace of work done outside any memory operation.
NO_NAMESPACE = "default"


@dataclass(frozen=True)
class ModelUsage:
    """What calls of one kind (model, embedding, store) have cost in this process."""

    calls: int = 0
    """Calls made, failed ones included."""
    failures: int = 0
    """Calls that raised, timed out or answered nothing usable."""
    input_tokens: int = 0
    """Prompt tokens, as the model reported them (its reply's ``usage_metadata``)."""
    output_tokens: int = 0
    """Reply tokens, as the model reported them."""
    unmetered: int = 0
    """Answered model calls whose reply reported no token usage (an LLM's string, a fake model)."""
    seconds: float = 0.0
    """Wall time spent waiting, failed calls included."""
    retries: int = 0
    """Calls that asked again after a reply was rejected (counted in ``calls`` too)."""

    def plus(self, other: ModelUsage) -> ModelUsage:
        """The sum of two usages."""
        return ModelUsage(*(getattr(self, n) + getattr(other, n) for n in _USAGE_FIELDS))

    def as_dict(self) -> dict[str, int | float]:
        """The counters as a plain dict (for JSON, a log line, the CLI)."""
        return {name: getattr(self, name) for name in _USAGE_FIELDS}


_USAGE_FIELDS = tuple(ModelUsage.__dataclass_fields__)


@dataclass(frozen=True)
class Accounts:
    """A snapshot of a :class:`Ledger`: totals per kind, and per namespace and kind."""

    totals: Mapping[str, ModelUsage] = field(default_factory=dict)
    """Per kind (``"model"``, ``"embedding"``, ``"store"``), every namespace together."""
    namespaces: Mapping[str, Mapping[str, ModelUsage]] = field(default_factory=dict)
    """Per namespace, then per kind; kinds with no call are left out."""

    def total(self, kind: Kind, /) -> ModelUsage:
        """The usage of one kind, every namespace together."""
        return self.totals.get(kind, ModelUsage())

    @classmethod
    def merged(cls, parts: Iterable[Accounts], /) -> Accounts:
        """Several memories' accounts added up (a combined memory's)."""
        totals: dict[str, ModelUsage] = {}
        namespaces: dict[str, dict[str, ModelUsage]] = {}
        for part in parts:
            for kind, usage in part.totals.items():
                totals[kind] = totals.get(kind, ModelUsage()).plus(usage)
            for name, kinds in part.namespaces.items():
                into = namespaces.setdefault(name, {})
                for kind, usage in kinds.items():
                    into[kind] = into.get(kind, ModelUsage()).plus(usage)
        return cls(totals, namespaces)

    def as_dict(self) -> dict[str, Any]:
        """Plain dicts and numbers, for JSON."""
        return {
            "totals": {kind: usage.as_dict() for kind, usage in self.totals.items()},
            "namespaces": {
                name: {kind: usage.as_dict() for kind, usage in kinds.items()}
                for name, kinds in self.namespaces.items()
            },
        }


class Ledger:
    """Counters of one memory's calls, per kind and per namespace, bounded, thread-safe.

    Args:
        max_namespaces: namespaces kept apart; the least recently used one
            beyond this is folded into :data:`OTHER_NAMESPACES`.
    """

    def __init__(self, *, max_namespaces: int = 1000) -> None:
        self.max_namespaces = whole_number(max_namespaces, "max_namespaces", least=1)
        # Mutable counters in ModelUsage's field order: a call adds in place.
        self._totals: dict[str, list[Any]] = {}
        self._namespaces: OrderedDict[str, dict[str, list[Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, kind: Kind, namespace: str, usage: ModelUsage, /) -> None:
        """Add one call's ``usage`` (``calls=1`` and its cost) under ``kind`` and ``namespace``."""
        with self._lock:
            _add(self._totals, kind, usage)
            kinds = self._namespaces.get(namespace)
            if kinds is None:
                kinds = self._namespaces[namespace] = {}
                self._fold_oldest()
            else:
                self._namespaces.move_to_end(namespace)
            _add(kinds, kind, usage)

    def total(self, kind: Kind, /) -> ModelUsage:
        """The usage of one kind, every namespace together."""
        with self._lock:
            counters = self._totals.get(kind)
            return ModelUsage() if counters is None else ModelUsage(*counters)

    def snapshot(self) -> Accounts:
        """Every counter now, as an immutable :class:`Accounts`."""
        with self._lock:
            return Accounts(
                _frozen(self._totals),
                {name: _frozen(kinds) for name, kinds in self._namespaces.items()},
            )

    def _fold_oldest(self) -> None:
        while len(self._namespaces) > self.max_namespaces:
            name = next(n for n in self._namespaces if n != OTHER_NAMESPACES)
            folded = self._namespaces.pop(name)
            other = self._namespaces.setdefault(OTHER_NAMESPACES, {})
            for kind, counters in folded.items():
                _add(other, kind, ModelUsage(*counters))

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Ledger({len(self._namespaces)} namespaces)"


def _add(counters: dict[str, list[Any]], kind: str, usage: ModelUsage) -> None:
    row = counters.get(kind)
    if row is None:
        counters[kind] = [getattr(usage, name) for name in _USAGE_FIELDS]
    else:
        for i, name in enumerate(_USAGE_FIELDS):
            row[i] += getattr(usage, name)


def _frozen(counters: dict[str, list[Any]]) -> dict[str, ModelUsage]:
    return {kind: ModelUsage(*row) for kind, row in counters.items()}


# -- the operation in progress: whose ledger, which namespace, which span ----------


@dataclass(frozen=True)
class _Operation:
    ledger: Ledger
    namespace: str
    owner: int
    """``id`` of the memory, so that a memory's method calling another of its own is one span."""


_current: ContextVar[_Operation | None] = ContextVar("memories_operation", default=None)


def current_namespace() -> str:
    """The namespace of the memory operation in progress (``"default"`` outside one)."""
    current = _current.get()
    return NO_NAMESPACE if current is None else current.namespace


class operation:
    """A memory's operation: the calls inside are recorded in ``ledger`` and traced under it.

    A method called from another of the same memory joins the outer operation
    (no second span) unless ``joins`` is False (a carried background update). A
    class, not a generator: it wraps every save and load, and starts a span only
    when a tracer provider is set (:func:`tracer`).
    """

    __slots__ = ("_memory_type", "_name", "_operation", "_span", "_token")

    def __init__(
        self,
        ledger: Ledger,
        name: str,
        /,
        *,
        owner: object,
        namespace: str,
        memory_type: str,
        joins: bool = True,
    ) -> None:
        current = _current.get()
        joined = joins and current is not None and current.owner == id(owner)
        self._operation = None if joined else _Operation(ledger, namespace, id(owner))
        self._name, self._memory_type = name, memory_type
        self._token: Token[_Operation | None] | None = None
        self._span: Any = None

    def __enter__(self) -> None:
        if self._operation is None:
            return
        self._token = _current.set(self._operation)
        otel = tracer()
        if otel is not None:
            attributes = {
                "memories.operation": self._name,
                "memories.memory_type": self._memory_type,
            }
            self._span = otel.start_as_current_span(f"memories.{self._name}", attributes=attributes)
            self._span.__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        if self._token is None:
            return
        try:
            if self._span is not None:
                self._span.__exit__(*exc_info)
        finally:
            _current.reset(self._token)


def carried(job: Callable[[], object], /) -> Callable[[], object]:
    """``job``, to run later on another thread as part of the operation in progress now.

    Its calls are counted in that operation's ledger and namespace and traced
    under its span (a parent span may end before its children); only these two
    are carried, not the caller's whole context.
    """
    current = _current.get()
    if current is None:
        return job
    parent = None
    if tracer() is not None:
        from opentelemetry import context

        parent = context.get_current()

    def carried_job() -> object:
        token = _current.set(current)
        attached = None
        if parent is not None:
            from opentelemetry import context

            attached = context.attach(parent)
        try:
            return job()
        finally:
            if attached is not None:
                context.detach(attached)
            _current.reset(token)

    return carried_job


class Call:
    """One call in progress: what it reports (tokens, a retry) before it ends, and its span."""

    __slots__ = ("counters", "span")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.counters: dict[str, Any] = {"calls": 1}
        """This call's :class:`ModelUsage` counters set so far, by name."""

    def set(self, **counters: float) -> None:
        """Set counters of this call's record (``input_tokens=``, ``retries=``...)."""
        if unknown := counters.keys() - _USAGE_FIELDS:
            raise TypeError(f"A call has no counter {sorted(unknown)}; it has {_USAGE_FIELDS}.")
        self.counters.update(counters)

    @property
    def usage(self) -> ModelUsage:
        """This call's record so far."""
        return ModelUsage(**self.counters)

    def attribute(self, name: str, value: Any) -> None:
        """Set an attribute of this call's span (nothing without tracing)."""
        if self.span is not None:
            self.span.set_attribute(name, value)


@contextmanager
def measured(
    kind: Kind,
    name: str,
    /,
    attributes: Mapping[str, Any] | None = None,
    *,
    ledger: Ledger | None = None,
) -> Iterator[Call]:
    """One call: timed, recorded (in ``ledger``, else the operation's) and traced as a child span.

    The block may report tokens with ``call.set(input_tokens=...)``; an
    exception but ``InvalidInputError`` marks the call failed (the span gets ``error.type``).
    """
    current = _current.get()
    target = ledger if ledger is not None else None if current is None else current.ledger
    otel = tracer()
    span = None if otel is None else otel.start_span(name, attributes=dict(attributes or {}))
    call = Call(span)
    started = time.perf_counter()
    try:
        yield call
    except BaseException as exc:
        if not isinstance(exc, InvalidInputError):  # input refused in it: the call did not fail
            call.counters["failures"] = 1
            call.attribute("error.type", type(exc).__qualname__)
        raise
    finally:
        call.counters["seconds"] = time.perf_counter() - started
        if target is not None:
            target.record(kind, current_namespace(), call.usage)
        if span is not None:
            span.end()


_tracer: Any = None
_trace_api: Any = None
_tracer_checked = False
_provider_by_env = False


def tracer() -> Any:
    """This library's OpenTelemetry tracer; None with no tracer provider set or no API installed.

    Until a provider is set, spans record nothing, so none are started; the
    provider is looked up on each call until one is set (it cannot be unset).
    """
    global _tracer, _trace_api, _tracer_checked, _provider_by_env
    if _tracer is not None:
        return _tracer
    if not _tracer_checked:
        _tracer_checked = True
        _provider_by_env = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
        try:
            from opentelemetry import trace as _trace_api
        except ImportError:
            _trace_api = None
    if _trace_api is None:
        return None
    # The API's getter looks its environment variable up on every call (a KeyError
    # raised and caught), and this runs on every operation: read the global it sets.
    if not _provider_by_env and getattr(_trace_api, "_TRACER_PROVIDER", _trace_api) is None:
        return None
    provider = _trace_api.get_tracer_provider()
    if isinstance(provider, _trace_api.ProxyTracerProvider | _trace_api.NoOpTracerProvider):
        return None
    _tracer = provider.get_tracer("memories")
    return _tracer


Period = Literal["minute", "hour", "day"]
_PERIOD_SECONDS: dict[str, int] = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class Budget:
    """A cap on one namespace's model calls or tokens per period (aligned on the clock, UTC).

    The spending is kept in a :class:`Spending`: a SQL database's
    (:class:`memories.stores.spending.SQLSpending`) holds across processes, else
    this process keeps the 10,000 namespaces used last. A call is counted when
    allowed, before it is made; its tokens when it answers, so the call that
    crosses a token cap is allowed and the next one refused.

    Args:
        tokens: input plus output tokens allowed per period (None: no cap).
        calls: model calls allowed per period (None: no cap).
        per: ``"minute"``, ``"hour"`` or ``"day"``.
        clock: seconds since the epoch (``time.time``); tests pass their own.
    """

    tokens: int | None = None
    calls: int | None = None
    per: Period = "day"
    clock: Callable[[], float] = field(default=time.time, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.per not in _PERIOD_SECONDS:
            raise ConfigError(
                f"budget per must be one of {', '.join(_PERIOD_SECONDS)}; got {self.per!r}"
            )
        if self.tokens is None and self.calls is None:
            raise ConfigError("A budget caps tokens or calls: give 'tokens' or 'calls' (or both).")
        for name, value in (("tokens", self.tokens), ("calls", self.calls)):
            if value is not None:
                whole_number(value, f"budget {name}")

    def to_config(self) -> dict[str, Any]:
        """The config form: ``{"tokens": 50000, "per": "day"}``."""
        form: dict[str, Any] = {"per": self.per}
        form.update({n: getattr(self, n) for n in ("tokens", "calls") if getattr(self, n)})
        return form

    @property
    def call_cap(self) -> int | None:
        """The calls allowed per period (None: no cap; 0 is no cap, as in the config)."""
        return self.calls or None

    @property
    def token_cap(self) -> int | None:
        """The tokens allowed per period (None: no cap)."""
        return self.tokens or None

    def allows(self, calls: int, tokens: int, /) -> bool:
        """Whether one more call fits after ``calls`` and ``tokens`` spent this period."""
        calls_cap, tokens_cap = self.call_cap, self.token_cap
        return (calls_cap is None or calls + 1 <= calls_cap) and (
            tokens_cap is None or tokens < tokens_cap
        )

    def check(self, namespace: str, /, *, spending: Spending | None = None) -> None:
        """Raise when ``namespace`` has spent this period's allowance (nothing is counted).

        Raises:
            BudgetExceededError: saying what was spent and when the next period starts.
        """
        start = self.period_start()
        calls, tokens = (spending or _spending).spent(namespace, start)
        if not self.allows(calls, tokens):
            raise self._exceeded(namespace, start, calls, tokens)

    def reserve(self, namespace: str, /, *, spending: Spending | None = None) -> int:
        """Count one call of ``namespace`` if the period has room (checked and counted atomically).

        Returns:
            The start of the period the call is counted in (give it to :meth:`spend`).

        Raises:
            BudgetExceededError: saying what was spent and when the next period starts.
        """
        start = self.period_start()
        refused = (spending or _spending).reserve(namespace, start, self)
        if refused is not None:
            raise self._exceeded(namespace, start, *refused)
        return start

    def spend(
        self,
        namespace: str,
        usage: ModelUsage,
        /,
        *,
        start: int,
        spending: Spending | None = None,
    ) -> None:
        """Add a reserved call's tokens (``usage``) to ``namespace``'s period from ``start``."""
        tokens = usage.input_tokens + usage.output_tokens
        if tokens:
            (spending or _spending).add_tokens(namespace, start, tokens)

    def period_start(self) -> int:
        """The start of the current period, in whole seconds since the epoch."""
        length = _PERIOD_SECONDS[self.per]
        now = int(self.clock())
        return now - now % length

    def _exceeded(self, namespace: str, start: int, calls: int, tokens: int) -> BudgetExceededError:
        limits = (("tokens", tokens, self.token_cap), ("calls", calls, self.call_cap))
        over = [f"{used} of {cap} {name}" for name, used, cap in limits if cap and used >= cap]
        resumes = utc(start + _PERIOD_SECONDS[self.per])
        return BudgetExceededError(
            f"The budget of namespace {namespace!r} for this {self.per} is spent "
            f"({', '.join(over)}); memory formation waits until "
            f"{resumes.isoformat(timespec='seconds')} (the turns stay queued). "
            "Raise the budget to go on sooner."
        )


class Spending(ABC):
    """Where budgets keep each namespace's calls and tokens, per period.

    Implementing a subclass: three methods on rows keyed by (namespace, period
    start). :meth:`reserve` must check and count in one atomic step.
    """

    @abstractmethod
    def reserve(self, namespace: str, start: int, budget: Budget, /) -> tuple[int, int] | None:
        """Count one call if ``budget`` allows it: None when counted, else (calls, tokens) spent."""

    @abstractmethod
    def add_tokens(self, namespace: str, start: int, tokens: int, /) -> None:
        """Add ``tokens`` to the period from ``start`` (a call reserved there answered)."""

    @abstractmethod
    def spent(self, namespace: str, start: int, /) -> tuple[int, int]:
        """The (calls, tokens) spent in the period from ``start``."""

    def record_call(self, memory: str, namespace: str, usage: ModelUsage, /) -> None:  # noqa: B027
        """Keep one finished model call of ``memory`` (its ``usage_name``) in ``namespace``.

        A store that outlives the process keeps them per day; by default nothing is kept.
        """


class InProcessSpending(Spending):
    """Calls and tokens per namespace in its current period, kept in this process (LRU-bounded)."""

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._items: LRU[str, tuple[int, int, int]] = LRU(size)

    def reserve(self, namespace: str, start: int, budget: Budget, /) -> tuple[int, int] | None:
        with self._lock:
            calls, tokens = self._current(namespace, start)
            if not budget.allows(calls, tokens):
                return calls, tokens
            self._items.put(namespace, (start, calls + 1, tokens))
            return None

    def add_tokens(self, namespace: str, start: int, tokens: int, /) -> None:
        with self._lock:
            calls, spent = self._current(namespace, start)
            self._items.put(namespace, (start, calls, spent + tokens))

    def spent(self, namespace: str, start: int, /) -> tuple[int, int]:
        with self._lock:
            return self._current(namespace, start)

    def _current(self, namespace: str, start: int) -> tuple[int, int]:
        period, calls, tokens = self._items.get(namespace) or (start, 0, 0)
        return (calls, tokens) if period == start else (0, 0)


#: The spending of budgets whose memory has no SQL database.
_spending = InProcessSpending(10_000)


def check_budget(value: Any) -> Budget | None:
    """The ``budget`` field's check: None, a :class:`Budget`, or its config dict."""
    if value is None or isinstance(value, Budget):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - {"tokens", "calls", "per"}
        if unknown:
            raise ConfigError(
                f"Unknown budget option(s) {sorted(unknown)}; a budget takes tokens, calls, per."
            )
        return Budget(**value)
    raise ConfigError(
        f"budget must be a dict such as {{'tokens': 50000, 'per': 'day'}}; got {value!r:.80}"
    )


#: The type of a memory's ``budget`` field: None, a :class:`Budget` or its dict.
BudgetField = Annotated[Any, BeforeValidator(check_budget)]
