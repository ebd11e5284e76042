"""Erasing a person everywhere: every store of every memory a config names.

:func:`erase_user` builds the config's memory on a session and a namespace,
asks each member where it keeps that person's data
(:meth:`~memories.core.base.BaseMemory.erasure_shares`), counts it, erases it,
counts again, then compacts each file erased from
(:mod:`memories.stores.compaction`). Exact (a namespace, never a prefix) and
idempotent, as docs/deployment.md ("Erasing a person") tells.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memories.core.base import BaseMemory
from memories.core.combined import leaves_of
from memories.core.config import (
    config_templates,
    create_memory,
    load_config,
    with_namespace,
    with_session,
)
from memories.errors import ConfigError
from memories.kernel.namespaces import as_namespace
from memories.stores.compaction import Compacted, compact
from memories.stores.erasure import Counts, StoreShare

__all__ = ["ErasureReport", "StoreErasure", "erase_user", "erasure_shares"]


@dataclass(frozen=True)
class StoreErasure:
    """One store's line of an erasure: what it held of the person, and what is left."""

    store: str
    """The store and the part of it (a history's session, a namespace of a Chroma folder...)."""
    found: Mapping[str, int]
    """What it held before, by kind (a dry run: what would go)."""
    remaining: Mapping[str, int] | None
    """What a count after erasing found, by kind; None for a dry run."""

    @property
    def removed(self) -> dict[str, int]:
        """What went, by kind (nothing for a dry run)."""
        if self.remaining is None:
            return {}
        return {kind: n - self.remaining.get(kind, 0) for kind, n in self.found.items()}

    def text(self, *, dry_run: bool) -> str:
        """The line for a person to read: the store, what went (would go), what is left."""
        shown = self.found if dry_run else self.removed
        kinds = ", ".join(f"{n} {kind}" for kind, n in shown.items()) or "nothing"
        left = "" if self.remaining is None else f"; {sum(self.remaining.values())} remaining"
        return f"{self.store}: {kinds}{left}"

    def to_dict(self) -> dict[str, Any]:
        """The line as JSON-ready data."""
        return {
            "store": self.store,
            "found": dict(self.found),
            "removed": self.removed,
            "remaining": None if self.remaining is None else dict(self.remaining),
        }


@dataclass(frozen=True)
class ErasureReport:
    """What :func:`erase_user` found, removed and left, store by store."""

    namespace: tuple[str, ...] | None
    """The namespace erased (None: none named)."""
    session: str | None
    """The session erased (None: none named)."""
    dry_run: bool
    """Whether nothing was erased (the report says what would go)."""
    stores: tuple[StoreErasure, ...] = field(default_factory=tuple)
    """One line per store, in the config's order."""
    files: tuple[Compacted, ...] = field(default_factory=tuple)
    """One line per file or database the stores deleted from: how it was compacted after."""

    @property
    def found(self) -> int:
        """Everything the stores held of the person before."""
        return sum(sum(line.found.values()) for line in self.stores)

    @property
    def removed(self) -> int:
        """Everything removed (0 for a dry run)."""
        return sum(sum(line.removed.values()) for line in self.stores)

    @property
    def remaining(self) -> int | None:
        """Everything a count after erasing still found (None for a dry run)."""
        if self.dry_run:
            return None
        return sum(sum((line.remaining or {}).values()) for line in self.stores)

    @property
    def complete(self) -> bool:
        """Whether the person's data was erased, a count after found none left, and every
        file it was in was compacted (no byte of it left in the files)."""
        compacted = all(line.complete for line in self.files)
        return not self.dry_run and self.remaining == 0 and compacted

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "namespace": None if self.namespace is None else ".".join(self.namespace),
            "session": self.session,
            "dry_run": self.dry_run,
            "found": self.found,
            "removed": self.removed,
            "remaining": self.remaining,
            "complete": self.complete,
            "stores": [line.to_dict() for line in self.stores],
            "files": [line.to_dict() for line in self.files],
        }

    def text(self, *, stores: bool = True) -> str:
        """The report for a person to read: a line per store (unless shown as each was done),
        kinds and counts, then the files compacted and the totals."""
        lines = [line.text(dry_run=self.dry_run) for line in self.stores] if stores else []
        lines += [f"compacted {line.text()}" for line in self.files]
        if self.dry_run:
            lines.append(f"would erase {self.found} items (dry run: nothing erased)")
        else:
            lines.append(f"erased {self.removed} items; {self.remaining} remaining")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.text()


def erasure_shares(
    config: Mapping[str, Any] | str | Path,
    *,
    namespace: str | tuple[str, ...] | list[str] | None = None,
    session: str | None = None,
) -> list[StoreShare]:
    """Where the config's memories keep the data of ``session`` and ``namespace``, each store once.

    Raises:
        ConfigError: neither is given, or the config is bad.
    """
    if namespace is None and session is None:
        raise ConfigError(
            "Name whose data to erase: a namespace (e.g. 'users.maya'), a session, or both."
        )
    options = load_config(config)
    if session is not None:
        options = with_session(options, session)
    if namespace is not None:
        options = with_namespace(options, as_namespace(namespace))
    templates = config_templates(options)
    if templates:
        raise ConfigError(
            f"The config's namespace is a template (it names {sorted(templates)}): say whose "
            "namespace to erase with namespace= (--namespace users.maya)."
        )
    memory = create_memory(options)
    shares: dict[str, StoreShare] = {}
    for leaf in leaves_of(memory):
        if isinstance(leaf, BaseMemory):
            found = leaf.erasure_shares(
                session=session is not None, namespace=namespace is not None
            )
            for share in found:
                shares.setdefault(share.store, share)
    return list(shares.values())


def erase_user(
    config: Mapping[str, Any] | str | Path,
    *,
    namespace: str | tuple[str, ...] | list[str] | None = None,
    session: str | None = None,
    dry_run: bool = False,
    progress: Callable[[StoreErasure], None] | None = None,
    compaction: bool = True,
) -> ErasureReport:
    """Erase a person's data from every store of every memory ``config`` names.

    Counts, erases store by store, counts again, then compacts the files erased
    from (see the module); running it again finishes a run stopped half-way.

    Args:
        config: a memory config (dict, or a YAML / TOML / JSON file), as
            :func:`~memories.create_memory` reads.
        namespace: the person's namespace (``"users.maya"`` or a tuple of labels):
            every long-term memory's data there, of every session.
        session: the person's chat session: the histories' messages and state,
            and what the session wrote into shared namespaces.
        dry_run: only count: the report says what would go.
        progress: called with each store's line as soon as that store is done.
        compaction: compact the files after erasing (the default). False leaves the
            erased bytes in the files until a later erasure of the same config
            compacts them: erasing many people, pass False to all but the last.

    Returns:
        Per store, what was found, removed and is left; per file, how it was
        compacted and how long that took.

    Raises:
        ConfigError: neither ``namespace`` nor ``session``, a bad config, or a
            store that cannot count what it holds (a LangChain vector store).
        BackendError: a store failed; what was erased stays erased, and a
            second run finishes the rest.
    """
    labels = None if namespace is None else as_namespace(namespace)
    shares = erasure_shares(config, namespace=labels, session=session)
    found = [(share, _counted(share)) for share in shares]
    lines = []
    for share, before in found:
        remaining = None
        if not dry_run:
            share.erase()
            remaining = _counted(share)
        line = StoreErasure(share.store, before, remaining)
        lines.append(line)
        if progress is not None:
            progress(line)
    files = () if dry_run or not compaction else compact(f for s in shares for f in s.files)
    return ErasureReport(labels, session, dry_run, tuple(lines), tuple(files))


def _counted(share: StoreShare) -> Counts:
    try:
        return share.count()
    except NotImplementedError as exc:
        raise ConfigError(f"{share.store}: {exc}") from exc
