"""Per-session factories never let one user read another's long-term memories (issue 10, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import ConfigurableFieldSpec, RunnableLambda

from memories import ConfigError, create_memory, memory_factory, with_memory
from memories.faces.runnable import SessionMemories

VECTOR = {
    "type": "vector",
    "mode": "memory",
    "k": 1,
    "write": "sync",
    "embeddings": "tests.vector.conftest:WordEmbeddings",
}


def _collection(tmp_path: Path) -> str:
    return "c" + str(abs(hash(tmp_path)))[:10]


def test_the_reproducer_a_shared_default_namespace_is_refused() -> None:
    """On the first wave this factory was accepted and bob recalled alice's PIN."""
    with pytest.raises(ConfigError, match="read the others' memories"):
        memory_factory(VECTOR)


def test_a_profile_without_a_template_is_refused_too(tmp_path: Path) -> None:
    config = {"type": "profile", "policy": "manual", "url": f"sqlite:///{tmp_path / 'p.db'}"}
    with pytest.raises(ConfigError, match="shared: true"):
        memory_factory(config)


def test_a_nested_long_term_memory_is_checked(tmp_path: Path) -> None:
    config = {"type": "combined", "memories": [{"type": "buffer"}, {**VECTOR, "memory_key": "v"}]}
    with pytest.raises(ConfigError, match="'vector' memory"):
        memory_factory(config)


def test_a_user_template_keeps_users_apart(tmp_path: Path) -> None:
    make = memory_factory(
        {**VECTOR, "collection": _collection(tmp_path), "namespace": ["users", "{user_id}"]}
    )
    assert make.fields == ("user_id",)
    make("s1", user_id="alice").save_context({"input": "My bank PIN is 4242"}, {"output": "ok"})
    bob = make("s2", user_id="bob")
    assert bob.namespace == ("users", "bob")
    assert "4242" not in str(bob.load_memory_variables({"input": "what is my PIN?"}))
    alice_later = make("s3", user_id="alice")
    assert "4242" in str(alice_later.load_memory_variables({"input": "what is my PIN?"}))


def test_a_session_template_scopes_by_session(tmp_path: Path) -> None:
    make = memory_factory(
        {**VECTOR, "collection": _collection(tmp_path), "namespace": "chats.{session_id}"}
    )
    assert make.fields == ()
    make("s1").save_context({"input": "the code word is tulip"}, {"output": "ok"})
    assert "tulip" not in str(make("s2").load_memory_variables({"input": "code word"}))
    assert make("s2").namespace == ("chats", "s2")


def test_sharing_on_purpose_must_be_spelled_out(tmp_path: Path) -> None:
    make = memory_factory({**VECTOR, "collection": _collection(tmp_path), "shared": True})
    make("s1").save_context({"input": "the office opens at nine"}, {"output": "ok"})
    assert "nine" in str(make("s2").load_memory_variables({"input": "office opens"}))


@pytest.mark.parametrize(
    ("fields", "message"),
    [({}, "needs 'user_id'"), ({"user_id": "a.b"}, "without '.'"), ({"user_id": ""}, "user_id")],
)
def test_a_missing_or_bad_field_is_a_clear_error(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    make = memory_factory({**VECTOR, "namespace": ["users", "{user_id}"]})
    with pytest.raises(ConfigError, match=message):
        make("s1", **fields)


def test_create_memory_refuses_an_unfilled_template() -> None:
    with pytest.raises(ConfigError, match="is a template"):
        create_memory({**VECTOR, "namespace": ["users", "{user_id}"]})


def test_with_memory_fills_the_template_from_the_run_config(tmp_path: Path) -> None:
    make = memory_factory(
        {**VECTOR, "collection": _collection(tmp_path), "namespace": ["users", "{user_id}"]}
    )
    echo = RunnableLambda(lambda inputs: f"recalled: {inputs['history']}")
    chain = with_memory(echo, make)
    alice = {"configurable": {"session_id": "t1", "user_id": "alice"}}
    bob = {"configurable": {"session_id": "t2", "user_id": "bob"}}
    chain.invoke({"input": "my dog is called Rex"}, config=alice)
    assert "Rex" not in chain.invoke({"input": "what is my dog called?"}, config=bob)
    again = {"configurable": {"session_id": "t3", "user_id": "alice"}}
    assert "Rex" in chain.invoke({"input": "what is my dog called?"}, config=again)
    with pytest.raises(ConfigError, match="user_id"):
        chain.invoke({"input": "hi"}, config={"configurable": {"session_id": "t4"}})


def test_sessions_of_one_id_but_two_users_get_two_memories(tmp_path: Path) -> None:
    make = memory_factory(
        {**VECTOR, "collection": _collection(tmp_path), "namespace": ["users", "{user_id}"]}
    )
    sessions = SessionMemories(make, "session_id")
    first = sessions.get({"configurable": {"session_id": "same", "user_id": "alice"}})
    second = sessions.get({"configurable": {"session_id": "same", "user_id": "bob"}})
    assert first is not second
    assert first.namespace != second.namespace  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("held", "invalid"),
    [
        ({"session_id": "s1", "user_id": "None"}, {"session_id": "s1"}),
        ({"session_id": "s1", "user_id": "7"}, {"session_id": "s1", "user_id": 7}),
        ({"session_id": "7", "user_id": "u1"}, {"session_id": 7, "user_id": "u1"}),
    ],
    ids=["no-user-vs-user-named-None", "int-vs-string-user", "int-vs-string-session"],
)
def test_a_run_with_a_bad_field_never_gets_a_cached_memory(
    tmp_path: Path, held: dict[str, Any], invalid: dict[str, Any]
) -> None:
    # The cache is keyed by the fields as given: a run missing user_id is refused as it
    # is with an empty cache, never handed the memory of a user whose id is "None".
    make = memory_factory(
        {**VECTOR, "collection": _collection(tmp_path), "namespace": ["users", "{user_id}"]}
    )
    sessions = SessionMemories(make, "session_id")
    sessions.get({"configurable": held})
    with pytest.raises(ConfigError):
        sessions.get({"configurable": invalid})


def _fields(*names: str) -> list[ConfigurableFieldSpec]:
    return [ConfigurableFieldSpec(id=name, annotation=str) for name in names]


def test_with_memory_takes_a_templates_field_among_its_session_fields(tmp_path: Path) -> None:
    # LangChain's history_factory_config names user_id too: the template reads it from there.
    make = memory_factory(
        {**VECTOR, "collection": _collection(tmp_path), "namespace": ["users", "{user_id}"]}
    )
    echo = RunnableLambda(lambda inputs: f"recalled: {inputs['history']}")
    chain = with_memory(echo, make, history_factory_config=_fields("session_id", "user_id"))
    alice = {"configurable": {"session_id": "t1", "user_id": "alice"}}
    chain.invoke({"input": "my dog is called Rex"}, config=alice)
    bob = {"configurable": {"session_id": "t2", "user_id": "bob"}}
    assert "Rex" not in chain.invoke({"input": "what is my dog called?"}, config=bob)
    again = {"configurable": {"session_id": "t3", "user_id": "alice"}}
    assert "Rex" in chain.invoke({"input": "what is my dog called?"}, config=again)


def test_a_configs_factory_with_several_session_fields_keeps_the_session_id(
    tmp_path: Path,
) -> None:
    history = {"type": "sqlite", "path": str(tmp_path / "chat.db")}
    make = memory_factory({"type": "window", "k": 2, "history": history})
    fields = _fields("session_id", "user_id")
    chain = with_memory(RunnableLambda(lambda _: "ok"), make, history_factory_config=fields)
    chain.invoke("hi", config={"configurable": {"session_id": "s1", "user_id": "ada"}})
    assert [m.text for m in make("s1").chat_memory.messages] == ["hi", "ok"]
    fields = _fields("user_id", "thread")
    without = with_memory(RunnableLambda(lambda _: "ok"), make, history_factory_config=fields)
    with pytest.raises(ConfigError, match="session_id must be a non-empty string"):
        without.invoke("hi", config={"configurable": {"user_id": "ada", "thread": "t1"}})
