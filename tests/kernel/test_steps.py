"""``twins``: a method and its async twin made from one loop of steps."""

from __future__ import annotations

import asyncio

import pytest

from memories.kernel.steps import Steps, step, twins


class _Store:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def read(self, key: str) -> str:
        self.calls.append("read")
        return key.upper()

    async def aread(self, key: str) -> str:
        self.calls.append("aread")
        return key.upper()


class _Reader:
    def __init__(self) -> None:
        self.store = _Store()

    def _get_steps(self, key: str, /, *, suffix: str = "!") -> Steps[str]:
        """The key, read."""
        return (yield step(self.store.read, key)) + suffix

    get, aget = twins(_get_steps)

    def __peek_steps(self, key: str) -> Steps[str]:
        return (yield step(self.store.read, key))

    _peek, _apeek = twins(__peek_steps)


class _Shouting(_Reader):
    def _get_steps(self, key: str, /, *, suffix: str = "!") -> Steps[str]:
        return (yield from super()._get_steps(key, suffix=suffix + "!"))


def test_a_public_pair_runs_the_loop_sync_and_async() -> None:
    reader = _Reader()
    assert reader.get("a") == "A!"
    assert asyncio.run(reader.aget("b", suffix="?")) == "B?"
    assert reader.store.calls == ["read", "aread"]
    assert (_Reader.get.__name__, _Reader.aget.__name__) == ("get", "aget")
    assert _Reader.get.__doc__ == "The key, read."


def test_a_subclass_override_of_the_steps_is_the_one_run() -> None:
    shouting = _Shouting()
    assert shouting.get("a") == "A!!"
    assert asyncio.run(shouting.aget("a")) == "A!!"


def test_a_private_pair_is_named_and_found_as_the_kernel_finds_twins() -> None:
    reader = _Reader()
    assert (_Reader._peek.__name__, _Reader._apeek.__name__) == ("_peek", "_apeek")
    assert reader._peek("x") == "X"
    assert asyncio.run(reader._apeek("y")) == "Y"
    assert reader.store.calls == ["read", "aread"]


def test_a_steps_function_named_otherwise_is_refused() -> None:
    def loading(self: object) -> Steps[None]:
        yield step(print)

    with pytest.raises(TypeError, match="_<method>_steps, got 'loading'"):
        twins(loading)
