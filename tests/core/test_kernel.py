"""The kernel's runners and background component, on their own."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import Any

import pytest

from memories.kernel.background import BackgroundWork, Debouncer, MemoryStatus, merged_batches
from memories.kernel.steps import (
    Steps,
    arun,
    blocking_twin,
    inline_twin,
    run,
    step,
    twins,
)
from tests.helpers import joined


class Store:
    """A resource with sync methods and their async twins that records overlap."""

    def __init__(self) -> None:
        self.inside = 0
        self.overlaps = 0
        self.calls: list[str] = []
        self.guard = threading.Lock()

    def _enter(self, name: str) -> None:
        with self.guard:
            self.inside += 1
            self.overlaps += self.inside > 1
            self.calls.append(name)

    def _leave(self) -> None:
        with self.guard:
            self.inside -= 1

    def read(self, key: str) -> str:
        self._enter("read")
        time.sleep(0.01)
        self._leave()
        return f"value of {key}"

    async def aread(self, key: str) -> str:
        self._enter("aread")
        await asyncio.sleep(0.01)
        self._leave()
        return f"value of {key}"

    def fail(self) -> None:
        raise KeyError("missing")

    async def afail(self) -> None:
        raise KeyError("missing")

    def slow(self, seconds: float) -> str:
        time.sleep(seconds)
        return "slow"

    async def aslow(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "slow"


def reading(store: Store, key: str) -> Steps[str]:
    first = yield step(store.read, key)
    second = yield step(store.read, key=key + "!")
    return f"{first} / {second}"


def recovering(store: Store) -> Steps[str]:
    try:
        yield step(store.fail)
    except KeyError as exc:
        return f"caught {exc}"
    return "not reached"


def test_run_and_arun_give_the_same_result_with_sync_and_async_methods() -> None:
    store = Store()
    assert run(reading(store, "k")) == asyncio.run(arun(reading(store, "k")))
    assert store.calls == ["read", "read", "aread", "aread"]


def test_a_step_error_is_thrown_into_the_loop_on_both_paths() -> None:
    store = Store()
    assert run(recovering(store)) == "caught 'missing'"
    assert asyncio.run(arun(recovering(store))) == "caught 'missing'"


def test_an_uncaught_step_error_reaches_the_caller_and_frees_the_lock() -> None:
    store, lock = Store(), threading.Lock()

    def failing() -> Steps[None]:
        yield step(store.fail)

    with pytest.raises(KeyError):
        run(failing(), lock=lock)
    with pytest.raises(KeyError):
        asyncio.run(arun(failing(), lock=lock))
    assert not lock.locked()


def test_the_lock_serialises_sync_and_async_loops() -> None:
    store, lock = Store(), threading.Lock()

    def sync_loops() -> None:
        for _ in range(5):
            run(reading(store, "s"), lock=lock)

    async def async_loops() -> None:
        for _ in range(5):
            await arun(reading(store, "a"), lock=lock)

    thread = threading.Thread(target=sync_loops)
    thread.start()
    asyncio.run(async_loops())
    joined(thread)
    assert len(store.calls) == 20
    assert store.overlaps == 0


def test_without_the_lock_the_same_loops_do_overlap() -> None:
    """The check above can fail: without a lock the two paths interleave."""
    store = Store()

    def sync_loops() -> None:
        for _ in range(5):
            run(reading(store, "s"))

    async def async_loops() -> None:
        for _ in range(5):
            await arun(reading(store, "a"))

    thread = threading.Thread(target=sync_loops)
    thread.start()
    asyncio.run(async_loops())
    joined(thread)
    assert store.overlaps > 0


def test_an_unlocked_step_lets_another_loop_run_meanwhile() -> None:
    store, lock = Store(), threading.Lock()
    order: list[str] = []

    def with_model_call() -> Steps[None]:
        order.append("model call starts")
        yield step(store.slow, 0.3, unlocked=True)
        order.append("model call ends")

    thread = threading.Thread(target=lambda: run(with_model_call(), lock=lock))
    thread.start()
    time.sleep(0.1)
    run(reading(store, "meanwhile"), lock=lock)
    order.append("other loop done")
    joined(thread)
    assert order == ["model call starts", "other loop done", "model call ends"]
    assert not lock.locked()


def test_a_cancelled_wait_for_the_lock_leaves_it_free() -> None:
    lock = threading.Lock()
    store = Store()

    async def main() -> None:
        lock.acquire()  # held by "another thread"
        waiting = asyncio.ensure_future(arun(reading(store, "x"), lock=lock))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        lock.release()
        await asyncio.sleep(0.1)  # the worker thread takes the lock, then hands it back

    asyncio.run(main())
    assert lock.acquire(timeout=2)
    lock.release()


def test_a_step_without_an_async_twin_says_which() -> None:
    class SyncOnly:
        def read(self) -> int:
            return 1

    def loop() -> Steps[int]:
        value: int = yield step(SyncOnly().read)
        return value

    assert run(loop()) == 1
    with pytest.raises(TypeError, match="SyncOnly has no async twin 'aread' of 'read'"):
        asyncio.run(arun(loop()))


def test_background_work_runs_once_per_burst_and_reports() -> None:
    runs: list[int] = []
    with Debouncer(delay=0.05, name="test") as scheduler:
        work = BackgroundWork(("memory", 1), lambda: runs.append(1), scheduler=scheduler)
        for _ in range(5):
            assert work.schedule()
        assert work.flush(timeout=5)
        assert runs == [1]
        assert work.status().completed == 1
        assert work.close(timeout=5)
        assert not work.schedule()  # closed: the caller does the work inline
        assert runs == [1]


def test_the_status_record_defaults_to_nothing_deferred() -> None:
    status = MemoryStatus()
    assert (status.pending, status.failures, status.last_error, status.background) == (
        0,
        0,
        None,
        None,
    )


def test_merged_batches_keep_the_most_telling_status_and_add_up_the_counts() -> None:
    from memories.long_term.collection.folding import CollectionUpdate
    from memories.long_term.profile.update import UpdateResult, merge_results

    rank = {"idle": 0, "unchanged": 1, "updated": 2, "failed": 3}
    first = CollectionUpdate("updated", turns=2, inserted=1, updated=3)
    failed = CollectionUpdate("failed", turns=1, deleted=1, error="model down")
    assert merged_batches(first, failed, rank) == CollectionUpdate(
        "failed", 3, 1, 3, 1, "model down"
    )
    assert merged_batches(failed, CollectionUpdate("idle"), rank).error == "model down"
    # a version is the later batch's, never a sum
    profile = merge_results(UpdateResult("updated", 4, 2), UpdateResult("unchanged", 5, 1))
    assert profile == UpdateResult("updated", 5, 3)


def test_a_rejected_operations_reply_is_asked_again_through_its_tool() -> None:
    from langchain_core.messages import AIMessage

    from memories.long_term.collection.extraction import ExtractionSession

    def session(tools: bool) -> ExtractionSession:
        return ExtractionSession([], 1, tools, {}, ("insert",), lambda content: content)

    with_tool = session(True)
    with_tool.receive(
        AIMessage(
            "",
            tool_calls=[
                {
                    "name": "update_memories",
                    "args": {"operations": [{"op": "delete", "id": "m9"}]},
                    "id": "c1",
                }
            ],
        )
    )
    assert "Call update_memories again" in str(with_tool.request()[-1].content)
    as_text = session(False)
    as_text.receive(AIMessage("not json"))
    assert str(as_text.request()[-1].content).endswith("Reply again with the corrected operations.")
    as_text.receive(AIMessage("also not json"))
    assert as_text.request() is None and as_text.outcome().operations == ()


class _Here:
    def here(self, n: int) -> tuple[int, int]:
        return threading.get_ident(), n


class _Inline(_Here):
    ahere = inline_twin(_Here.here)


class _Blocking(_Here):
    ahere = blocking_twin(_Here.here)


def test_an_inline_twin_runs_on_the_event_loop_and_a_blocking_twin_on_a_worker() -> None:
    async def both() -> tuple[int, tuple[int, int], tuple[int, int]]:
        return threading.get_ident(), await _Inline().ahere(1), await _Blocking().ahere(2)

    loop, inline, blocking = asyncio.run(both())
    assert inline == (loop, 1)
    assert blocking[1] == 2 and blocking[0] != loop
    assert _Inline.ahere.__name__ == "ahere" and "inline" in (_Inline.ahere.__doc__ or "")


class _Reader:
    """Twins made from one loop of steps, as a memory's public methods are."""

    def __init__(self) -> None:
        self.store = Store()

    def _read_steps(
        self,
        key: str,
        /,
        *,
        suffix: str = "",
        seen: list[str] = [],  # noqa: B006 (identity)
    ) -> Steps[tuple[str, list[str]]]:
        """Read ``key`` twice."""
        value = yield from reading(self.store, key + suffix)
        return value, seen

    read, aread = twins(_read_steps)


class _Shouting(_Reader):
    def _read_steps(
        self,
        key: str,
        /,
        *,
        suffix: str = "",
        seen: list[str] = [],  # noqa: B006
    ) -> Steps[tuple[str, list[str]]]:
        value, seen = yield from super()._read_steps(key.upper(), suffix=suffix, seen=seen)
        return value, seen


def test_a_sync_and_an_async_twin_run_one_loop_each_with_its_own_methods() -> None:
    reader = _Reader()
    value, seen = reader.read("k", suffix="!")
    assert (value, seen) == asyncio.run(reader.aread("k", suffix="!"))
    assert value == "value of k! / value of k!!"
    # The async twin awaits the async methods on the event loop: no thread, no sync call.
    assert reader.store.calls == ["read", "read", "aread", "aread"]
    # A default is the steps function's own object, as in a written-out method.
    assert seen is (_Reader._read_steps.__kwdefaults__ or {})["seen"]


def test_a_twin_has_its_own_name_the_loops_docstring_and_runs_a_subclasss_loop() -> None:
    assert (_Reader.read.__name__, _Reader.aread.__name__) == ("read", "aread")
    assert _Reader.aread.__qualname__ == "_Reader.aread"
    assert _Reader.read.__doc__ == "Read ``key`` twice."
    assert _Reader.aread.__doc__ == "Async :meth:`read`."
    assert asyncio.iscoroutinefunction(_Reader.aread)
    assert _Shouting().read("k")[0] == "value of K / value of K!"
    assert asyncio.run(_Shouting().aread("k"))[0] == "value of K / value of K!"
    with pytest.raises(TypeError, match=r"read\(\) got an unexpected keyword argument 'k'"):
        _Reader().read("k", k=1)  # type: ignore[call-arg]


def _read_twice_steps(store: Store, key: str, /, *, suffix: str = "") -> Steps[str]:
    """Read ``key`` twice from ``store``."""
    return reading(store, key + suffix)


read_twice, aread_twice = twins(_read_twice_steps)


def test_twins_of_a_modules_function_call_it_and_say_so() -> None:
    store = Store()
    assert read_twice(store, "k", suffix="!") == "value of k! / value of k!!"
    assert asyncio.run(aread_twice(store, "k")) == "value of k / value of k!"
    assert store.calls == ["read", "read", "aread", "aread"]
    assert (read_twice.__doc__, aread_twice.__doc__) == (
        "Read ``key`` twice from ``store``.",
        "Async :func:`read_twice`.",
    )


def test_a_twin_of_a_loop_not_named_for_its_method_says_how_to_name_it() -> None:
    def reading_twice(self: object) -> Steps[None]:
        yield step(print)

    with pytest.raises(TypeError, match="_<method>_steps, got 'reading_twice'"):
        twins(reading_twice)


class _Locked:
    """Twins that hold the object's lock, and twins run by the object's own runner."""

    def __init__(self) -> None:
        self.store = Store()
        self._lock = threading.Lock()
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def _held_steps(self, key: str) -> Steps[tuple[str, bool]]:
        """Read ``key`` twice, holding the lock."""
        value = yield from reading(self.store, key)
        return value, self._lock.locked()

    held, aheld = twins(_held_steps, lock="_lock")

    def _run(self, steps: Steps[Any], **options: Any) -> Any:
        self.ran.append(("_run", options))
        return run(steps)

    async def _arun(self, steps: Steps[Any], **options: Any) -> Any:
        self.ran.append(("_arun", options))
        return await arun(steps)

    def _own_steps(self, key: str, /) -> Steps[str]:
        """Read ``key`` twice, through the object's runner."""
        return (yield from reading(self.store, key))

    own, aown = twins(_own_steps, runner="_run", write=True)


def test_twins_given_a_lock_hold_it_and_twins_given_a_runner_run_through_it() -> None:
    locked = _Locked()
    assert locked.held("k") == ("value of k / value of k!", True)
    assert asyncio.run(locked.aheld("k")) == ("value of k / value of k!", True)
    assert not locked._lock.locked()
    assert locked.own("k") == asyncio.run(locked.aown("k")) == "value of k / value of k!"
    assert locked.ran == [("_run", {"write": True}), ("_arun", {"write": True})]
    assert locked.store.calls == ["read", "read", "aread", "aread"] * 2


def test_a_twin_given_a_lock_or_runner_is_written_out_code_packing_no_arguments() -> None:
    """As cheap as a written-out method: its own parameters, no ``*args``/``**kwargs``."""
    for made in (_Locked.held, _Locked.aheld, _Locked.own, _Locked.aown):
        assert not made.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        assert made.__code__.co_argcount == 2


def test_the_buffer_string_is_langchains_and_reads_no_text_property_for_plain_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LangChain's get_buffer_string read each message's ``text`` property: 80 µs a load."""
    from langchain_core.messages import (
        AIMessage,
        AIMessageChunk,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        get_buffer_string,
    )

    from memories.kernel.messages import format_buffer

    class Named(HumanMessage):
        pass

    odd = [
        AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1"}]),
        AIMessage("x", additional_kwargs={"function_call": {"name": "f", "arguments": "{}"}}),
        HumanMessage([{"type": "text", "text": "blocks"}, "and a string"]),
        ToolMessage("result", tool_call_id="c1"),
        ChatMessage("hello", role="critic"),
        FunctionMessage("out", name="f"),
        AIMessageChunk("chunk"),
        Named("a subclass"),
    ]
    plain = [SystemMessage("rules"), HumanMessage("hi"), AIMessage("hello"), HumanMessage("")]
    for prefixes in (("Human", "AI"), ("User", "Bot"), ("", "")):
        for messages in (plain, odd, plain + odd, []):
            assert format_buffer(messages, *prefixes) == get_buffer_string(
                messages, human_prefix=prefixes[0], ai_prefix=prefixes[1]
            )
    read: list[str] = []
    text = BaseMessage.text
    monkeypatch.setattr(
        BaseMessage, "text", property(lambda m: read.append(m.type) or text.fget(m))
    )  # type: ignore[attr-defined]
    assert format_buffer(plain, "Human", "AI") == "System: rules\nHuman: hi\nAI: hello\nHuman: "
    assert read == []


@pytest.mark.parametrize(
    "options",
    [{"delay": "1"}, {"delay": -1}, {"delay": float("nan")}, {"max_wait": float("inf")}],
)
def test_a_debouncer_refuses_a_wait_that_is_not_seconds(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be a number of seconds >= 0"):
        Debouncer(**options)
