"""The one bounded least-recently-used map behind the process's caches."""

from __future__ import annotations

import contextlib
import threading
import time

from memories.kernel.lru import LRU, Built


def test_a_put_past_the_limit_drops_the_least_recently_used_and_returns_it() -> None:
    cache: LRU[str, int] = LRU(2)
    assert cache.put("a", 1) == []
    assert cache.put("b", 2) == []
    assert cache.get("a") == 1  # used: "b" is now the oldest
    assert cache.put("c", 3) == [2]
    assert list(cache) == ["a", "c"]
    assert "b" not in cache
    assert len(cache) == 2


def test_a_put_again_refreshes_the_key_and_drops_nothing() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.put("a", 10) == []
    assert cache.put("c", 3) == [2]
    assert cache.get("a") == 10


def test_no_limit_keeps_everything() -> None:
    cache: LRU[int, int] = LRU(None)
    for i in range(100):
        assert cache.put(i, i) == []
    assert len(cache) == 100


def test_pop_and_clear_return_what_was_kept() -> None:
    cache: LRU[str, int] = LRU(3)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.pop("a") == 1
    assert cache.pop("a") is None
    assert cache.get("missing") is None
    assert cache.clear() == [2]
    assert len(cache) == 0


class _SlowKey(int):
    """A key whose every lookup lets another thread run: a race shows at once."""

    def __hash__(self) -> int:
        time.sleep(0)
        return int.__hash__(self)


def test_a_locked_map_shared_by_threads_never_loses_a_key_mid_call() -> None:
    cache: LRU[int, int] = LRU(8, locked=True)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for i in range(300):
                cache.put(_SlowKey(i % 16), i)
                cache.get(_SlowKey((i + 1) % 16))  # unlocked: another pops it before move_to_end
                cache.pop(_SlowKey((i + 2) % 16))
        except KeyError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert failures == []
    assert len(cache) <= 8


def test_built_values_are_built_once_and_the_dropped_one_closed_after_the_build() -> None:
    closed: list[str] = []
    builds: list[str] = []
    cache: Built[str, str] = Built(1, close=closed.append, keeps=lambda value: value != "skip")

    def build(key: str) -> str:
        time.sleep(0.01)  # two first uses of a key at once: one build
        builds.append(key)
        return key

    threads = [threading.Thread(target=cache.built, args=("a", lambda: build("a"))) for _ in "12"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert builds == ["a"]
    assert cache.built("skip", lambda: build("skip")) == "skip"  # handed out, not kept
    assert (list(cache), closed) == (["a"], [])
    assert cache.built("b", lambda: build("b")) == "b"
    assert (list(cache), closed) == (["b"], ["a"])
    assert cache.clear() == ["b"] and closed == ["a"]  # cleared values are the caller's to close


def test_a_slow_build_holds_up_neither_a_kept_value_nor_another_keys_build() -> None:
    cache: Built[str, str] = Built(8, close=lambda value: None)
    cache.built("kept", lambda: "kept")
    started, release = threading.Event(), threading.Event()

    def hung() -> str:  # a factory waiting on a server that does not answer
        started.set()
        release.wait(timeout=30)
        return "hung"

    slow = threading.Thread(target=cache.built, args=("hung", hung))
    slow.start()
    try:
        assert started.wait(timeout=10)
        answers: list[str] = []
        other = threading.Thread(
            target=lambda: answers.extend(
                [cache.built("kept", lambda: "again"), cache.built("new", lambda: "new")]
            )
        )
        other.start()
        other.join(timeout=5)
        assert answers == ["kept", "new"]  # neither waited for the hung build
    finally:
        release.set()
        slow.join(timeout=30)
    assert cache.built("hung", lambda: "twice") == "hung"
    assert cache.clear() == ["kept", "new", "hung"]


def test_after_a_failed_build_the_retry_is_still_the_only_build_of_its_key() -> None:
    cache: Built[str, str] = Built(8, close=lambda value: None)
    first_in, fail, retry_in, finish = (threading.Event() for _ in range(4))
    running: list[str] = []

    def failing() -> str:
        first_in.set()
        fail.wait(timeout=30)
        raise ConnectionError("the server went away")

    def retry() -> str:  # the waiter builds again once the first build failed
        running.append("retry")
        retry_in.set()
        finish.wait(timeout=30)
        return "retried"

    def late() -> str:
        running.append("late")
        return "late"

    def first() -> None:
        with contextlib.suppress(ConnectionError):
            cache.built("k", failing)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert first_in.wait(timeout=10)
    got: list[str] = []
    threads.append(threading.Thread(target=lambda: got.append(cache.built("k", retry))))
    threads[1].start()
    time.sleep(0.2)  # the waiter is blocked on the key's build
    fail.set()
    assert retry_in.wait(timeout=10)
    threads.append(threading.Thread(target=lambda: got.append(cache.built("k", late))))
    threads[2].start()
    time.sleep(0.2)  # a third use arrives while the retry builds
    finish.set()
    for thread in threads:
        thread.join(timeout=30)
    assert running == ["retry"]  # one build at a time, and the third use waited for it
    assert got == ["retried", "retried"] and list(cache) == ["k"]
