"""I/O loops written once, run sync or async.

A loop is a generator that ``yield``s each I/O operation as a :class:`Step`
and receives its result; :func:`run` performs the steps with the sync methods,
:func:`arun` with their async twins (``load_state`` / ``aload_state``), so the
policy between steps exists once. With ``lock=`` a runner holds that plain
:class:`threading.Lock` (the async runner waits for it on a worker thread) and
lets go only around ``unlocked=True`` steps, such as a model call.
:func:`twins` makes a public method and its async twin from one loop. Blocking
work with no loop to share leaves the event loop through :func:`to_thread`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

__all__ = [
    "Method",
    "Step",
    "Steps",
    "arun",
    "blocking_twin",
    "bounded_call",
    "inline_twin",
    "run",
    "step",
    "to_thread",
    "twins",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)
P = ParamSpec("P")

#: A loop of I/O steps that ends by returning a ``T``.
Steps = Generator["Step", Any, T]


class Step:
    """One I/O operation of a loop: a sync method, its arguments, and whether it may unlock.

    The async twin is found by name when :func:`arun` needs it: ``a`` + the
    method's name, on the same object (``_foo`` -> ``_afoo``).
    """

    __slots__ = ("args", "kwargs", "method", "unlocked")

    def __init__(
        self, method: Callable[..., Any], /, *args: Any, unlocked: bool = False, **kwargs: Any
    ) -> None:
        self.method = method
        """The sync method, bound to its object (``history.load_state``)."""
        self.args = args
        """Positional arguments of the call."""
        self.kwargs = kwargs
        """Keyword arguments of the call."""
        self.unlocked = unlocked
        """Let go of the runner's lock during this step (a slow model call)."""

    def acall(self) -> Awaitable[Any]:
        """Perform the step with the async twin: ``a`` + the method's name, on the same object."""
        owner = getattr(self.method, "__self__", None)
        name = _twin_name(self.method.__name__)
        twin = getattr(owner, name, None)
        if twin is None:
            raise TypeError(
                f"{type(owner).__name__} has no async twin {name!r} of {self.method.__name__!r}"
            )
        result: Awaitable[Any] = twin(*self.args, **self.kwargs)
        return result

    def __repr__(self) -> str:
        return f"Step({getattr(self.method, '__qualname__', self.method)}, {self.args!r})"


#: A :class:`Step` calling ``method(*args, **kwargs)`` (or its async twin):
#: ``step(history.load_state, key)``. The class itself, so making a step is one call.
step = Step


def run(
    steps: Steps[T],
    /,
    *,
    lock: threading.Lock | None = None,
    batch: contextlib.AbstractContextManager[Any] | None = None,
) -> T:
    """Drive a loop with the sync methods; return what the loop returns.

    With ``batch`` (:meth:`~memories.stores.history.ChatHistory.batch`) the loop
    is one database transaction, committed before an ``unlocked`` step (no
    transaction is held while a model answers) and rolled back when a step fails
    (the steps after either then run on their own).
    """
    loop = _Loop(steps)
    current = _held(loop, lock, batch)
    while current is not None:  # an unlocked step (a model call), run without the lock
        try:
            loop.result = current.method(*current.args, **current.kwargs)
        except Exception as exc:
            loop.error = exc
        current = _held(loop, lock, None)
    return loop.value


async def arun(
    steps: Steps[T],
    /,
    *,
    lock: threading.Lock | None = None,
    batch: contextlib.AbstractContextManager[Any] | None = None,
) -> T:
    """Drive a loop with the async twins (``batch``: its steps before the first ``unlocked``
    one run as :func:`run` runs them, on a worker thread); return what the loop returns."""
    loop = _Loop(steps)
    first = None if batch is None else await to_thread(_held, loop, lock, batch)
    async with _aheld(lock):
        current = loop.next() if batch is None else first
        while current is not None:
            try:
                async with _Released(lock, current.unlocked):
                    loop.result = await current.acall()
            except Exception as exc:
                loop.error = exc
            current = loop.next()
    return loop.value


def _held(
    loop: _Loop, lock: threading.Lock | None, batch: contextlib.AbstractContextManager[Any] | None
) -> Step | None:
    """Run the loop's steps up to its first ``unlocked`` one (returned unrun) holding ``lock``."""
    # A step is called here, not through a helper: this loop runs every step of every turn.
    with lock if lock is not None else _NO_LOCK:
        current = loop.next()
        unit = None if batch is None or current is None else contextlib.ExitStack()
        with unit if unit is not None else _NO_LOCK:
            if unit is not None and batch is not None:
                unit.enter_context(batch)  # at the first step: a loop refusing its input opens none
            while current is not None and not current.unlocked:
                try:
                    loop.result = current.method(*current.args, **current.kwargs)
                except Exception as exc:
                    if unit is not None:
                        unit.__exit__(type(exc), exc, exc.__traceback__)  # rolled back
                    loop.error = exc
                current = loop.next()
    return current


class _Loop:
    """The half of a runner that both share: feeding results and errors back into the loop."""

    def __init__(self, steps: Steps[Any]) -> None:
        self.steps = steps
        self.result: Any = None
        """The last step's result, sent into the loop next."""
        self.error: Exception | None = None
        """The last step's exception, thrown into the loop next."""
        self.value: Any = None
        """What the loop returned."""

    def next(self) -> Step | None:
        """The loop's next step, or None when it has returned."""
        try:
            if self.error is not None:
                current = self.steps.throw(self.error)
            else:
                current = self.steps.send(self.result)
        except StopIteration as stop:
            self.value = stop.value
            return None
        self.result, self.error = None, None
        return current


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run blocking ``func`` on a worker thread (context variables kept) and await it."""
    return await asyncio.to_thread(func, *args, **kwargs)


def bounded_call(work: Callable[[], T], seconds: float, /, *, name: str) -> T:
    """``work()`` on a daemon thread ``name`` (context kept), waited for at most ``seconds``.

    One that outlives the wait is abandoned, not interrupted, and never holds up
    the process's exit; what ``work`` raised is raised again here.

    Raises:
        TimeoutError: no answer within ``seconds``.
    """
    outcome: list[tuple[bool, Any]] = []
    context = contextvars.copy_context()

    def call() -> None:
        try:
            outcome.append((True, context.run(work)))
        except BaseException as exc:  # re-raised in the caller's thread below
            outcome.append((False, exc))

    thread = threading.Thread(target=call, name=name, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise TimeoutError(f"{name} gave no answer within {seconds} s")
    answered, value = outcome[0]
    if not answered:
        raise value
    result: T = value
    return result


def blocking_twin(
    method: Callable[Concatenate[S, P], T], /
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """The async twin of a blocking method: the same call, on a worker thread.

    Written in a class body as ``aload = blocking_twin(load)``. The twin calls
    the method by name, so a subclass that overrides ``load`` gets an ``aload``
    that runs its own ``load``; a backend with native async overrides ``aload``.
    """
    name = method.__name__

    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await asyncio.to_thread(getattr(self, name), *args, **kwargs)
        return result

    return _named(twin, name, "on a worker thread")


def inline_twin(
    method: Callable[Concatenate[S, P], T], /
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """The async twin of a method that never blocks: called inline, by name (no thread)."""
    name = method.__name__

    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = getattr(self, name)(*args, **kwargs)
        return result

    return _named(twin, name, "inline (it never blocks)")


class Method(Protocol[S_contra, P, T_co]):
    """A method made by :func:`twins`, as mypy sees it.

    A protocol with ``__get__`` rather than a ``Callable``: mypy reads a ``Callable``
    against the base class's signature of an overridden method (``status``,
    ``save_context``) and rejects the narrower ``self``. A plain function is one.
    """

    @overload
    def __get__(self, obj: None, owner: Any, /) -> Method[S_contra, P, T_co]: ...
    @overload
    def __get__(self, obj: S_contra, owner: Any, /) -> Callable[P, T_co]: ...
    def __call__(self, obj: S_contra, /, *args: P.args, **kwargs: P.kwargs) -> T_co: ...


def twins(
    steps: Callable[Concatenate[S, P], Steps[T]],
    /,
    *,
    lock: str | None = None,
    runner: str | None = None,
    **options: object,
) -> tuple[Method[S, P, T], Method[S, P, Coroutine[Any, Any, T]]]:
    """A public method that runs the loop ``steps`` with :func:`run`, and its async twin.

    Written in a class body as ``search, asearch = twins(_search_steps)``, so the
    signature and docstring are written once, on the steps function; mypy infers
    each method's exact signature and the API pages show both as methods
    (``docs/twins.py``). Each calls the steps function by name, so a subclass's
    override is the one run. The async twin runs the loop with :func:`arun`: a
    step's async method (a model's ``aembed_query``) is awaited, not run on a thread.
    ``lock="_lock"`` runs the loop holding the object's lock: ``run(loop, lock=self._lock)``.
    ``runner="_run"`` runs it with the object's runner and its async twin, given
    ``options``: ``self._run(loop, write=True)``, ``await self._arun(loop, write=True)``.
    A module's steps function makes a function and its twin the same way, and
    ``_get, _aget = twins(__get_steps)`` a private method and its twin.
    """
    method: Method[S, P, T] = _of_steps(steps, lock, runner, options, asynchronous=False)
    twin: Method[S, P, Coroutine[Any, Any, T]] = _of_steps(
        steps, lock, runner, options, asynchronous=True
    )
    return method, twin


def _of_steps(
    steps: Callable[..., Any],
    lock: str | None,
    runner: str | None,
    options: dict[str, object],
    *,
    asynchronous: bool,
) -> Any:
    """A method with the parameters of ``steps`` that runs ``self.<steps>(...)`` (or a function).

    Its code is generated with those parameters written out, as dataclasses
    writes an ``__init__``: a call costs what a hand-written twin's does, no
    ``*args``/``**kwargs`` packed and forwarded on each call.
    """
    called = steps.__name__
    name = called.removeprefix("_").removesuffix("_steps")
    if called != f"_{name}_steps":
        raise TypeError(f"A steps function is named _<method>_steps, got {called!r}.")
    parameters = list(inspect.signature(steps).parameters.values())
    defaults = {f"_steps_{p.name}": p.default for p in parameters if p.default is not p.empty}
    head = inspect.Signature(
        [
            p.replace(
                annotation=p.empty,
                default=p.empty if p.default is p.empty else _Source(f"_steps_{p.name}"),
            )
            for p in parameters
        ]
    )
    this = parameters[0].name
    passed = [_FORWARDED[p.kind].format(p.name) for p in parameters]
    # A module's function is called itself; a method by name, so a subclass's override runs.
    function = steps.__qualname__ == called
    if called.startswith("__") and not function:  # a private method's, mangled in its class
        called = f"_{steps.__qualname__.split('.')[-2].lstrip('_')}{called}"
    loop = (
        f"_steps({', '.join(passed)})" if function else f"{this}.{called}({', '.join(passed[1:])})"
    )
    given = "".join(f", {option}=_option_{option}" for option in options)
    given += "" if lock is None else f", lock={this}.{lock}"
    if runner is None:
        runner = "await _steps_arun" if asynchronous else "_steps_run"
    else:
        runner = f"await {this}.{_twin_name(runner)}" if asynchronous else f"{this}.{runner}"
    source = f"def twin{head}:\n    return {runner}({loop}{given})"
    namespace: dict[str, Any] = {"_steps_run": run, "_steps_arun": arun, "_steps": steps}
    namespace.update(defaults, **{f"_option_{k}": v for k, v in options.items()})
    exec(f"async {source}" if asynchronous else source, namespace)
    twin = functools.update_wrapper(namespace["twin"], steps)
    twin.__name__ = _twin_name(name) if asynchronous else name
    twin.__qualname__ = steps.__qualname__.removesuffix(steps.__name__) + twin.__name__
    if asynchronous:
        twin.__doc__ = f"Async :{'func' if function else 'meth'}:`{name}`."
    return twin


class _Source(str):
    """A default written into a generated signature as the name it is bound to."""

    def __repr__(self) -> str:
        return str(self)


#: How a generated twin passes each kind of parameter on.
_FORWARDED = {
    inspect.Parameter.POSITIONAL_ONLY: "{}",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "{}",
    inspect.Parameter.VAR_POSITIONAL: "*{}",
    inspect.Parameter.KEYWORD_ONLY: "{0}={0}",
    inspect.Parameter.VAR_KEYWORD: "**{}",
}


def _twin_name(name: str) -> str:
    """The async twin's name: ``load`` -> ``aload``, ``_load`` -> ``_aload``."""
    return "_a" + name[1:] if name.startswith("_") else "a" + name


def _named(twin: Callable[..., Any], name: str, how: str) -> Any:
    """``twin`` named as the async twin of ``name``."""
    twin.__name__ = twin.__qualname__ = _twin_name(name)
    twin.__doc__ = f"Async :meth:`{name}`: the same call, {how}."
    return twin


#: What ``run`` holds when it has no lock to hold.
_NO_LOCK = contextlib.nullcontext()


class _Released:
    """Lets go of the async runner's lock around an ``unlocked`` step, and takes it back after."""

    def __init__(self, lock: threading.Lock | None, unlocked: bool) -> None:
        self.lock = lock if unlocked else None

    async def __aenter__(self) -> None:
        if self.lock is not None:
            self.lock.release()

    async def __aexit__(self, *exc_info: object) -> None:
        if self.lock is not None:
            await _acquire(self.lock)


@contextlib.asynccontextmanager
async def _aheld(lock: threading.Lock | None) -> AsyncIterator[None]:
    if lock is None:
        yield
        return
    await _acquire(lock)
    try:
        yield
    finally:
        lock.release()


async def _acquire(lock: threading.Lock) -> None:
    """Take ``lock`` without blocking the event loop; a cancelled wait leaves it free."""
    if lock.acquire(blocking=False):
        return
    waiting = asyncio.ensure_future(asyncio.to_thread(lock.acquire))
    try:
        await asyncio.shield(waiting)
    except asyncio.CancelledError:
        # The worker thread still takes the lock: hand it back as soon as it does.
        waiting.add_done_callback(lambda _: lock.release())
        raise
