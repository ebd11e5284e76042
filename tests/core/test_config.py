"""Building memories from dicts and files, and describing them back."""

from __future__ import annotations

from pathlib import Path

import pytest

from memories import (
    BufferMemory,
    CombinedMemory,
    ConfigError,
    MissingDependencyError,
    ReadOnlySharedMemory,
    SimpleMemory,
    SQLiteHistory,
    TokenBufferMemory,
    WindowMemory,
    create_memory,
    register_memory,
)
from memories.core.config import MEMORY_TYPES
from memories.kernel.imports import INSTALL_COMMANDS


def test_dict_config_builds_the_named_memory(tmp_path: Path) -> None:
    memory = create_memory(
        {
            "type": "token_buffer",
            "max_token_limit": 300,
            "token_counter": "chars",
            "memory_key": "chat",
            "history": {"type": "sqlite", "path": str(tmp_path / "c.db"), "session_id": "u1"},
        }
    )
    assert isinstance(memory, TokenBufferMemory)
    assert memory.max_token_limit == 300 and memory.memory_key == "chat"
    assert isinstance(memory.chat_memory, SQLiteHistory)
    assert memory.chat_memory.session_id == "u1"


def test_yaml_and_toml_files_build_equal_memories(tmp_path: Path) -> None:
    yaml_file = tmp_path / "memory.yaml"
    yaml_file.write_text("type: window\nk: 3\nreturn_messages: true\n")
    toml_file = tmp_path / "memory.toml"
    toml_file.write_text('[memory]\ntype = "window"\nk = 3\nreturn_messages = true\n')
    from_yaml, from_toml = create_memory(yaml_file), create_memory(str(toml_file))
    assert isinstance(from_yaml, WindowMemory)
    assert (
        from_yaml.to_config()
        == from_toml.to_config()
        == {
            "type": "window",
            "k": 3,
            "return_messages": True,
        }
    )


def test_swapping_the_type_swaps_the_class() -> None:
    for type_name, cls in [("buffer", BufferMemory), ("window", WindowMemory)]:
        assert type(create_memory({"type": type_name})) is cls


@pytest.mark.parametrize(
    "memory",
    [
        BufferMemory(memory_key="chat", human_prefix="User"),
        WindowMemory(k=7, input_key="question"),
        TokenBufferMemory(max_token_limit=123, token_counter="tiktoken:cl100k_base"),
        SimpleMemory(memories={"persona": "a pirate"}),
        CombinedMemory(memories=[BufferMemory(memory_key="a"), WindowMemory(memory_key="b", k=1)]),
        ReadOnlySharedMemory(memory=WindowMemory(k=2)),
    ],
    ids=lambda m: type(m).__name__,
)
def test_to_config_round_trips(memory: object) -> None:
    config = memory.to_config()  # type: ignore[attr-defined]
    rebuilt = create_memory(config)
    assert type(rebuilt) is type(memory)
    assert rebuilt.to_config() == config


def test_sqlite_history_config_round_trips(tmp_path: Path) -> None:
    memory = BufferMemory(chat_memory=SQLiteHistory(tmp_path / "x.db", session_id="s9"))
    config = memory.to_config()
    assert config["chat_memory"] == {
        "type": "sqlite",
        "path": str(tmp_path / "x.db"),
        "session_id": "s9",
    }
    assert create_memory(config).to_config() == config


def test_unknown_type_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        create_memory({"type": "bufer"})
    message = str(info.value)
    assert "'bufer'" in message
    for name in ("buffer", "token_buffer", "window"):
        assert name in message


def test_missing_type_is_an_error() -> None:
    """Issue 16: it said "Unknown memory type None"."""
    with pytest.raises(ConfigError, match="A memory config needs a 'type': one of buffer"):
        create_memory({"k": 3})


def test_a_history_on_a_memory_without_one_says_so() -> None:
    """Issue 16: it said "chat_memory: Extra inputs are not permitted"."""
    config = {"type": "vector", "mode": "memory", "history": {"type": "memory"}}
    with pytest.raises(ConfigError, match=r"'vector' memory keeps no chat history.*'combined'"):
        create_memory(config)


def test_runnables_middlewares_and_nodes_say_what_they_wrap() -> None:
    """Issue 16: default reprs, and two memory middlewares colliding on one default name."""
    from langchain_core.runnables import RunnableLambda
    from memories.integrations.agents import MemoryMiddleware
    from memories.integrations.langgraph_nodes import MemoryNodes

    from memories import with_memory

    chain = with_memory(RunnableLambda(lambda x: x), BufferMemory())
    assert repr(chain) == "with_memory(RunnableLambda(lambda x: x))"
    assert repr(MemoryNodes(BufferMemory())).startswith("MemoryNodes(BufferMemory(")
    from memories import memory_factory

    names = {
        MemoryMiddleware(BufferMemory()).name,
        MemoryMiddleware(WindowMemory(memory_key="recent")).name,
        MemoryMiddleware(memory_factory({"type": "window", "memory_key": "chat"})).name,
    }
    assert names == {
        "MemoryMiddleware[history]",
        "MemoryMiddleware[recent]",
        "MemoryMiddleware[chat]",
    }


def test_bad_option_names_the_option() -> None:
    with pytest.raises(ConfigError, match="max_tokens"):
        create_memory({"type": "token_buffer", "max_tokens": 10})
    with pytest.raises(ConfigError, match="k: Input should be greater than or equal to 0"):
        create_memory({"type": "window", "k": -2})


def test_bad_history_config_is_reported() -> None:
    with pytest.raises(ConfigError, match="Unknown history type 'redis'"):
        create_memory({"type": "buffer", "history": {"type": "redis"}})
    with pytest.raises(ConfigError, match="either 'history' or 'chat_memory'"):
        create_memory({"type": "buffer", "history": {"type": "memory"}, "chat_memory": {}})


def test_missing_file_and_bad_file_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        create_memory(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("type: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid"):
        create_memory(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        create_memory(listed)
    ini = tmp_path / "memory.ini"
    ini.write_text("[x]")
    with pytest.raises(ConfigError, match="unknown extension"):
        create_memory(ini)


def test_missing_optional_dependency_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(MEMORY_TYPES, "exotic", ("no_such_module_xyz", "Exotic"))
    monkeypatch.setitem(INSTALL_COMMANDS, "no_such_module_xyz", "pip install exotic")
    with pytest.raises(MissingDependencyError, match="pip install exotic"):
        create_memory({"type": "exotic"})


def test_register_memory_adds_a_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memories.core.config.MEMORY_TYPES", dict(MEMORY_TYPES))
    register_memory("mine", "memories.short_term.buffer", "BufferMemory")
    assert isinstance(create_memory({"type": "mine"}), BufferMemory)


def test_combined_memory_rejects_shared_variables() -> None:
    with pytest.raises(
        ValueError, match=r"same variables \{'history'\} are found in multiplememory"
    ):
        CombinedMemory(memories=[BufferMemory(), WindowMemory()])


def test_combined_members_find_the_input_without_input_key() -> None:
    combined = CombinedMemory(
        memories=[BufferMemory(memory_key="full"), WindowMemory(memory_key="recent", k=1)]
    )
    for q in ("one", "two"):
        variables = combined.load_memory_variables({"input": q})
        combined.save_context({"input": q, **variables}, {"output": q.upper()})
    loaded = combined.load_memory_variables({})
    assert loaded == {
        "full": "Human: one\nAI: ONE\nHuman: two\nAI: TWO",
        "recent": "Human: two\nAI: TWO",
    }


def test_read_only_memory_never_writes() -> None:
    shared = BufferMemory()
    shared.save_context({"input": "q"}, {"output": "a"})
    read_only = ReadOnlySharedMemory(memory=shared)
    read_only.save_context({"input": "other"}, {"output": "x"})
    read_only.clear()
    assert read_only.load_memory_variables({}) == {"history": "Human: q\nAI: a"}


def test_direct_construction_and_assignment_raise_config_errors() -> None:
    with pytest.raises(
        ConfigError,
        match=r"Bad options for WindowMemory: k: Input should be greater than or equal to 0, "
        r"got -1",
    ):
        WindowMemory(k=-1)
    memory = TokenBufferMemory()
    with pytest.raises(ConfigError, match=r"TokenBufferMemory\.max_token_limit"):
        memory.max_token_limit = 0
    assert memory.max_token_limit == 2000


def test_relative_paths_in_a_config_file_mean_next_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 10, item 13: they were resolved from the current directory, quietly."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    config = folder / "chat.yaml"
    config.write_text(
        "type: combined\n"
        "memories:\n"
        "  - {type: buffer, history: {type: sqlite, path: chat.db, session_id: s}}\n"
        "  - {type: profile, policy: manual, memory_key: p, url: 'sqlite:///profiles.db'}\n",
        encoding="utf-8",
    )
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    memory = create_memory(config)
    memory.save_context({"input": "hi"}, {"output": "hello"})
    assert (folder / "chat.db").is_file() and (folder / "profiles.db").is_file()
    assert list(here.iterdir()) == []
    assert create_memory(str(config)).load_memory_variables({})["history"] == "Human: hi\nAI: hello"


def test_a_history_type_that_is_not_a_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"Unknown history type \['sqlite'\]"):
        create_memory({"type": "buffer", "history": {"type": ["sqlite"]}})
