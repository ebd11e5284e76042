"""What a profile must look like: a JSON Schema, or a Pydantic model that gives one.

Every document a profile stores is checked here first. The JSON Schema check
gives messages that name the offending JSON Pointer, which is what a model
needs to fix its patch; a Pydantic model's own validators then run on top.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from jsonschema import FormatChecker
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from pydantic import BaseModel, ValidationError

from memories.errors import ConfigError
from memories.kernel.imports import import_path

__all__ = ["FREE_FORM_SCHEMA", "ProfileSchema", "import_model", "model_path", "schema_config"]

#: The schema of a profile given no schema: any JSON object.
FREE_FORM_SCHEMA: dict[str, Any] = {"type": "object"}

_MAX_ERRORS = 10


def import_model(path: str) -> type[BaseModel]:
    """The Pydantic class named by ``"package.module:ClassName"`` (:mod:`~memories.kernel.imports`).

    Raises:
        ConfigError: the string has another shape, the import fails, or the
            object is not a Pydantic model class.
    """
    found = import_path(path, what="the schema")
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise ConfigError(f"schema {path!r} names {found!r}, which is not a Pydantic model class.")
    return found


def model_path(model: type[BaseModel]) -> str | None:
    """``"module:QualName"`` when importing that string gives back ``model``, else None."""
    if model.__module__ == "__main__" or "<locals>" in model.__qualname__:
        return None
    path = f"{model.__module__}:{model.__qualname__}"
    try:
        return path if import_model(path) is model else None
    except ConfigError:
        return None


def schema_config(spec: Any) -> Any:
    """The config form of a ``schema`` argument: a JSON Schema dict or an import path.

    Raises:
        ConfigError: a Pydantic class that cannot be imported by name.
    """
    if isinstance(spec, Mapping):
        return json.loads(json.dumps(spec))
    if isinstance(spec, type):
        path = model_path(spec)
        if path is None:
            raise ConfigError(
                f"The schema {spec.__qualname__} cannot be imported by name (it is "
                "defined in __main__ or inside a function), so it has no config form. "
                "Define it in a module and pass 'package.module:ClassName'."
            )
        return path
    return spec


class ProfileSchema:
    """A profile's schema, resolved once from what the user gave.

    Args:
        spec: None (any JSON object), a JSON Schema dict, a Pydantic model
            class, or an import path ``"package.module:ClassName"`` of one.

    Raises:
        ConfigError: the spec is none of those, the JSON Schema is itself
            invalid, or it describes something other than an object.
    """

    def __init__(self, spec: Any) -> None:
        self.model: type[BaseModel] | None = None
        if isinstance(spec, str):
            spec = import_model(spec)
        if spec is None:
            schema: Any = FREE_FORM_SCHEMA
        elif isinstance(spec, type) and issubclass(spec, BaseModel):
            self.model = spec
            schema = spec.model_json_schema()
        elif isinstance(spec, Mapping):
            schema = spec
        else:
            raise ConfigError(
                f"schema must be a JSON Schema dict, a Pydantic model class or an import path "
                f"'package.module:ClassName'; got {type(spec).__name__} {spec!r:.80}"
            )
        self.json_schema: dict[str, Any] = _checked(dict(schema))
        self._validator = _validator(self.json_schema)
        self._initial = self._defaults()

    def __getstate__(self) -> dict[str, Any]:
        # A compiled validator holds closures; a copy compiles its own.
        return {k: v for k, v in self.__dict__.items() if k != "_validator"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._validator = _validator(self.json_schema)

    def errors(self, document: Any) -> list[str]:
        """Why ``document`` is not a valid profile: one line per problem, empty when valid.

        Each line starts with the JSON Pointer of the offending value.
        """
        found = sorted(self._validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        if found:
            lines = [f"{_pointer(e.absolute_path)}: {e.message}" for e in found[:_MAX_ERRORS]]
            if len(found) > _MAX_ERRORS:
                lines.append(f"... and {len(found) - _MAX_ERRORS} more problems")
            return lines
        if self.model is not None:
            try:
                self.model.model_validate(document)
            except ValidationError as exc:
                return [f"{_pointer(err['loc'])}: {err['msg']}" for err in exc.errors()]
        return []

    def initial(self) -> dict[str, Any] | None:
        """The document a profile starts from: the schema's defaults, when they are valid.

        A Pydantic model gives ``Model().model_dump()``; a JSON Schema gives
        its top-level ``default`` or its properties' defaults. None when that
        document is not valid (required fields without defaults): the first
        update must then create every required field.
        """
        return copy.deepcopy(self._initial)

    def _defaults(self) -> dict[str, Any] | None:
        document: Any
        if self.model is not None:
            try:
                document = self.model().model_dump(mode="json")
            except ValidationError:
                return None
        elif isinstance(self.json_schema.get("default"), dict):
            document = copy.deepcopy(self.json_schema["default"])
        else:
            properties = self.json_schema.get("properties") or {}
            document = {
                name: copy.deepcopy(prop["default"])
                for name, prop in properties.items()
                if isinstance(prop, dict) and "default" in prop
            }
        return document if not self.errors(document) else None

    def text(self) -> str:
        """The schema as compact JSON, as the model is shown it."""
        return json.dumps(self.json_schema, ensure_ascii=False, separators=(",", ":"))


def _checked(schema: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"schema must be JSON-serialisable: {exc}") from exc
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = _pointer(exc.absolute_path)
        raise ConfigError(
            f"schema is not a valid JSON Schema: at {where}: {exc.message}. "
            "Fix the schema, or pass a Pydantic model instead."
        ) from exc
    kind = schema.get("type")
    if kind is not None and kind != "object" and not (isinstance(kind, list) and "object" in kind):
        raise ConfigError(
            f"A profile is a JSON object, but the schema's type is {kind!r}. "
            "Wrap the value in an object schema with one property."
        )
    return schema


def _pointer(path: Any) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "(root)"


def _validator(schema: dict[str, Any]) -> Any:
    """The JSON Schema validator for ``schema``, with format checks."""
    return validator_for(schema)(schema, format_checker=FormatChecker())
