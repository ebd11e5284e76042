from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from memories import ProfileMemory, create_memory
from memories.errors import (
    ConfigError,
    InvalidInputError,
    InvalidProfileError,
    MissingDependencyError,
)
from memories.kernel.tokens import CharCounter
from tests.profile.fakes import USER_SCHEMA, ScriptedChatModel, prompt_text, tool_reply

NAME = {"op": "add", "path": "/name", "value": "Ada"}
AGE = {"op": "add", "path": "/age", "value": 36}
TURN = ({"input": "I'm Ada, 36."}, {"output": "Nice to meet you, Ada."})


def make(url: str, replies: list[Any], **options: Any) -> tuple[ProfileMemory, ScriptedChatModel]:
    model = ScriptedChatModel(replies=replies, tool_calling=options.pop("tools", True))
    options.setdefault("schema", USER_SCHEMA)
    return ProfileMemory(llm=model, url=url, namespace=("user-1",), **options), model


# -- updating from conversation ---------------------------------------------------


def test_a_turn_updates_the_profile_through_the_patch_tool(url: str) -> None:
    memory, model = make(url, [tool_reply(NAME, AGE)])
    memory.save_context(*TURN)
    assert memory.get() == {"likes": [], "name": "Ada", "age": 36}
    assert model.bound[0]["tool_choice"] == "update_profile"
    prompt = prompt_text(model.prompts[0])
    assert "Human: I'm Ada, 36." in prompt and '"likes": []' in prompt
    assert "JSON Schema" in prompt and '"minimum":0' in prompt


def test_a_model_without_tools_answers_with_a_bare_array_in_a_fence(url: str) -> None:
    memory, model = make(url, [f"```json\n{json.dumps([NAME])}\n```"], tools=False)
    memory.save_context(*TURN)
    assert memory.get() == {"likes": [], "name": "Ada"}
    assert "Reply with only the JSON array" in prompt_text(model.prompts[0])


def test_an_invalid_patch_is_retried_with_the_validation_error(url: str) -> None:
    bad = {"op": "add", "path": "/age", "value": "thirty-six"}
    memory, model = make(url, [tool_reply(bad, call_id="c1"), tool_reply(AGE, call_id="c2")])
    memory.save_context(*TURN)
    assert memory.get() == {"likes": [], "age": 36}
    retry = model.prompts[1]
    assert isinstance(retry[-1], ToolMessage) and retry[-1].tool_call_id == "c1"
    assert "/age: 'thirty-six' is not of type 'integer'" in str(retry[-1].content)
    (change,) = memory.history()
    assert change.version == 1 and change.patch == (AGE,)


def test_a_path_that_does_not_exist_is_fed_back_in_text_mode(url: str) -> None:
    missing = {"op": "replace", "path": "/job/title", "value": "engineer"}
    memory, model = make(url, [json.dumps([missing]), json.dumps([NAME])], tools=False)
    memory.save_context(*TURN)
    assert memory.get() == {"likes": [], "name": "Ada"}
    feedback = str(model.prompts[1][-1].content)
    assert "operation 0" in feedback and "/job/title" in feedback
    assert isinstance(model.prompts[1][-2], AIMessage)


def test_a_patch_still_invalid_after_the_retries_keeps_the_profile(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    memory, _ = make(url, [tool_reply(NAME)])
    memory.save_context(*TURN)
    junk = "I think the user is called Ada."
    memory2, model2 = make(url, [junk, junk, junk], max_retries=2)
    with caplog.at_level(logging.WARNING, logger="memories.long_term.profile.memory"):
        memory2.save_context({"input": "Call me Bob"}, {"output": "OK Bob"})
    assert len(model2.prompts) == 3
    assert memory2.get() == {"likes": [], "name": "Ada"}
    failure = memory2.history()[-1]
    assert failure.kind == "failed" and failure.version is None
    assert failure.raw == (junk, junk, junk)
    assert "not a JSON array" in (failure.error or "")
    assert failure.turns[0][0].content == "Call me Bob"
    status = memory2.status()
    assert status.pending == 1 and status.last_failure == failure and status.version == 1
    assert "was not updated" in caplog.text


def test_turns_kept_after_a_failure_are_folded_into_the_next_update(url: str) -> None:
    memory, model = make(url, [RuntimeError("rate limited"), tool_reply(NAME)])
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    assert memory.history()[-1].error == "ScriptedChatModel failed: RuntimeError: rate limited"
    memory.save_context({"input": "I like tea"}, {"output": "Noted"})
    prompt = prompt_text(model.prompts[1])
    assert "Human: I'm Ada" in prompt and "Human: I like tea" in prompt
    assert memory.status().pending == 0 and memory.status().last_failure is None
    assert len(memory.history(failures=False)[0].turns) == 2


def test_replacing_the_whole_document_is_refused_and_fed_back(url: str) -> None:
    root = {"op": "replace", "path": "", "value": {"name": "Ada"}}
    memory, model = make(url, [tool_reply(root), tool_reply(NAME)])
    memory.save_context(*TURN)
    assert "whole document" in str(model.prompts[1][-1].content)
    assert memory.get() == {"likes": [], "name": "Ada"}


def test_an_empty_patch_changes_nothing_and_drops_the_turn(url: str) -> None:
    memory, _ = make(url, [tool_reply()])
    memory.save_context(*TURN)
    assert memory.history() == [] and memory.status().pending == 0


def test_removals_by_the_model_are_recorded(url: str) -> None:
    memory, _ = make(url, [tool_reply({"op": "remove", "path": "/name"})])
    memory.put({"name": "Ada", "likes": []})
    memory.save_context({"input": "Forget my name"}, {"output": "Done"})
    assert memory.get() == {"likes": []}
    change = memory.history()[-1]
    assert change.kind == "update" and change.patch == ({"op": "remove", "path": "/name"},)
    assert change.turns[0][0].content == "Forget my name"


# -- policies -------------------------------------------------------------------


def test_every_n_updates_once_per_n_turns(url: str) -> None:
    memory, model = make(url, [tool_reply(NAME)], policy="every_n", every_n=3)
    memory.save_context(*TURN)
    memory.save_context(*TURN)
    assert model.prompts == [] and memory.status().pending == 2
    memory.save_context(*TURN)
    assert len(model.prompts) == 1 and prompt_text(model.prompts[0]).count("Human:") == 3
    assert memory.status().pending == 0


def test_manual_updates_only_on_refresh(url: str) -> None:
    memory, model = make(url, [tool_reply(NAME)], policy="manual")
    memory.save_context(*TURN)
    assert model.prompts == []
    result = memory.refresh()
    assert (result.status, result.version, result.turns) == ("updated", 1, 1)
    assert memory.refresh().status == "idle"


def test_refresh_folds_a_long_queue_in_batches(url: str) -> None:
    replies = [tool_reply(NAME), tool_reply(), tool_reply(AGE)]
    memory, model = make(url, replies, policy="manual", max_turns_per_update=2)
    for _ in range(5):
        memory.save_context(*TURN)
    result = memory.refresh()
    assert [prompt_text(p).count("Human:") for p in model.prompts] == [2, 2, 1]
    assert (result.status, result.version, result.turns) == ("updated", 2, 5)


def test_once_writes_the_first_document_then_freezes_it(url: str) -> None:
    memory, model = make(url, [tool_reply(NAME)], policy="once")
    memory.save_context(*TURN)
    memory.save_context({"input": "Actually I'm Bob"}, {"output": "OK"})
    assert len(model.prompts) == 1
    assert memory.get() == {"likes": [], "name": "Ada"}
    assert memory.status().frozen and memory.status().pending == 0
    assert memory.refresh().status == "frozen"


def test_once_freezes_a_document_the_app_put(url: str) -> None:
    memory, model = make(url, [tool_reply(AGE)], policy="once")
    memory.put({"name": "Ada"})
    memory.save_context(*TURN)
    assert model.prompts == [] and memory.get() == {"name": "Ada"}
    memory.clear()
    memory.save_context(*TURN)
    assert memory.get() == {"likes": [], "age": 36}


def test_several_named_profiles_share_a_namespace_with_their_own_policies(url: str) -> None:
    from memories import CombinedMemory

    sheet_model = ScriptedChatModel(
        replies=[tool_reply({"op": "add", "path": "/class", "value": "rogue"})]
    )
    story_model = ScriptedChatModel(
        replies=[
            tool_reply({"op": "add", "path": "/scene", "value": "tavern"}),
            tool_reply({"op": "replace", "path": "/scene", "value": "forest"}),
        ]
    )
    common = {"url": url, "namespace": ("game-7",)}
    sheet = ProfileMemory(
        key="character", memory_key="character", llm=sheet_model, policy="once", **common
    )
    story = ProfileMemory(key="story", memory_key="story", llm=story_model, **common)
    both = CombinedMemory(memories=[sheet, story])
    both.save_context({"input": "I'm a rogue in a tavern"}, {"output": "Welcome"})
    both.save_context({"input": "I walk to the forest"}, {"output": "Trees"})
    assert both.load_memory_variables({}) == {
        "character": '{"class":"rogue"}',
        "story": '{"scene":"forest"}',
    }
    assert sorted(i.key for i in sheet.store.search(("game-7",))) == ["character", "story"]


# -- direct access, versions and rollback ---------------------------------------


def test_put_and_update_validate_and_record_versions(url: str) -> None:
    memory = ProfileMemory(url=url, schema=USER_SCHEMA, policy="manual")
    assert memory.put({"name": "Ada"}) == 1
    assert memory.update([{"op": "add", "path": "/likes", "value": ["tea"]}]) == 2
    assert memory.update('[{"op": "add", "path": "/likes/-", "value": "cake"}]') == 3
    assert memory.get() == {"name": "Ada", "likes": ["tea", "cake"]}
    assert [(c.version, c.kind) for c in memory.history()] == [
        (1, "put"),
        (2, "patch"),
        (3, "patch"),
    ]
    # The first put is recorded against the schema's defaults, which it dropped.
    assert memory.history()[0].patch == (
        {"op": "remove", "path": "/likes"},
        {"op": "add", "path": "/name", "value": "Ada"},
    )


def test_invalid_direct_writes_raise_and_change_nothing(url: str) -> None:
    memory = ProfileMemory(url=url, schema=USER_SCHEMA, policy="manual")
    memory.put({"name": "Ada"})
    with pytest.raises(InvalidProfileError, match="/age: -1 is less than the minimum"):
        memory.put({"age": -1})
    with pytest.raises(InvalidProfileError, match=r"operation 0 .*cannot be applied"):
        memory.update([{"op": "replace", "path": "/nope/x", "value": 1}])
    with pytest.raises(InvalidProfileError, match="Additional properties"):
        memory.update([{"op": "add", "path": "/nope", "value": 1}])
    with pytest.raises(InvalidProfileError, match="JSON object"):
        memory.put(["not", "a", "dict"])  # type: ignore[arg-type]
    assert memory.get() == {"name": "Ada"} and len(memory.history()) == 1


def test_rollback_restores_a_version_as_a_new_version(url: str) -> None:
    memory, _ = make(url, [tool_reply({"op": "replace", "path": "/name", "value": "Bob"})])
    memory.put({"name": "Ada", "likes": ["tea"]})
    memory.save_context({"input": "I'm Bob now"}, {"output": "OK"})
    assert memory.get() == {"name": "Bob", "likes": ["tea"]}
    assert memory.rollback(1) == 3
    assert memory.get() == {"name": "Ada", "likes": ["tea"]}
    last = memory.history()[-1]
    assert last.kind == "rollback" and last.patch == (
        {"op": "replace", "path": "/name", "value": "Ada"},
    )


def test_rollback_to_a_missing_version_says_where_to_look(url: str) -> None:
    memory = ProfileMemory(url=url, policy="manual")
    with pytest.raises(InvalidInputError, match="no version 4; history"):
        memory.rollback(4)


def test_rollback_checks_the_old_document_against_the_current_schema(url: str) -> None:
    ProfileMemory(url=url, policy="manual").put({"name": 3})
    strict = ProfileMemory(url=url, policy="manual", schema=USER_SCHEMA)
    with pytest.raises(InvalidProfileError, match="Version 1 does not match"):
        strict.rollback(1)


def test_clear_is_a_recorded_change_that_rollback_undoes(url: str) -> None:
    memory, _ = make(url, [], policy="manual")
    memory.put({"name": "Ada"})
    memory.save_context(*TURN)
    memory.clear()
    assert memory.get() == {"likes": []} and memory.status().pending == 0
    cleared = memory.history()[-1]
    assert cleared.kind == "clear" and cleared.turns[0][0].content == TURN[0]["input"]
    memory.rollback(1)
    assert memory.get() == {"name": "Ada"}


# -- isolation and persistence --------------------------------------------------


def test_namespaces_isolate_users(url: str) -> None:
    alice = ProfileMemory(url=url, namespace=("alice",), policy="manual")
    bob = ProfileMemory(url=url, namespace="bob", policy="manual")
    alice.put({"name": "Alice"})
    bob.save_context(*TURN)
    assert bob.get() == {} and bob.history() == []
    assert alice.status().pending == 0 and bob.status().pending == 1


def test_profile_and_pending_turns_survive_a_restart(url: str) -> None:
    first, _ = make(url, [tool_reply(NAME), RuntimeError("process killed mid-update")])
    first.save_context(*TURN)
    first.save_context({"input": "I like tea"}, {"output": "Noted"})
    del first
    restarted, model = make(
        url, [tool_reply({"op": "add", "path": "/likes/-", "value": "tea"})], policy="manual"
    )
    assert restarted.get() == {"likes": [], "name": "Ada"}
    assert restarted.status().pending == 1
    restarted.refresh()
    assert "Human: I like tea" in prompt_text(model.prompts[0])
    assert restarted.get() == {"likes": ["tea"], "name": "Ada"}


def test_a_concurrent_write_during_an_update_is_not_lost(url: str) -> None:
    other = ProfileMemory(url=url, namespace=("user-1",), schema=USER_SCHEMA, policy="manual")

    def write_meanwhile(prompt: list[BaseMessage]) -> AIMessage:
        other.update([{"op": "add", "path": "/likes/-", "value": "tea"}])
        return tool_reply(NAME)

    memory, model = make(url, [write_meanwhile, tool_reply(NAME)])
    memory.save_context(*TURN)
    assert len(model.prompts) == 2  # recomputed from the newer document
    assert '"tea"' in prompt_text(model.prompts[1])
    assert memory.get() == {"likes": ["tea"], "name": "Ada"}
    assert [c.kind for c in memory.history()] == ["patch", "update"]


def test_an_update_that_keeps_losing_races_is_recorded_not_raised(url: str) -> None:
    other = ProfileMemory(url=url, namespace=("user-1",), schema=USER_SCHEMA, policy="manual")

    def race(prompt: list[BaseMessage]) -> AIMessage:
        other.update([{"op": "add", "path": "/likes/-", "value": "tea"}])
        return tool_reply(NAME)

    memory, model = make(url, [race, race, race])
    memory.save_context(*TURN)
    assert len(model.prompts) == 3
    failure = memory.history()[-1]
    assert failure.kind == "failed" and "Other writers changed the profile" in (failure.error or "")
    assert memory.status().pending == 1 and memory.get() == {"likes": ["tea"] * 3}


def test_each_batch_of_a_refresh_gets_its_own_tries_against_other_writers(url: str) -> None:
    other = ProfileMemory(url=url, namespace=("user-1",), schema=USER_SCHEMA, policy="manual")

    def race(prompt: list[BaseMessage]) -> AIMessage:
        other.update([{"op": "add", "path": "/likes/-", "value": "tea"}])
        return tool_reply(NAME)

    memory, model = make(url, [race, tool_reply(NAME)] * 3, policy="manual", max_turns_per_update=1)
    for _ in range(3):
        memory.save_context(*TURN)
    result = memory.refresh()
    assert len(model.prompts) == 6
    assert (result.status, result.turns, memory.status().pending) == ("updated", 3, 0)


def test_concurrent_direct_writes_all_land(url: str) -> None:
    memory = ProfileMemory(url=url, schema=USER_SCHEMA, policy="manual")

    def append(worker: int) -> None:
        for i in range(25):
            memory.update([{"op": "add", "path": "/likes/-", "value": f"{worker}-{i}"}])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(append, range(4)))
    likes = memory.get()["likes"]  # type: ignore[index]
    assert sorted(likes) == sorted(f"{w}-{i}" for w in range(4) for i in range(25))
    assert [c.version for c in memory.history()] == list(range(1, 101))


# -- large profiles -------------------------------------------------------------


def test_a_profile_over_the_token_budget_is_updated_section_by_section(url: str) -> None:
    document = {f"topic{i}": {"notes": "n" * 120} for i in range(4)}
    calls: list[str] = []

    def reply(prompt: list[BaseMessage]) -> AIMessage:
        shown = prompt_text(prompt)
        calls.append(shown)
        if '"/topic2"' in shown:
            return tool_reply({"op": "add", "path": "/topic2/seen", "value": True})
        return tool_reply()

    memory, _ = make(url, [reply] * 4, schema=None, max_document_tokens=80, token_counter="chars")
    memory.put(document)
    memory.save_context(*TURN)
    shown_parts = [c.split("value:\n", 1)[1].split("\nChange only", 1)[0] for c in calls]
    assert len(calls) > 1
    for part in shown_parts:
        assert CharCounter()([HumanMessage(part)]) <= 80
    shown = [pointer for part in shown_parts for pointer in json.loads(part)]
    assert shown == ["/topic0", "/topic1", "/topic2", "/topic3"]
    assert memory.get()["topic2"] == {"notes": "n" * 120, "seen": True}  # type: ignore[index]


def test_a_section_may_not_touch_another_sections_paths(url: str) -> None:
    outside = {"op": "remove", "path": "/b"}
    inside = {"op": "replace", "path": "/a", "value": "z"}
    memory, model = make(
        url,
        [tool_reply(outside), tool_reply(inside), tool_reply()],
        schema=None,
        max_document_tokens=60,
        token_counter="chars",
    )
    memory.put({"a": "x" * 200, "b": "y" * 200})
    memory.save_context(*TURN)
    assert "touches '/b', outside the paths shown to you (/a)" in str(model.prompts[1][-1].content)
    assert memory.get() == {"a": "z", "b": "y" * 200}


def test_a_large_update_is_kept_only_if_every_section_succeeds(url: str) -> None:
    inside = {"op": "replace", "path": "/a", "value": "z"}
    memory, _ = make(
        url,
        [tool_reply(inside), "prose", "prose"],
        schema=None,
        max_document_tokens=60,
        token_counter="chars",
        max_retries=1,
    )
    memory.put({"a": "x" * 200, "b": "y" * 200})
    memory.save_context(*TURN)
    assert memory.get() == {"a": "x" * 200, "b": "y" * 200}
    failure = memory.history()[-1]
    assert failure.kind == "failed" and "(section 2 of 2)" in (failure.error or "")
    assert memory.status().pending == 1


# -- what the prompt sees -------------------------------------------------------


def test_the_profile_is_shown_as_compact_json_text_or_a_message(url: str) -> None:
    memory = ProfileMemory(url=url, policy="manual", schema=USER_SCHEMA)
    assert memory.load_memory_variables({}) == {"profile": '{"likes":[]}'}
    memory.put({"name": "Ada", "likes": ["tea", "cake"]})
    assert memory.load_memory_variables({}) == {"profile": '{"name":"Ada","likes":["tea","cake"]}'}
    text = memory.model_copy(update={"format": "text"})
    assert text.load_memory_variables({})["profile"] == "name: Ada\nlikes:\n- tea\n- cake"
    messages = memory.model_copy(update={"return_messages": True})
    (message,) = messages.load_memory_variables({})["profile"]
    assert isinstance(message, SystemMessage) and json.loads(str(message.content))["name"] == "Ada"


def test_an_empty_profile_shows_as_nothing(url: str) -> None:
    memory = ProfileMemory(url=url, policy="manual")
    assert memory.load_memory_variables({}) == {"profile": ""}
    assert memory.model_copy(update={"return_messages": True}).buffer == []


@pytest.mark.filterwarnings("ignore::langchain_core._api.deprecation.LangChainDeprecationWarning")
def test_works_as_the_memory_of_a_conversation_chain(url: str) -> None:
    from langchain_classic.chains import ConversationChain
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.prompts import PromptTemplate

    memory, _ = make(url, [tool_reply(NAME)])
    prompt = PromptTemplate.from_template("Profile: {profile}\nUser: {input}")
    chain = ConversationChain(
        llm=FakeListChatModel(responses=["Hello Ada", "You are Ada"]), memory=memory, prompt=prompt
    )
    chain.invoke({"input": "I'm Ada"})
    assert chain.invoke({"input": "Who am I?"})["response"] == "You are Ada"
    assert memory.get() == {"likes": [], "name": "Ada"}


# -- configuration and bad input ------------------------------------------------


def test_config_round_trips_with_a_schema_dict_and_a_model_name(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model name is resolved at construction; no provider package is installed here.
    made: list[str] = []
    monkeypatch.setattr(
        "memories.kernel.llm.resolve_llm",
        lambda spec, **_: made.append(spec) or ScriptedChatModel(replies=[]),
    )
    memory = ProfileMemory(
        url=url,
        schema=USER_SCHEMA,
        llm="openai:gpt-4o-mini",
        namespace=("user-9", "profiles"),
        key="about",
        policy="every_n",
        every_n=4,
        token_counter="chars",
    )
    config = memory.to_config()
    assert config["schema"] == USER_SCHEMA and config["namespace"] == ["user-9", "profiles"]
    rebuilt = create_memory(config)
    assert isinstance(rebuilt, ProfileMemory) and rebuilt.to_config() == config
    assert json.loads(json.dumps(config)) == config
    assert made == ["openai:gpt-4o-mini"] * 2


def test_a_missing_provider_package_fails_at_construction(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(spec: Any, **options: Any) -> Any:
        raise MissingDependencyError(f"the model {spec!r}", "pip install langchain-openai")

    monkeypatch.setattr("memories.kernel.llm.resolve_llm", missing)
    with pytest.raises(MissingDependencyError, match="pip install langchain-openai"):
        ProfileMemory(url=url, llm="openai:gpt-4o-mini", policy="manual")


def test_a_namespace_string_is_its_labels_joined_by_dots(url: str) -> None:
    memory = ProfileMemory(url=url, namespace="users.maya", policy="manual")
    assert memory.namespace == ("users", "maya")
    memory.put({"name": "Maya"})
    assert memory.store.get(("users", "maya"), "profile") is not None


def test_config_names_an_importable_pydantic_schema_by_path(url: str) -> None:
    from tests.profile.fakes import UserProfile

    memory = ProfileMemory(url=url, schema=UserProfile, policy="manual")
    assert memory.to_config()["schema"] == "tests.profile.fakes:UserProfile"
    rebuilt = create_memory(memory.to_config())
    assert rebuilt.get() == {"name": None, "age": None, "likes": []}


def test_objects_without_a_config_form_say_why(url: str) -> None:
    memory, _ = make(url, [])
    with pytest.raises(ConfigError, match="Pass the model by name"):
        memory.to_config()

    from tests.profile.fakes import UserProfile

    class Local(UserProfile):
        pass

    with pytest.raises(ConfigError, match="cannot be imported by name"):
        ProfileMemory(url=url, schema=Local, policy="manual").to_config()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"schema": {"type": "object", "properties": {"a": {"type": 5}}}},
            "not a valid JSON Schema",
        ),
        ({"schema": {"type": "string"}}, "profile is a JSON object"),
        ({"policy": "turn"}, "llm is None"),
        ({"namespace": ("a.b",)}, "without '.'"),
        ({"every_n": 0}, "every_n: Input should be greater than 0, got 0"),
        ({"llm": 42}, "llm must be a LangChain model"),
        ({"nonsense": 1}, "nonsense"),
    ],
)
def test_bad_options_are_config_errors(url: str, options: dict[str, Any], message: str) -> None:
    options.setdefault("policy", "manual")
    with pytest.raises(ConfigError, match=message):
        ProfileMemory(url=url, **options)


def test_refresh_without_a_model_says_what_to_do(url: str) -> None:
    memory = ProfileMemory(url=url, policy="manual")
    memory.save_context(*TURN)
    with pytest.raises(ConfigError, match="no llm"):
        memory.refresh()


def test_update_method_tool_needs_tool_calling(url: str) -> None:
    memory, _ = make(url, [], tools=False, update_method="tool")
    with pytest.raises(ConfigError, match="has no tool calling"):
        memory.save_context(*TURN)


def test_update_method_json_skips_tools_even_when_the_model_has_them(url: str) -> None:
    memory, model = make(url, [json.dumps([NAME])], update_method="json")
    memory.save_context(*TURN)
    assert model.bound == [] and memory.get() == {"likes": [], "name": "Ada"}


def test_bad_turns_raise_before_anything_is_stored(url: str) -> None:
    memory, model = make(url, [])
    with pytest.raises(InvalidInputError):
        memory.save_context({"a": "x", "b": "y"}, {"output": "z"})
    assert memory.status().pending == 0 and model.prompts == []


# -- async parity ---------------------------------------------------------------


async def test_async_updates_retry_and_record_like_sync(url: str) -> None:
    bad = {"op": "add", "path": "/age", "value": -3}
    memory, model = make(url, [tool_reply(bad), tool_reply(NAME), "prose", "prose", "prose"])
    await memory.asave_context(*TURN)
    assert await memory.aget() == {"likes": [], "name": "Ada"}
    assert "-3 is less than the minimum" in str(model.prompts[1][-1].content)
    await memory.asave_context({"input": "x"}, {"output": "y"})
    history = await memory.ahistory()
    assert [c.kind for c in history] == ["update", "failed"]
    assert (await memory.astatus()).pending == 1
    assert (await memory.aload_memory_variables({}))["profile"] == '{"likes":[],"name":"Ada"}'


async def test_async_direct_access_and_rollback(url: str) -> None:
    memory = ProfileMemory(url=url, policy="manual", schema=USER_SCHEMA)
    assert await memory.aput({"name": "Ada"}) == 1
    assert await memory.aupdate([{"op": "replace", "path": "/name", "value": "Bob"}]) == 2
    assert await memory.arollback(1) == 3
    assert await memory.aget() == {"name": "Ada"}
    await memory.aclear()
    assert await memory.aget() == {"likes": []}
    assert [c.kind for c in await memory.ahistory()] == ["put", "patch", "rollback", "clear"]


async def test_async_policies_match_sync(url: str) -> None:
    memory, model = make(url, [tool_reply(NAME)], policy="once")
    await memory.asave_context(*TURN)
    await memory.asave_context(*TURN)
    assert len(model.prompts) == 1 and (await memory.astatus()).frozen
    assert (await memory.arefresh()).status == "frozen"
    every, model2 = make(
        url.replace("profiles.db", "b.db"), [tool_reply(NAME)], policy="every_n", every_n=2
    )
    await every.asave_context(*TURN)
    assert model2.prompts == []
    await every.asave_context(*TURN)
    assert len(model2.prompts) == 1


def test_a_lone_surrogate_is_refused_before_the_turn_is_queued(url: str) -> None:
    from memories import InvalidInputError

    memory = ProfileMemory(url=url, policy="manual", namespace=("surrogates",))
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        memory.save_context({"input": "bad \ud800"}, {"output": "ok"})
    assert memory.status().pending == 0


def test_a_document_no_store_can_write_is_refused_naming_it_and_nothing_is_written(
    url: str,
) -> None:
    memory = ProfileMemory(url=url, namespace=("user-1",), policy="manual")
    memory.put({"name": "Ada"})
    for write in (
        lambda: memory.put({"name": "Ada \ud800"}),  # a bad decode upstream
        lambda: memory.update([{"op": "add", "path": "/city\udc80", "value": "Porto"}]),
    ):
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            write()
    assert memory.get() == {"name": "Ada"} and len(memory.history()) == 1
