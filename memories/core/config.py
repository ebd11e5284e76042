"""Building memories and histories from configuration.

A config is a dict (or a YAML / TOML file holding one) naming a ``type`` and
its options (``history`` is short for ``chat_memory``). Types map to
``(module, class)`` pairs imported lazily, so naming ``vector`` does not import
Chroma until a vector memory is built. A per-session factory
(:func:`memory_factory`) makes one memory per session; a namespace-scoped
memory in it names whose namespace it is with a template filled from the run
config (``namespace: [users, "{user_id}"]``), or says ``shared: true``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from memories.errors import ConfigError
from memories.kernel.capabilities import capabilities_of
from memories.kernel.checks import non_empty_text
from memories.kernel.imports import INSTALL_COMMANDS, from_config, import_object
from memories.kernel.namespaces import as_namespace
from memories.kernel.paths import default_file
from memories.stores.history.sql import DEFAULT_SQLITE_PATH
from memories.stores.sql import redacted

__all__ = [
    "HISTORY_TYPES",
    "MEMORY_TYPES",
    "SHARED_KEY",
    "SessionFactory",
    "config_templates",
    "create_history",
    "create_memory",
    "drop_scope_options",
    "filled_namespace",
    "load_config",
    "memory_class",
    "memory_factory",
    "namespace_labels",
    "register_memory",
    "template_fields",
    "with_namespace",
    "with_paths",
    "with_session",
]

#: type name -> (module, class). A module that needs an extra is named in
#: :data:`memories.kernel.imports.EXTRAS`, which gives the install command.
MEMORY_TYPES: dict[str, tuple[str, str]] = {
    "buffer": ("memories.short_term.buffer", "BufferMemory"),
    "string_buffer": ("memories.short_term.buffer", "StringBufferMemory"),
    "window": ("memories.short_term.window", "WindowMemory"),
    "token_buffer": ("memories.short_term.token_buffer", "TokenBufferMemory"),
    "conversation_token_buffer": (
        "memories.short_term.token_buffer",
        "ConversationTokenBufferMemory",
    ),
    "summary": ("memories.short_term.summary.memory", "SummaryMemory"),
    "summary_buffer": ("memories.short_term.summary.memory", "SummaryBufferMemory"),
    "conversation_summary_buffer": (
        "memories.short_term.summary.memory",
        "ConversationSummaryBufferMemory",
    ),
    "combined": ("memories.core.combined", "CombinedMemory"),
    "read_only": ("memories.core.combined", "ReadOnlySharedMemory"),
    "simple": ("memories.core.combined", "SimpleMemory"),
    "profile": ("memories.long_term.profile", "ProfileMemory"),
    "examples": ("memories.long_term.examples", "ExampleMemory"),
    "collection": ("memories.long_term.collection", "CollectionMemory"),
    "entity": ("memories.long_term.entity_graph", "EntityMemory"),
    "instructions": ("memories.long_term.instructions", "InstructionsMemory"),
    "vector": ("memories.long_term.vector", "VectorMemory"),
    "vector_store_retriever": ("memories.long_term.vector", "VectorStoreRetrieverMemory"),
    "conversation_entity": ("memories.long_term.entities.memory", "ConversationEntityMemory"),
    "conversation_kg": ("memories.long_term.entities.kg", "ConversationKGMemory"),
    "conversation_vectorstore_token_buffer": (
        "memories.long_term.vector.token_buffer",
        "ConversationVectorStoreTokenBufferMemory",
    ),
}

HISTORY_TYPES: dict[str, tuple[str, str]] = {
    "memory": ("memories.stores.history.memory", "InMemoryHistory"),
    "sqlite": ("memories.stores.history.sql", "SQLiteHistory"),
    "sql": ("memories.stores.history.sql", "SQLHistory"),
}

# Options that hold nested memory configs, by memory type.
_NESTED_MEMORIES = {"combined": "memories", "read_only": "memory"}


def register_memory(
    name: str, module: str, class_name: str, *, pip_command: str | None = None
) -> None:
    """Make ``name`` usable as a memory ``type`` (for memories defined outside this package).

    Args:
        pip_command: what installs ``module`` when it is missing; the error says it.
    """
    MEMORY_TYPES[name] = (module, class_name)
    if pip_command is not None:
        INSTALL_COMMANDS[module] = pip_command


def load_config(source: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """A config dict from a dict, or from a ``.yaml`` / ``.yml`` / ``.toml`` / ``.json`` file."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"Config file {str(path)!r} does not exist (or is not a file).")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"Config file {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8."
        ) from exc
    try:
        if path.suffix in (".yaml", ".yml", ".json"):
            loaded = yaml.safe_load(text)
        elif path.suffix == ".toml":
            loaded = tomllib.loads(text)
        else:
            raise ConfigError(
                f"Config file {str(path)!r} has an unknown extension; "
                "use .yaml, .yml, .toml or .json."
            )
    except (yaml.YAMLError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(f"Config file {str(path)!r} is not valid: {exc}") from exc
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"Config file {str(path)!r} must hold a mapping, got {type(loaded).__name__}."
        )
    # A file may hold the memory under a `memory` table (handy in TOML).
    options = dict(loaded["memory"]) if set(loaded) == {"memory"} else loaded
    # Relative paths in a file mean "next to this file", wherever the program runs.
    return each_memory(options, lambda memory: _anchored(memory, path.resolve().parent))


#: Options that name a file or folder, in memory and history configs.
_PATH_OPTIONS = ("path", "outbox", "db_file")
_SQLITE_PREFIX = "sqlite:///"
#: Options that hold a store's config dict inside a memory config.
_STORE_OPTIONS = ("history", "chat_memory", "entity_store", "kg")


def sqlite_files(options: Mapping[str, Any]) -> list[str]:
    """The SQLite files a memory config (nested ones too) keeps data in."""
    found: list[str] = []
    for memory, value in _stores_in(options):
        url = value.get("url")
        if value.get("type") == "sqlite" and value is not memory:
            file = value.get("path") or value.get("db_file")
            found.append(str(file or default_file(DEFAULT_SQLITE_PATH)))
        elif isinstance(url, str) and url.startswith(_SQLITE_PREFIX):
            file = url.removeprefix(_SQLITE_PREFIX)
            if file and file != ":memory:":
                found.append(file)
    return found


def server_stores(options: Mapping[str, Any]) -> list[str]:
    """The stores of a memory config (nested ones too) that are servers, not files.

    Each as a message names it (a URL without its password, a Chroma server's address).
    """
    found: list[str] = []
    for _, value in _stores_in(options):
        for key in ("url", "vectors"):
            url = value.get(key)
            if isinstance(url, str) and url and not url.startswith("sqlite:"):
                found.append(redacted(url))
        if value.get("mode") == "http":
            found.append(
                f"Chroma server {value.get('host', 'localhost')}:{value.get('port', 8000)}"
            )
    return found


def _memories_in(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A memory config and every memory config nested in it."""
    found: list[dict[str, Any]] = []

    def collect(memory: dict[str, Any]) -> dict[str, Any]:
        found.append(memory)
        return memory

    each_memory(dict(options), collect)
    return found


def _stores_in(options: Mapping[str, Any]) -> list[tuple[dict[str, Any], Mapping[str, Any]]]:
    """(memory config, store config) for each memory in ``options`` (itself among its stores)."""
    return [
        (memory, value)
        for memory in _memories_in(options)
        for value in (memory, *(memory.get(key) for key in _STORE_OPTIONS))
        if isinstance(value, Mapping)
    ]


def with_paths(options: Mapping[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    """The same config with each file or folder it names, and each SQLite URL's file, changed.

    Nested memories and stores too; ``change`` gets each path as written.
    """
    return each_memory(dict(options), lambda memory: _paths_changed(memory, change))


def _paths_changed(options: dict[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    for key in _PATH_OPTIONS:
        value = options.get(key)
        if isinstance(value, str) and value:
            options[key] = change(value)
    url = options.get("url")  # a database URL, whose SQLite file may be relative
    if isinstance(url, str) and url.startswith(_SQLITE_PREFIX):
        file = url.removeprefix(_SQLITE_PREFIX)
        if file and file != ":memory:":
            options["url"] = _SQLITE_PREFIX + change(file)
    for key in _STORE_OPTIONS:
        if isinstance(options.get(key), Mapping):
            options[key] = _paths_changed(dict(options[key]), change)
    return options


def _anchored(options: dict[str, Any], base: Path) -> dict[str, Any]:
    """``options`` with relative paths and SQLite URLs made absolute from ``base``."""

    def absolute(path: str) -> str:
        return path if Path(path).expanduser().is_absolute() else str(base / path)

    return _paths_changed(options, absolute)


def memory_class(type_name: Any) -> type:
    """The class registered under a memory ``type`` (imported on first use).

    Raises:
        ConfigError: an unknown type (the message lists the valid ones).
        MissingDependencyError: the type needs an extra that is not installed.
    """
    if type_name is None:
        raise ConfigError(
            f"A memory config needs a 'type': one of {', '.join(sorted(MEMORY_TYPES))} "
            "(e.g. {'type': 'buffer'})."
        )
    if not isinstance(type_name, str) or type_name not in MEMORY_TYPES:
        raise ConfigError(
            f"Unknown memory type {type_name!r}; valid types: {', '.join(sorted(MEMORY_TYPES))}."
        )
    module, class_name = MEMORY_TYPES[type_name]
    return import_object(module, class_name, what=f"memory type {type_name!r}")


def create_memory(config: Mapping[str, Any] | str | Path) -> Any:
    """Build a memory from a config dict or file.

    Raises:
        ConfigError: no or unknown ``type`` (the message lists the valid ones),
            or an option the memory does not take or a bad value.
        MissingDependencyError: the type needs an extra that is not installed.
    """
    options = drop_scope_options(load_config(config))
    type_name = options.pop("type", None)
    cls = memory_class(type_name)
    if "history" in options:
        if "chat_memory" in options:
            raise ConfigError("Give either 'history' or 'chat_memory', not both.")
        options["chat_memory"] = options.pop("history")
    if "chat_memory" in options and "chat_memory" not in getattr(cls, "model_fields", {}):
        raise ConfigError(
            f"A {type_name!r} memory keeps no chat history, so it takes no 'history': remove "
            "it, or put this memory and a chat memory (buffer, window...) in a 'combined' one."
        )
    nested = _NESTED_MEMORIES.get(type_name)
    if nested in options:
        value = options[nested]
        options[nested] = (
            [create_memory(v) for v in value] if isinstance(value, list) else create_memory(value)
        )
    return cls(**options)


def with_session(config: Mapping[str, Any] | str | Path, session_id: str) -> dict[str, Any]:
    """The same config with every history in it (nested memories too) on ``session_id``.

    A memory with a ``session_id`` of its own (the vector memory) gets it too, so
    one config serves every session known only at run time.

    Raises:
        ConfigError: ``session_id`` is empty or not a string.
    """
    non_empty_text(session_id, "session_id")

    def on_session(options: dict[str, Any]) -> dict[str, Any]:
        for key in ("history", "chat_memory"):
            if isinstance(options.get(key), Mapping):
                options[key] = {**options[key], "session_id": session_id}
        cls = memory_class(options.get("type"))
        # A vector memory numbers its turns within the session named by its own field.
        if "session_id" in getattr(cls, "model_fields", {}):
            options["session_id"] = session_id
        for key in getattr(cls, "session_stores", ()):
            if key in options:
                options[key] = _store_on_session(options[key], session_id, key)
        return options

    return each_memory(load_config(config), on_session)


def _store_on_session(store: Any, session_id: str, field: str) -> Any:
    """A session store's config on ``session_id`` (one in the process is per memory already).

    Raises:
        ConfigError: the store is an object, which every session would share.
    """
    if isinstance(store, Mapping) and store.get("type") == "memory":
        return store  # each session's memory makes its own, in this process
    if not isinstance(store, Mapping):
        raise ConfigError(
            f"{field} is a store object ({store!r:.60}), which every session of this config "
            f"would share: give it as a config dict (e.g. {{'type': 'sqlite', ...}}) so that "
            "each session reads and writes its own, or, for a store with no config form (a "
            "LangChain retriever), build one memory per session yourself."
        )
    return {**store, "session_id": session_id}


def with_namespace(
    config: Mapping[str, Any] | str | Path, namespace: tuple[str, ...] | str
) -> dict[str, Any]:
    """The same config with every memory that keeps a namespace (profile, vector) on ``namespace``.

    ``namespace`` is a tuple of labels, or one string of them joined by ``"."`` (``"users.maya"``).

    Raises:
        ConfigError: an empty namespace or label.
    """
    labels = namespace_labels(namespace)

    def on_namespace(options: dict[str, Any]) -> dict[str, Any]:
        if "namespace" in getattr(memory_class(options.get("type")), "model_fields", {}):
            options["namespace"] = labels
        return options

    return each_memory(load_config(config), on_namespace)


def namespace_labels(namespace: tuple[str, ...] | list[str] | str) -> tuple[str, ...]:
    """A namespace as a tuple of labels, by the one rule (:mod:`~memories.kernel.namespaces`)."""
    return as_namespace(namespace)


def each_memory(
    options: dict[str, Any], change: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """Apply ``change`` to a copy of a memory config and of every memory config nested in it."""
    options = change(dict(options))
    type_name = options.get("type")
    nested = _NESTED_MEMORIES.get(type_name) if isinstance(type_name, str) else None
    if nested is not None and nested in options:
        value = options[nested]
        members = value if isinstance(value, list) else [value]
        updated = [each_memory(load_config(v), change) for v in members]
        options[nested] = updated if isinstance(value, list) else updated[0]
    return options


def memory_factory(config: Mapping[str, Any] | str | Path) -> SessionFactory:
    """``session_id -> memory`` from one config (``with_memory``, the middleware, LangGraph nodes).

    Each session gets the config's memory on its own session and each long-term
    memory on its owner's namespace (a template, see the module); the config is
    checked once, here, so a bad config fails at start-up.

    Raises:
        ConfigError: a bad config, or a vector or profile memory whose namespace
            would be shared by every session without ``shared: true``.
    """
    return SessionFactory(config)


def create_history(config: Mapping[str, Any]) -> Any:
    """Build a history backend from ``{"type": "memory" | "sqlite" | "sql", ...}``."""
    return from_config(config, HISTORY_TYPES, "history")


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


def config_templates(options: Mapping[str, Any]) -> set[str]:
    """The ``{field}`` names the namespace templates of a config use, nested memories' too."""
    return {name for memory in _memories_in(options) for name in template_fields(memory)}


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
        fields: the ``configurable`` fields its namespace templates need besides
            ``session_id`` (``SessionMemories`` passes them).
        memory_variables: the prompt variables its memories fill.

    Raises:
        ConfigError: a namespace-scoped memory (vector, profile) whose namespace
            is the same for every session and is not marked ``shared: true``.
    """

    def __init__(self, config: Mapping[str, Any] | str | Path) -> None:
        self._options = load_config(config)
        found: set[str] = set()
        for options in _memories_in(self._options):
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
        self.fields = tuple(sorted(found - {"session_id"}))
        probe = self({"session_id": "config-check"} | {f: "config-check" for f in self.fields})
        self.memory_variables: list[str] = list(probe.memory_variables)

    def __call__(self, session: str | Mapping[str, Any], /, **fields: Any) -> Any:
        """The memory of one session: its histories on ``session_id``, templates filled.

        Args:
            session: the session id, or a mapping of ``configurable`` fields holding it.
            fields: the other fields the templates need (``user_id``...).

        Raises:
            ConfigError: a field is missing, or is not a usable namespace label.
        """
        values = dict(session) if isinstance(session, Mapping) else {"session_id": session}
        values.update(fields)
        session_id = non_empty_text(values.get("session_id"), "session_id")

        def fill(options: dict[str, Any]) -> dict[str, Any]:
            if template_fields(options):
                options["namespace"] = list(filled_namespace(_labels(options), values))
            return options

        return create_memory(with_session(each_memory(dict(self._options), fill), session_id))

    def __repr__(self) -> str:
        return f"SessionFactory(type={self._options.get('type')!r}, fields={self.fields})"


def filled_namespace(labels: Sequence[str], values: Mapping[str, Any]) -> tuple[str, ...]:
    """``labels`` with each ``{field}`` template filled from ``values`` (``configurable``).

    Raises:
        ConfigError: a field has no value, or not a non-empty string without '.', '{' or '}'.
    """
    return as_namespace(
        [_PLACEHOLDER.sub(lambda m: _value(values, m[1]), label) for label in labels]
    )


def _value(values: Mapping[str, Any], name: str) -> str:
    value = values.get(name)
    # No '{' or '}' either: a filled namespace is never the template's own (the unfilled memory's).
    if not isinstance(value, str) or not value or any(c in value for c in ".{}"):
        raise ConfigError(
            f"The namespace template needs {name!r}: pass it in the run config, e.g. "
            f"config={{'configurable': {{'{name}': '<id>'}}}} (a non-empty string without '.', "
            f"'{{' or '}}'); got {value!r:.80}."
        )
    return value
