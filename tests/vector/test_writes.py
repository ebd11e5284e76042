"""Write modes: background writes are searchable at once, never lost, and their failures surface."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memories import BackendUnavailableError, VectorMemory
from memories.long_term.vector import VectorStatus
from memories.stores.vector.writes import background_writer
from tests.probes import python
from tests.vector.conftest import MakeVector

TURNS = [
    ("I adopted a dog called Rex", "lovely"),
    ("my sister lives in Oslo", "nice city"),
    ("I play the cello on Sundays", "what pieces?"),
    ("Bach suites mostly", "beautiful"),
]


class Gate:
    """Holds the background writer inside the store's write until opened."""

    def __init__(self, memory: VectorMemory, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        write = memory.store.upsert

        def held(*args: Any, **kwargs: Any) -> None:
            self.entered.set()
            assert self.opened.wait(30), "the test never opened the gate"
            write(*args, **kwargs)

        monkeypatch.setattr(memory.store, "upsert", held)


@pytest.fixture
def writer_idle() -> Iterator[None]:
    yield
    background_writer().flush()


def _save_all(memory: VectorMemory) -> None:
    for human, ai in TURNS:
        memory.save_context({"input": human}, {"output": ai})


def test_background_is_the_default_and_sync_is_an_option() -> None:
    assert VectorMemory().write == "background"
    assert VectorMemory(write="sync").write == "sync"


def test_a_queued_turn_is_searchable_before_the_store_has_it(
    make_vector: MakeVector, monkeypatch: pytest.MonkeyPatch, writer_idle: None
) -> None:
    memory = make_vector(namespace=("u1", "chat"), session_id="s1")
    memory.save_context({"input": "warm up"}, {"output": "ok"})  # loads the index
    memory.flush()
    gate = Gate(memory, monkeypatch)
    memory.save_context({"input": "my dog is called Rex"}, {"output": "nice"})
    assert gate.entered.wait(30)  # the writer is inside Chroma's write, held
    assert memory.store.count("u1/chat") == 1 and memory.pending() == 1
    before = memory.search("dog Rex", k=2)
    assert before[0].text == "input: my dog is called Rex\noutput: nice"
    assert before[0].metadata["namespace"] == "u1/chat"
    assert (before[0].metadata["session"], before[0].metadata["turn"]) == ("s1", 1)
    gate.opened.set()
    memory.flush()
    assert memory.pending() == 0 and memory.store.count("u1/chat") == 2
    after = memory.search("dog Rex", k=2)
    assert [(r.id, r.text) for r in after] == [(r.id, r.text) for r in before]
    for stored, queued in zip(after, before, strict=True):
        # Chroma may round the float timestamp in its last bit.
        assert stored.metadata == {
            **queued.metadata,
            "timestamp": pytest.approx(queued.metadata["timestamp"]),
        }
    assert [r.score for r in after] == pytest.approx([r.score for r in before], abs=1e-5)


def test_a_turn_written_while_a_search_reads_the_store_is_found_as_after(
    make_vector: MakeVector, monkeypatch: pytest.MonkeyPatch, writer_idle: None
) -> None:
    """The writer stores a queued turn, and drops it from the pending ones, in the middle
    of a search: the search still finds it by its embedding (it lost it, under load)."""
    memory = make_vector(namespace="mid-search")
    memory.save_context({"input": "warm up"}, {"output": "ok"})
    memory.flush()
    gate = Gate(memory, monkeypatch)
    memory.save_context({"input": "my dog is called Rex"}, {"output": "nice"})
    assert gate.entered.wait(30)  # queued and pending, not in the store yet
    nearest = memory.store.nearest

    def writer_finishes_meanwhile(*args: Any, **kwargs: Any) -> Any:
        found = nearest(*args, **kwargs)
        gate.opened.set()
        assert background_writer().flush(timeout=30)
        return found

    monkeypatch.setattr(memory.store, "nearest", writer_finishes_meanwhile)
    during = memory.search("dog Rex", k=2)
    assert memory.pending() == 0
    monkeypatch.setattr(memory.store, "nearest", nearest)
    after = memory.search("dog Rex", k=2)
    assert [(r.id, r.text) for r in during] == [(r.id, r.text) for r in after]
    assert [r.score for r in during] == pytest.approx([r.score for r in after], abs=1e-5)


def test_background_and_sync_rank_alike(make_vector: MakeVector, writer_idle: None) -> None:
    background = make_vector(namespace="bg")
    sync = make_vector(namespace="sync", write="sync")
    for memory in (background, sync):
        memory.save_context({"input": "warm up"}, {"output": "ok"})
    for human, ai in TURNS:
        for memory in (background, sync):
            memory.save_context({"input": human}, {"output": ai})
        # Searched straight away, while the background turns may still be queued.
        for query in ("dog", "cello Sundays", "where does my sister live"):
            got = [(r.text, r.metadata["turn"], r.score) for r in background.search(query, k=3)]
            want = [(r.text, r.metadata["turn"], r.score) for r in sync.search(query, k=3)]
            assert [g[:2] for g in got] == [w[:2] for w in want]
            assert [g[2] for g in got] == pytest.approx([w[2] for w in want], abs=1e-5)


def test_a_failed_background_write_is_logged_reported_and_raised_next(
    make_vector: MakeVector,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    writer_idle: None,
) -> None:
    memory = make_vector(namespace="failing")
    memory.save_context({"input": "warm up"}, {"output": "ok"})
    memory.flush()

    def broken(*args: object, **kwargs: object) -> None:
        raise BackendUnavailableError("disk gone")

    monkeypatch.setattr(memory.store, "upsert", broken)
    failed_before = background_writer().status().failed
    with caplog.at_level(logging.ERROR, logger="memories.kernel.background"):
        memory.save_context({"input": "keep me"}, {"output": "ok"})  # queued: no error yet
        background_writer().flush()
    assert "background job" in caplog.text and "disk gone" in caplog.text
    status = memory.status()
    assert isinstance(status, VectorStatus)
    assert status.pending == 1 and status.write == "background"
    assert status.last_error is not None and "disk gone" in status.last_error
    assert status.failed_at is not None
    assert status.background is not None and status.background.failed > failed_before
    # The next call that needs the store retries, and raises while it still fails.
    with pytest.raises(BackendUnavailableError, match="outbox"):
        memory.search("keep me")
    monkeypatch.undo()
    assert memory.flush() is True and memory.pending() == 0
    assert memory.status().last_error is None
    assert memory.search("keep me", k=1)[0].text == "input: keep me\noutput: ok"


def test_a_write_put_off_by_the_writer_is_still_counted_as_the_memorys(
    make_vector: MakeVector, monkeypatch: pytest.MonkeyPatch, writer_idle: None
) -> None:
    """A write less than ``_WRITE_INTERVAL`` after the last is put off and scheduled again:
    that job, run outside the save's operation, embedded turns counted nowhere."""
    import memories.stores.vector.chroma_backend as module

    monkeypatch.setattr(module, "_WRITE_INTERVAL", 60.0)
    memory = make_vector(namespace="put-off")
    memory.save_context({"input": "warm up"}, {"output": "ok"})  # written now: the next waits
    backend, entered, opened = memory.backend, threading.Event(), threading.Event()
    embed = backend._embed_pending

    def embed_then_hold() -> None:
        embed()
        entered.set()
        assert opened.wait(30), "the test never let the writer go on"

    monkeypatch.setattr(backend, "_embed_pending", embed_then_hold)
    memory.save_context({"input": "my dog is called Rex"}, {"output": "nice"})
    assert entered.wait(30)  # the writer has embedded it and is held
    memory.save_context({"input": "my sister lives in Oslo"}, {"output": "nice city"})
    backend._lane.wrote_at = float("-inf")  # the write scheduled again runs at once
    opened.set()
    assert background_writer().flush(timeout=30) and memory.pending() == 0
    assert memory.usage().total("embedding").calls == memory.embedder.calls


def test_clear_removes_turns_still_queued(make_vector: MakeVector, writer_idle: None) -> None:
    memory = make_vector(namespace="cleared")
    memory.save_context({"input": "warm up"}, {"output": "ok"})
    _save_all(memory)
    memory.clear()
    background_writer().flush()
    assert memory.search("dog cello sister") == []
    assert memory.pending() == 0 and memory.store.count("cleared") == 0


def test_close_writes_what_waits_and_later_saves_are_synchronous(
    make_vector: MakeVector, writer_idle: None
) -> None:
    memory = make_vector(namespace="closing")
    memory.save_context({"input": "warm up"}, {"output": "ok"})
    _save_all(memory)
    memory.close()
    assert memory.pending() == 0 and memory.store.count("closing") == 1 + len(TURNS)
    memory.save_context({"input": "after close"}, {"output": "ok"})
    assert memory.store.count("closing") == 2 + len(TURNS)


def test_a_progress_bar_that_cannot_start_leaves_the_namespace_writable(
    make_vector: MakeVector, monkeypatch: pytest.MonkeyPatch, writer_idle: None
) -> None:
    import tqdm.auto

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no terminal for the bar")

    memory = make_vector(namespace="no-bar")
    with monkeypatch.context() as patched:
        patched.setattr(tqdm.auto, "tqdm", broken)
        with pytest.raises(RuntimeError, match="no terminal"):
            memory.add(["a fact about tea"], progress=True)
    assert memory.flush(timeout=5)  # the drain's lane was let go
    assert memory.store.count("no-bar") == 1


def test_a_writer_that_falls_behind_makes_saves_synchronous(
    make_vector: MakeVector, monkeypatch: pytest.MonkeyPatch, writer_idle: None
) -> None:
    import memories.stores.vector.chroma_backend as module

    monkeypatch.setattr(module, "_MAX_QUEUED", 0)
    memory = make_vector(namespace="bounded")
    for i, (human, ai) in enumerate(TURNS, start=1):
        memory.save_context({"input": human}, {"output": ai})
        assert memory.store.count("bounded") == i


def test_a_queued_turn_stays_in_its_namespace(
    make_vector: MakeVector, monkeypatch: pytest.MonkeyPatch, writer_idle: None
) -> None:
    mine, theirs = make_vector(namespace="mine"), make_vector(namespace="theirs")
    for memory in (mine, theirs):
        memory.save_context({"input": "warm up"}, {"output": "ok"})
        memory.flush()
    gate = Gate(mine, monkeypatch)
    mine.save_context({"input": "secret plan"}, {"output": "ok"})
    assert gate.entered.wait(30)
    assert [r.text for r in mine.search("secret plan", k=1)] == ["input: secret plan\noutput: ok"]
    assert all("secret" not in r.text for r in theirs.search("secret plan", k=5))
    gate.opened.set()


def test_a_normal_exit_writes_what_the_background_writer_queued(tmp_path: Path) -> None:
    """Issue 10, item 7: MiniLM's thread pool refused the exit-time writes; turns stayed queued."""
    script = (
        "import sys\n"
        "from memories import VectorMemory\n"
        "memory = VectorMemory(path=sys.argv[1], namespace='exit', write='background')\n"
        "for i in range(120):\n"
        "    memory.save_context({'input': f'turn {i}: I went to place {i}'}, {'output': 'ok'})\n"
        "print(memory.pending())\n"
    )
    store = tmp_path / "store"
    done = python("-c", script, str(store), cwd=tmp_path, timeout=300)
    assert int(done.stdout.strip()) > 0  # the process exited with turns still queued
    assert "cannot schedule new futures" not in done.stderr
    reopened = VectorMemory(path=str(store), namespace="exit", write="sync")
    assert reopened.pending() == 0
    assert len(reopened.search("place", k=200)) == 120


# -- issue 24: closing with queued writes, and a store folder deleted under a memory ------

WORDS = "tests.vector.conftest:WordEmbeddings"


def _on_disk(tmp_path: Path, **options: Any) -> VectorMemory:
    return VectorMemory(path=str(tmp_path / "store"), embeddings=WORDS, **options)


def test_close_with_writes_the_store_refuses_says_once_where_they_wait(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    writer_idle: None,
) -> None:
    memory = _on_disk(tmp_path, namespace="refused")
    memory.save_context({"input": "warm up"}, {"output": "ok"})
    memory.flush()

    def broken(*args: object, **kwargs: object) -> None:
        raise BackendUnavailableError("disk gone")

    monkeypatch.setattr(memory.store, "upsert", broken)
    with caplog.at_level(logging.WARNING):
        memory.save_context({"input": "keep me"}, {"output": "ok"})  # queued: no error yet
        background_writer().flush()
        assert memory.close() is False  # says so, raises nothing
    outbox = str(tmp_path / "store" / "memories-outbox.db")
    said = [r for r in caplog.records if r.name == "memories.stores.vector.chroma_backend"]
    assert len(said) == 1 and outbox in said[0].getMessage()
    assert "document(s) of namespace ('refused',) wait" in said[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]  # no traceback anywhere
    # The outbox kept the turns: once the store works, they are written.
    monkeypatch.undo()
    assert memory.pending() == 1 and memory.flush() is True
    assert memory.store.count("refused") == 2


def test_a_store_folder_deleted_under_a_memory_fails_with_one_clear_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, writer_idle: None
) -> None:
    memory = _on_disk(tmp_path, namespace="deleted", write="sync")
    memory.save_context({"input": "warm up"}, {"output": "ok"})
    shutil.rmtree(tmp_path / "store")
    with pytest.raises(BackendUnavailableError, match="is gone") as caught:
        memory.save_context({"input": "lost?"}, {"output": "no: refused"})
    assert str(tmp_path / "store") in str(caught.value)
    assert "memory.close()" in str(caught.value)  # what to do
    with caplog.at_level(logging.WARNING):
        assert memory.close() is False
    (said,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "is gone" in said.getMessage() and not said.exc_info


def test_a_background_write_into_a_deleted_folder_is_one_clear_line_and_raised_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, writer_idle: None
) -> None:
    """The demo's case, with the outbox elsewhere so that it keeps the turn."""
    outbox = str(tmp_path / "outbox.db")
    memory = _on_disk(tmp_path, namespace="deleted-bg", outbox=outbox)
    memory.save_context({"input": "warm up"}, {"output": "ok"})
    memory.flush()
    shutil.rmtree(tmp_path / "store")
    with caplog.at_level(logging.DEBUG, logger="memories"):
        memory.save_context({"input": "keep me"}, {"output": "ok"})  # queued
        background_writer().flush()
    (said,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "is gone" in said.getMessage() and str(tmp_path / "store") in said.getMessage()
    assert f"wait in the outbox ({outbox})" in said.getMessage() and not said.exc_info
    assert memory.pending() == 1  # the outbox keeps the turn
    with pytest.raises(BackendUnavailableError, match="is gone"):
        memory.search("keep me")


def test_a_search_for_more_results_than_candidates_takes_k_from_each_ranker(
    tmp_path: Path,
) -> None:
    # Exchanges neither lend nor borrow, so nothing outside the rankers' lists is reached:
    # those lists must hold k candidates, not only RecallConfig.candidates.
    memory = _on_disk(tmp_path, recall={"candidates": 5})
    for i in range(12):
        memory.save_context({"input": f"I went to place {i}"}, {"output": "ok"})
    assert len(memory.search("place", k=10)) == 10
