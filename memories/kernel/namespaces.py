"""The one rule for namespaces, used by every memory, the config and the store adapters.

A namespace is a non-empty tuple of labels, as in LangGraph's stores:
``("users", "maya")``. Each label is a non-empty string without a period, so
a namespace can also be written as one string of labels joined by ``"."``:
``"users.maya"`` is ``("users", "maya")``, everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BeforeValidator

from memories.errors import ConfigError

__all__ = [
    "Namespace",
    "NamespaceField",
    "as_namespace",
    "in_namespace",
    "namespace_from_key",
    "namespace_key",
    "namespace_text",
]

Namespace = tuple[str, ...]


def as_namespace(value: Any, /) -> Namespace:
    """``value`` as a namespace tuple: a tuple or list of labels, or labels joined by ``"."``.

    Raises:
        ConfigError: empty, or a label that is not a non-empty string without ``"."``.
    """
    labels = tuple(value.split(".")) if isinstance(value, str) else value
    if not isinstance(labels, tuple | list) or not labels:
        raise ConfigError(
            "A namespace is a non-empty tuple of labels such as ('users', 'maya') or the "
            f"string 'users.maya'; got {value!r:.80}."
        )
    for label in labels:
        if not isinstance(label, str) or not label or "." in label:
            raise ConfigError(
                f"A namespace's labels are non-empty strings without '.'; got {label!r:.80} "
                f"in {value!r:.80}."
            )
    return tuple(labels)


def namespace_text(namespace: Sequence[str], /) -> str:
    """The namespace as one string, ``"users.maya"`` (the inverse of :func:`as_namespace`)."""
    return ".".join(as_namespace(namespace))


def namespace_key(namespace: Sequence[str], /) -> str:
    """The key stored beside documents for ``namespace``: labels joined by ``/``.

    ``%`` and ``/`` inside a label are escaped, so two different tuples never
    share a key (``("a/b",)`` is ``"a%2Fb"``, ``("a", "b")`` is ``"a/b"``).
    """
    return "/".join(label.replace("%", "%25").replace("/", "%2F") for label in namespace)


def namespace_from_key(key: str, /) -> Namespace:
    """The namespace a key of :func:`namespace_key` stands for (its inverse)."""
    return as_namespace([p.replace("%2F", "/").replace("%25", "%") for p in key.split("/")])


#: A model field holding a namespace: accepts what :func:`as_namespace` accepts.
NamespaceField = Annotated[Namespace, BeforeValidator(as_namespace)]


def in_namespace(template: Any, namespace: Namespace, /, **changed: Any) -> Any:
    """A memory with ``template``'s fields (but those ``changed``) in ``namespace``, built anew.

    Never a copy: a copy would carry the template's cached store client,
    bound to the template's namespace.
    """
    fields = {name: getattr(template, name) for name in type(template).model_fields}
    return type(template)(**{**fields, **changed, "namespace": namespace})
