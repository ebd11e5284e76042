"""Importing by name: the one ``"module:attr"`` importer and the one map of install hints.

Memory types, histories, embeddings, schemas and vector backends can be
named by strings in configs; they are all imported here, so a missing
optional dependency always names the same ``pip install`` command.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Mapping
from typing import Any

from memories.errors import ConfigError, MissingDependencyError

__all__ = [
    "DISTRIBUTION",
    "EXTRAS",
    "INSTALL_COMMANDS",
    "from_config",
    "import_object",
    "import_path",
    "install_command",
    "install_hint",
    "missing_requirements",
]

#: The distribution name on the package registry (the import name is ``memories``).
DISTRIBUTION = "chat-memories"

#: Module prefix -> the extra that installs what it needs.
EXTRAS: dict[str, str] = {
    "memories.long_term.vector": "chroma",
    "memories.long_term.examples": "chroma",
    "memories.long_term.collection": "chroma",
    "memories.stores.recall": "chroma",
    "memories.integrations.chroma": "chroma",
    "memories.integrations.minilm": "chroma",
    "memories.integrations._onnx_int8": "chroma",
    "matplotlib": "plot",
    "memories.integrations.agents": "agents",
    "memories.integrations.langgraph_nodes": "agents",
    "memories.integrations.langgraph_store": "agents",
    "memories.integrations.summarization": "agents",
    "memories.faces.server.app": "server",
    "uvicorn": "server",
    "memories.faces.mcp_server": "mcp",
}


def install_hint(extra: str, /) -> str:
    """The pip command that installs one of this library's extras."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_requirements(extra: str, /) -> list[str]:
    """The distributions this library's ``extra`` requires that are not installed.

    Read from the installed metadata (setup.cfg's list); empty without it (a
    source tree on ``PYTHONPATH``: the imports themselves will tell).

    Raises:
        ConfigError: the library declares no such extra.
    """
    try:
        metadata = importlib.metadata.metadata(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return []
    extras = metadata.get_all("Provides-Extra") or []
    if extra not in extras:
        named = ", ".join(sorted(extras))
        raise ConfigError(f"{DISTRIBUTION} has no extra {extra!r}; its extras: {named}.")
    missing = []
    for requirement in importlib.metadata.requires(DISTRIBUTION) or []:  # egg-info's too
        name, _, marker = requirement.partition(";")
        if not re.search(rf"""extra\s*==\s*['"]{re.escape(extra)}['"]""", marker):
            continue
        distribution = re.split(r"[\s\[<>=!~;(]", name.strip(), maxsplit=1)[0]
        try:
            importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            missing.append(distribution)
    return missing


#: Module prefix -> the command that installs what it needs: this library's
#: extras, and whatever ``register_memory(..., pip_command=...)`` adds.
INSTALL_COMMANDS: dict[str, str] = {prefix: install_hint(extra) for prefix, extra in EXTRAS.items()}


def install_command(module: str, /) -> str | None:
    """The command that installs what ``module`` needs, if one is known."""
    for prefix, command in INSTALL_COMMANDS.items():
        if module == prefix or module.startswith(prefix + "."):
            return command
    return None


def import_object(module: str, attribute: str, /, *, what: str) -> Any:
    """``module.attribute`` (dotted attributes allowed), imported now.

    Raises:
        MissingDependencyError: a module of ours whose extra is not installed
            (the message names the pip command).
        ConfigError: anything else that cannot be imported.
    """
    try:
        found: Any = importlib.import_module(module)
    except ImportError as exc:
        command = install_command(module)
        if command is not None:
            raise MissingDependencyError(what, command) from exc
        raise ConfigError(f"Cannot import {what} from {module!r}: {exc}") from exc
    try:
        for part in attribute.split("."):
            found = getattr(found, part)
    except AttributeError as exc:
        raise ConfigError(f"Cannot import {what}: {module!r} has no {attribute!r}.") from exc
    return found


def import_path(path: Any, /, *, what: str) -> Any:
    """The object named by ``"package.module:attr"``.

    Raises:
        ConfigError: the string has another shape or the import fails.
        MissingDependencyError: as :func:`import_object`.
    """
    module, sep, attribute = path.partition(":") if isinstance(path, str) else ("", "", "")
    if not sep or not module or not attribute:
        raise ConfigError(f"{what} {path!r:.80} must be an import path 'package.module:Name'.")
    return import_object(module, attribute, what=f"{what} {path!r}")


def from_config(config: Mapping[str, Any], types: Mapping[str, Any], what: str) -> Any:
    """``types[config["type"]]`` (a ``(module, class)`` imported now) made with the other options.

    Raises:
        ConfigError: an unknown type (naming the valid ones) or a bad option.
        MissingDependencyError: the type's optional dependency is not installed.
    """
    options = dict(config)
    type_name = options.pop("type", None)
    cls = types.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        valid = ", ".join(sorted(types))
        raise ConfigError(f"Unknown {what} type {type_name!r}; valid types: {valid}.")
    if isinstance(cls, tuple):
        cls = import_object(*cls, what=f"{what} type {type_name!r}")
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"Bad options for {what} type {type_name!r}: {exc}") from exc
