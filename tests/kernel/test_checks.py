"""The argument checks in kernel/checks.py, and the constructors and calls that use them."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memories import InMemoryHistory
from memories.errors import ConfigError, InvalidInputError
from memories.kernel.accounting import Budget, Ledger
from memories.kernel.checks import non_empty_text, positive_number, whole_number
from memories.kernel.retention import Retention


@pytest.mark.parametrize("bad", [True, 2.0, "3", None, -1])
def test_a_whole_number_is_an_int_not_a_bool_and_the_error_names_it(bad: Any) -> None:
    with pytest.raises(ConfigError, match=rf"^k must be a whole number >= 0, got {bad!r}\.$"):
        whole_number(bad, "k")
    assert whole_number(3, "k") == 3


def test_a_positive_number_refuses_zero_nan_and_bools_with_the_hint() -> None:
    for bad in (0, -0.5, math.nan, True, "1"):
        with pytest.raises(InvalidInputError, match=r"ttl must be a number > 0 \(minutes\)"):
            positive_number(bad, "ttl", hint="minutes", error=InvalidInputError)
    assert positive_number(0.5, "ttl") == 0.5


def test_non_empty_text_refuses_empty_and_non_strings() -> None:
    for bad in ("", None, b"x"):
        with pytest.raises(ConfigError, match="session_id must be a non-empty string"):
            non_empty_text(bad, "session_id")


def test_a_ledger_refuses_a_namespace_cap_that_is_not_a_whole_number() -> None:
    for bad in ("10", 0, 2.5):
        with pytest.raises(
            ConfigError, match=f"max_namespaces must be a whole number >= 1, got {bad!r}"
        ):
            Ledger(max_namespaces=bad)


def test_budgets_retentions_and_keep_last_say_the_bad_count() -> None:
    with pytest.raises(ConfigError, match=r"budget calls must be a whole number >= 0, got 1\.5"):
        Budget(calls=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"retention keep_messages .* >= 1, got True"):
        Retention(keep_messages=True)
    with pytest.raises(ConfigError, match=r"retention keep_days must be a number > 0 \(days\)"):
        Retention(keep_days=math.nan)
    with pytest.raises(InvalidInputError, match=r">= 0 \(messages\), got True"):
        InMemoryHistory().keep_last(True)


def test_histories_refuse_a_bool_or_a_float_where_a_count_of_messages_goes(tmp_path: Any) -> None:
    from memories import SQLiteHistory

    for history in (InMemoryHistory(), SQLiteHistory(tmp_path / "h.db")):
        history.add_messages([HumanMessage("hi"), AIMessage("hello")])
        with pytest.raises(InvalidInputError, match="last must be a whole number >= 0, got True"):
            history.entries(last=True)
        with pytest.raises(InvalidInputError, match=r"k must be a whole number >= 1, got 0\.5"):
            history.start_of_last_exchanges(0.5)  # type: ignore[arg-type]
