from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage

from memories.errors import InvalidProfileError, LLMError
from memories.kernel.patching import (
    Section,
    apply_operations,
    check_operations,
    extract_operations,
    plan_sections,
)
from tests.profile.fakes import tool_reply

ADD = {"op": "add", "path": "/name", "value": "Ada"}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps([ADD]),
        f"```json\n{json.dumps([ADD])}\n```",
        f"```\n{json.dumps([ADD])}```",
        f"Here is the patch:\n{json.dumps([ADD])}\nDone.",
        json.dumps({"operations": [ADD]}),
        json.dumps(ADD),
    ],
)
def test_a_text_reply_gives_its_operations(text: str) -> None:
    assert extract_operations(AIMessage(content=text)) == [ADD]


def test_an_empty_array_means_no_change() -> None:
    assert extract_operations("[]") == []


@pytest.mark.parametrize("text", ["The user likes tea.", "", '{"name": "Ada"}', "[1, 2"])
def test_prose_or_a_document_is_not_a_patch(text: str) -> None:
    with pytest.raises(LLMError, match=r"JSON array of operations|empty"):
        extract_operations(text)


def test_tool_calls_give_their_operations_in_order() -> None:
    reply = tool_reply(ADD)
    reply.tool_calls.append(
        {"name": "update_profile", "args": {"operations": json.dumps([ADD])}, "id": "c2"}
    )
    assert extract_operations(reply) == [ADD, ADD]


def test_a_call_to_another_tool_is_an_error() -> None:
    reply = AIMessage(content="", tool_calls=[{"name": "search", "args": {}, "id": "c"}])
    with pytest.raises(LLMError, match="only tool is 'update_profile'"):
        extract_operations(reply)


def test_check_operations_lists_every_bad_operation() -> None:
    with pytest.raises(InvalidProfileError) as caught:
        check_operations(
            [
                {"op": "upsert", "path": "/a"},
                {"op": "add", "path": "a", "value": 1},
                {"op": "replace", "path": "/a"},
                {"op": "move", "path": "/b"},
                "nope",
            ]
        )
    lines = str(caught.value).splitlines()
    assert [line.split(" ", 2)[1] for line in lines] == ["0", "1", "2", "3", "4"]
    assert "use one of add, remove" in lines[0]
    assert "JSON Pointer" in lines[1]
    assert "no 'value'" in lines[2]


def test_replacing_the_whole_document_can_be_refused() -> None:
    op = {"op": "replace", "path": "", "value": {}}
    assert check_operations([op]) == [op]
    with pytest.raises(InvalidProfileError, match="whole document"):
        check_operations([op], allow_root=False)


def test_applying_to_a_path_that_does_not_exist_names_the_operation() -> None:
    document = {"name": "Ada"}
    with pytest.raises(InvalidProfileError, match=r"operation 1 .*/job/title.* cannot be applied"):
        apply_operations(document, [ADD, {"op": "replace", "path": "/job/title", "value": "x"}])
    assert document == {"name": "Ada"}


def test_applying_works_on_a_copy() -> None:
    document = {"likes": ["tea"]}
    result = apply_operations(document, [{"op": "add", "path": "/likes/-", "value": "cake"}])
    assert result == {"likes": ["tea", "cake"]}
    assert document == {"likes": ["tea"]}


def _chars(text: str) -> int:
    return len(text)


def test_a_document_within_budget_is_not_split() -> None:
    assert plan_sections({"a": 1}, 100, _chars) is None


def test_a_large_document_is_split_into_sections_that_fit() -> None:
    document = {f"k{i}": "x" * 30 for i in range(6)} | {"nested": {"a": "y" * 60, "b": "z" * 60}}
    sections = plan_sections(document, 100, _chars)
    assert sections is not None and len(sections) > 1
    shown = [p for s in sections for p in s.pointers]
    assert shown == [f"/k{i}" for i in range(6)] + ["/nested/a", "/nested/b"]
    for section in sections:
        assert len(json.dumps(section.view(document))) <= 100
    assert [s.adds_new for s in sections] == [True] + [False] * (len(sections) - 1)


def test_a_section_allows_only_its_paths_and_new_fields_in_the_first() -> None:
    owned = ("/a", "/b/c", "/b/d")
    first = Section(("/a",), owned, adds_new=True)
    second = Section(("/b/c", "/b/d"), owned, adds_new=False)
    assert first.allows("/a") and first.allows("/a/x/0") and first.allows("/new")
    assert first.allows("/b/e")  # a new field of an object that was split
    assert not first.allows("/b/c") and not first.allows("/b") and not first.allows("")
    assert second.allows("/b/c/1") and not second.allows("/new") and not second.allows("/ab")


def test_a_value_that_cannot_be_split_gets_a_section_of_its_own() -> None:
    document = {"short": 1, "long": ["x" * 50] * 5}
    sections = plan_sections(document, 60, _chars)
    assert sections is not None
    assert [s.pointers for s in sections] == [("/short",), ("/long",)]
