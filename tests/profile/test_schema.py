from __future__ import annotations

import pytest

from memories.errors import ConfigError
from memories.long_term.profile.schema import ProfileSchema, model_path
from tests.profile.fakes import USER_SCHEMA, UserProfile


def test_an_invalid_json_schema_is_a_config_error_naming_the_problem() -> None:
    with pytest.raises(ConfigError, match=r"not a valid JSON Schema.*'strin' is not valid"):
        ProfileSchema({"type": "object", "properties": {"name": {"type": "strin"}}})


def test_a_schema_for_something_other_than_an_object_is_refused() -> None:
    with pytest.raises(ConfigError, match="profile is a JSON object"):
        ProfileSchema({"type": "array"})


def test_a_schema_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="JSON Schema dict, a Pydantic model class"):
        ProfileSchema(42)


def test_an_import_path_must_name_a_pydantic_model() -> None:
    with pytest.raises(ConfigError, match="not a Pydantic model class"):
        ProfileSchema("tests.profile.fakes:USER_SCHEMA")
    with pytest.raises(ConfigError, match="Cannot import"):
        ProfileSchema("tests.profile.fakes:Nope")
    with pytest.raises(ConfigError, match=r"import path 'package\.module:"):
        ProfileSchema("tests.profile.fakes.UserProfile")


def test_errors_name_the_json_pointer_of_each_bad_value() -> None:
    schema = ProfileSchema(USER_SCHEMA)
    errors = schema.errors({"name": 3, "likes": ["tea", 4], "x": 1})
    assert any(e.startswith("/name: 3 is not of type 'string'") for e in errors)
    assert any(e.startswith("/likes/1: ") for e in errors)
    assert any(e.startswith("(root): Additional properties") for e in errors)
    assert schema.errors({"name": "Ada"}) == []


def test_a_pydantic_schema_runs_the_model_validators_too() -> None:
    schema = ProfileSchema(UserProfile)
    assert schema.errors({"age": -1})[0].startswith("/age: ")
    assert schema.model is UserProfile
    assert ProfileSchema("tests.profile.fakes:UserProfile").model is UserProfile


def test_the_initial_document_is_the_schema_defaults_when_valid() -> None:
    assert ProfileSchema(UserProfile).initial() == {"name": None, "age": None, "likes": []}
    assert ProfileSchema(USER_SCHEMA).initial() == {"likes": []}
    assert ProfileSchema(None).initial() == {}
    required = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    assert ProfileSchema(required).initial() is None


def test_model_path_is_given_only_for_importable_classes() -> None:
    assert model_path(UserProfile) == "tests.profile.fakes:UserProfile"

    class Local(UserProfile):
        pass

    assert model_path(Local) is None
