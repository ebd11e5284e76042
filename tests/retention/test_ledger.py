"""The expiry ledger's reads by namespace prefix and its discarding, on SQLite and PostgreSQL."""

from __future__ import annotations

from memories.stores.expiry import OWN, ExpiryLedger


def test_expired_under_a_prefix_is_the_prefix_and_the_namespaces_below_it(ledger_url: str) -> None:
    ledger = ExpiryLedger(ledger_url)
    names = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ('a"',), ("a_",), ("b", "a"), ("A", "b")]
    for namespace in names:
        ledger.set(namespace, "k", 1, now=0)
    under = {e.namespace for e in ledger.expired(now=100, under=("a",))}
    assert under == {("a",), ("a", "b"), ("a", "b", "c")}
    assert ledger.expired_counts(now=100, under=("a", "b")) == {("a", "b"): 1, ("a", "b", "c"): 1}
    assert len(ledger.expired(now=100, under=())) == len(names)


def test_discard_removes_the_rows_named_or_the_whole_namespace_only(ledger_url: str) -> None:
    ledger = ExpiryLedger(ledger_url)
    ledger.set_many(("a",), {f"k{i}": 1 for i in range(1200)}, now=0)  # more than a statement
    ledger.set(("b",), "k0", 1, now=0)
    ledger.discard(("a",), [f"k{i}" for i in range(1100)])
    assert ledger.count() == 101
    ledger.discard(("a",))
    assert [(e.namespace, e.key) for e in ledger.expired(now=100)] == [(("b",), "k0")]


def test_a_sweep_of_every_namespace_reads_every_namespace_after_a_full_batch(
    ledger_url: str,
) -> None:
    ledger = ExpiryLedger(ledger_url)
    ledger.set(("a",), "k1", 1, now=0)
    ledger.set(("b",), "k1", 1, now=1)
    ledger.set(("a",), "k2", 1, now=2)

    def expire(namespace: tuple[str, ...], items: list, now: float) -> None:
        for item in items:
            ledger.forget(namespace, item.key, expired_at=now)

    # The first batch (a/k1, b/k1) is full and ends on ("b",): the next one still reads ("a",).
    assert ledger.sweep(expire, now=1000, batch=2) == {"a": 2, "b": 1}
    assert ledger.count() == 0


def test_a_bulk_write_of_more_keys_than_a_statement_takes_stamps_them_all(
    ledger_url: str,
) -> None:
    # PostgreSQL takes at most 65,535 parameters a statement: one IN (...) of every key refused it.
    ledger = ExpiryLedger(ledger_url)
    many = {f"k{i}": 1 for i in range(70_000)}
    ledger.set_many(("a",), many, now=0)
    ledger.set_many(("a",), dict.fromkeys(many, OWN), now=60)  # restarted: one UPDATE ... IN too
    assert ledger.expired_counts(now=110) == {}
    assert ledger.expired_counts(now=200) == {("a",): 70_000}
