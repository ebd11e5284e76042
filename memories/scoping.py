"""Whose data a memory holds: one config, a memory per session, never another user's data.

A per-session factory (``memory_factory``, used by ``with_memory``, the agent
middleware and the LangGraph nodes) makes one memory per session. A chat log
is per session by its ``session_id``; a long-term memory (vector, profile) is
keyed by its ``namespace``, which the session does not change. So in a
factory's config a namespace-scoped memory must name whose namespace it is,
with a template filled at run time from the run config's ``configurable``
fields, as LangGraph's stores do::

    type: vector
    namespace: [users, "{user_id}"]      # filled from configurable["user_id"]

A namespace that is the same for every session is refused, unless the config
says so on purpose with ``shared: true``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memories.errors import ConfigError
from memories.kernel.capabilities import capabilities_of
from memories.namespaces import as_namespace

__all__ = ["SHARED_KEY", "SessionFactory", "drop_scope_options", "template_fields"]

#: The config key that shares a namespace-scoped memory between sessions on purpose.
SHARED_KEY = "shared"

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _labels(options: Mapping[str, Any]) -> list[str]:
    namespace = options.get("namespace")
    if not isinstance(namespace, str | list | tuple):
        return []  # none, or not a namespace at all: the memory's own check says so
    # The one namespace rule: a string is labels joined by ".".
    return [
        str(label) for label in (namespace.split(".") if isinstance(namespace, str) else namespace)
    ]


def template_fields(options: Mapping[str, Any]) -> set[str]:
    """The ``{field}`` names a memory config's namespace template uses."""
    return {name for label in _labels(options) for name in _PLACEHOLDER.findall(label)}


def drop_scope_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` ready to build: ``shared`` removed, no template left unfilled.

    Raises:
        ConfigError: a namespace label still holds a ``{field}`` template.
    """
    options.pop(SHARED_KEY, None)
    unfilled = template_fields(options)
    if unfilled:
        raise ConfigError(
            f"namespace {options.get('namespace')!r} is a template (it names "
            f"{sorted(unfilled)}); build it per session with memory_factory(config), which "
            "fills it from the run config's configurable fields, or write the namespace out."
        )
    return options


class SessionFactory:
    """``(session_id, **fields) -> memory`` from one config, each session scoped to its owner.

    Args:
        config: a memory config (dict or file); checked here, once.

    Attributes:
        fields: the ``configurable`` fields its namespace templates need
            besides ``session_id`` (``SessionMemories`` passes them).
        memory_variables: the prompt variables its memories fill.

    Raises:
        ConfigError: a namespace-scoped memory (vector, profile) whose namespace
            does not depend on the session or user and is not marked ``shared: true``.
    """

    def __init__(self, config: Mapping[str, Any] | str | Path) -> None:
        from memories.config import each_memory, load_config, memory_class

        self._options = load_config(config)
        found: set[str] = set()

        def check(options: dict[str, Any]) -> dict[str, Any]:
            scope = capabilities_of(memory_class(options.get("type"))).scope
            fields = template_fields(options)
            if scope == "namespace" and not fields and not options.get(SHARED_KEY):
                raise ConfigError(
                    f"A {options.get('type')!r} memory keeps long-term data under its namespace, "
                    f"and namespace {options.get('namespace', '(the default)')!r} is the same for "
                    "every session: each user of this factory would read the others' memories. "
                    "Give a template such as namespace: [users, '{user_id}'] (filled from the "
                    "run config's configurable fields), or set shared: true to share it on purpose."
                )
            found.update(fields)
            return options

        each_memory(self._options, check)
        self.fields = tuple(sorted(found - {"session_id"}))
        probe = self({"session_id": "config-check"} | {f: "config-check" for f in self.fields})
        self.memory_variables: list[str] = list(probe.memory_variables)
        """The prompt variables its memories fill (as a memory's ``memory_variables``)."""

    def __call__(self, session: str | Mapping[str, Any], /, **fields: Any) -> Any:
        """The memory of one session: its histories on ``session_id``, templates filled.

        Args:
            session: the session id, or a mapping of ``configurable`` fields holding it.
            fields: the other fields the templates need (``user_id``...).

        Raises:
            ConfigError: a field is missing, or is not a usable namespace label.
        """
        from memories.config import create_memory, each_memory, with_session

        values = dict(session) if isinstance(session, Mapping) else {"session_id": session}
        values.update(fields)
        session_id = values.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            raise ConfigError(f"session_id must be a non-empty string, got {session_id!r}")

        def fill(options: dict[str, Any]) -> dict[str, Any]:
            if template_fields(options):
                labels = [
                    _PLACEHOLDER.sub(lambda m: _value(values, m[1]), label)
                    for label in _labels(options)
                ]
                options["namespace"] = list(as_namespace(labels))
            return options

        return create_memory(with_session(each_memory(dict(self._options), fill), session_id))

    def __repr__(self) -> str:
        return f"SessionFactory(type={self._options.get('type')!r}, fields={self.fields})"


def _value(values: Mapping[str, Any], name: str) -> str:
    value = values.get(name)
    if not isinstance(value, str) or not value or "." in value:
        raise ConfigError(
            f"The namespace template needs {name!r}: pass it in the run config, e.g. "
            f"config={{'configurable': {{'{name}': '<id>'}}}} (a non-empty string without '.'); "
            f"got {value!r:.80}."
        )
    return value
