"""Client/server mode against a real `chroma run` on loopback: storing, and a server that dies."""

from __future__ import annotations

import uuid

import pytest

from memories import BackendUnavailableError, VectorMemory, create_memory
from memories.kernel.namespaces import namespace_key
from memories.stores.vector.writes import background_writer
from tests.vector.conftest import ChromaServer, free_port

pytestmark = pytest.mark.server


def _memory(server: ChromaServer, tmp_path_outbox: str, **options: object) -> VectorMemory:
    options.setdefault("collection", f"srv{uuid.uuid4().hex[:8]}")
    return VectorMemory(
        mode="http",
        host="127.0.0.1",
        port=server.port,
        outbox=tmp_path_outbox,
        embeddings="tests.vector.conftest:WordEmbeddings",
        **options,  # type: ignore[arg-type]
    )


def test_turns_go_to_the_server_and_back(chroma_server: ChromaServer, tmp_path) -> None:
    memory = _memory(chroma_server, str(tmp_path / "outbox.db"), namespace=("u1", "chat"))
    memory.save_context({"input": "my dog is Rex"}, {"output": "nice"})
    memory.save_context({"input": "I live in Lyon"}, {"output": "lovely"})
    assert memory.search("dog Rex", k=1)[0].text == "input: my dog is Rex\noutput: nice"
    # Another client (as another process or host would be) sees the same documents.
    other = create_memory(memory.to_config())
    assert {r.text for r in other.search("Lyon", k=5)} == {
        "input: my dog is Rex\noutput: nice",
        "input: I live in Lyon\noutput: lovely",
    }
    memory.clear()
    assert memory.search("dog") == []


@pytest.mark.parametrize("write", ["sync", "background"])
def test_a_server_that_is_down_loses_nothing(
    chroma_server: ChromaServer, tmp_path, write: str
) -> None:
    memory = _memory(chroma_server, str(tmp_path / "outbox.db"), namespace="durable", write=write)
    memory.save_context({"input": "before the outage"}, {"output": "stored"})
    memory.flush()
    chroma_server.stop()
    try:
        if write == "sync":
            with pytest.raises(BackendUnavailableError) as info:
                memory.save_context({"input": "during the outage"}, {"output": "queued"})
        else:
            # Queued at once; the background write fails, and flush() says so.
            memory.save_context({"input": "during the outage"}, {"output": "queued"})
            with pytest.raises(BackendUnavailableError) as info:
                memory.flush()
        message = str(info.value)
        assert f"127.0.0.1:{chroma_server.port}" in message and "chroma run" in message
        assert "outbox" in message and "flush()" in message
        assert memory.pending() == 1
        status = memory.status()
        assert status.pending == 1 and status.write == write
        assert status.last_error is not None and "cannot be reached" in status.last_error
        with pytest.raises(BackendUnavailableError):
            memory.search("outage")
        # A restarted process finds the queued turn in the outbox file.
        assert create_memory(memory.to_config()).pending() == 1
    finally:
        chroma_server.start()
    assert memory.flush() is True and memory.pending() == 0
    assert memory.pending() == 0 and memory.status().last_error is None
    texts = {r.text for r in memory.search("outage", k=5)}
    assert texts == {
        "input: before the outage\noutput: stored",
        "input: during the outage\noutput: queued",
    }
    turns = sorted(r.metadata["turn"] for r in memory.search("outage", k=5))
    assert turns == [0, 1]


def test_after_a_failed_background_write_saves_raise_until_the_server_is_back(
    chroma_server: ChromaServer, tmp_path
) -> None:
    memory = _memory(chroma_server, str(tmp_path / "outbox.db"), namespace="degraded")
    memory.save_context({"input": "first"}, {"output": "ok"})
    memory.flush()
    chroma_server.stop()
    try:
        memory.save_context({"input": "second"}, {"output": "queued"})
        background_writer().flush()  # let the background write fail
        assert memory.status().last_error is not None
        # The next save retries in the caller's thread, so the outage is raised there.
        with pytest.raises(BackendUnavailableError, match="outbox"):
            memory.save_context({"input": "third"}, {"output": "queued"})
        assert memory.pending() == 2
    finally:
        chroma_server.start()
    memory.save_context({"input": "fourth"}, {"output": "written"})  # retries, then works
    assert memory.pending() == 0 and memory.status().last_error is None
    assert len(memory.search("first second third fourth", k=10)) == 4


def test_the_next_call_writes_what_waited(chroma_server: ChromaServer, tmp_path) -> None:
    memory = _memory(chroma_server, str(tmp_path / "outbox.db"), namespace="drain")
    chroma_server.stop()
    try:
        with pytest.raises(BackendUnavailableError):
            memory.save_context({"input": "queued while down"}, {"output": "ok"})
    finally:
        chroma_server.start()
    memory.save_context({"input": "after restart"}, {"output": "ok"})
    assert memory.pending() == 0
    assert len(memory.search("queued restart", k=5)) == 2


def test_no_server_at_all_is_a_clear_error(tmp_path) -> None:
    memory = VectorMemory(
        mode="http",
        host="127.0.0.1",
        port=free_port(),
        outbox=str(tmp_path / "outbox.db"),
        embeddings="tests.vector.conftest:WordEmbeddings",
    )
    with pytest.raises(BackendUnavailableError, match="cannot be reached"):
        memory.save_context({"input": "hello"}, {"output": "hi"})
    assert memory.pending() == 1


def test_a_hung_server_gives_up_within_the_timeout(chroma_server: ChromaServer, tmp_path) -> None:
    """Issue 10, item 6: with the server stopped (SIGSTOP), search() blocked for over 100 s."""
    import os
    import signal
    import time

    memory = _memory(
        chroma_server, str(tmp_path / "outbox.db"), namespace="hung", write="sync", timeout=1.0
    )
    memory.save_context({"input": "my dog is Rex"}, {"output": "nice"})
    assert chroma_server.process is not None
    pid = chroma_server.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(BackendUnavailableError):
            fresh = _memory(chroma_server, str(tmp_path / "o2.db"), namespace="hung", timeout=1.0)
            fresh.store.count(namespace_key(fresh.namespace))
        with pytest.raises(BackendUnavailableError):
            memory.save_context({"input": "and a cat"}, {"output": "ok"})
        assert time.monotonic() - started < 60  # bounded: without a timeout this never returns
    finally:
        os.kill(pid, signal.SIGCONT)
    assert memory.flush() is True and memory.pending() == 0
