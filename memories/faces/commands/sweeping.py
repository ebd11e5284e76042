"""``memories sweep`` and ``memories reshard``: upkeep of a config's stores, every namespace."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memories.core.base import ChatMemory
from memories.core.langchain import LangChainBaseMemory
from memories.core.members import chat_memories, searchable_memories
from memories.faces.commands.opening import leaf_memories
from memories.kernel.capabilities import capabilities_of
from memories.stores.history.base import ChatHistory
from memories.stores.history.retained import RetainedHistory
from memories.stores.sql import redacted

if TYPE_CHECKING:
    from memories.integrations.chroma import Demotion


@dataclass(frozen=True, slots=True)
class Swept:
    """What a sweep removed (or, in a dry run, would remove) from one memory's store."""

    memory: str
    """The memory's config type and its store, as a reader names them."""
    policy: dict[str, Any]
    """The retention or time to live it applied (its config form); ``{}``: a chat
    memory without a retention, whose history keeps every message."""
    rows: dict[str, int]
    """Items deleted per session or namespace (those with none left out)."""
    history: bool = False
    """Whether it swept a chat history (messages per session), not items per namespace."""

    def describe(self) -> str:
        """What the policy deletes, in words (``keep_days: 7`` is "messages older than 7 days")."""
        if self.history:
            if not self.policy:
                return (
                    "no retention: every message is kept (retention: {keep_days: N} or "
                    "{keep_messages: N} expires them)"
                )
            parts = []
            if self.policy.get("keep_days") is not None:
                parts.append(f"messages older than {self.policy['keep_days']:g} days")
            if self.policy.get("keep_messages") is not None:
                parts.append(f"all but the newest {self.policy['keep_messages']} of a session")
            return "deletes " + " and ".join(parts)
        ttl = self.policy.get("ttl")
        if ttl is None:
            return "deletes items past the time to live each was saved with (no default ttl)"
        return f"deletes items past their time to live ({ttl:g} minutes unless saved with another)"


def sweep(
    memory: LangChainBaseMemory,
    *,
    dry_run: bool = False,
    session: bool = False,
    namespace: bool = False,
) -> list[Swept]:
    """Delete what each member's retention or time to live expired, in every session or namespace.

    ``session`` (``namespace``): only the memory's own, and only the members kept so.
    Members that nothing can expire are left out; a chat memory without a retention is
    listed with an empty policy. Derived state is
    never touched; a crash mid-way leaves a shorter sweep for the next run.
    """
    done = []
    seen: set[tuple[str, str]] = set()
    for leaf in leaf_memories(memory):
        if isinstance(leaf, ChatMemory):
            if namespace and not session:
                continue
            policy = {} if leaf.retention is None else leaf.retention.to_config()
            name = f"{leaf.config_type} on {history_name(leaf.chat_memory)}"
            held = (history_name(leaf.chat_memory), json.dumps(policy))
            if held in seen:  # two members of one history: one sweep
                continue
            seen.add(held)
            rows = leaf.sweep(dry_run=dry_run, own=session) if policy else {}
            done.append(Swept(name, policy, rows, history=True))
        elif capabilities_of(leaf).expires and not (session and not namespace):
            store = redacted(leaf.expiry.url)  # type: ignore[attr-defined]
            name = f"{getattr(leaf, 'config_type', type(leaf).__name__)} on {store}"
            rows = leaf.sweep(dry_run=dry_run, own=namespace)  # type: ignore[attr-defined]
            done.append(Swept(name, {"ttl": getattr(leaf, "ttl", None)}, rows))
    return done


def sweep_report(
    memory: LangChainBaseMemory,
    found: list[Swept],
    *,
    dry_run: bool,
    session: str | None = None,
    namespace: str | None = None,
) -> tuple[list[str], list[str]]:
    """What :func:`sweep` did, in words: the lines per store, and notes on what it left out.

    ``session`` and ``namespace``: the ones the sweep was limited to, if any.
    """
    verb = "would delete" if dry_run else "deleted"
    lines: list[str] = []
    if not chat_memories(memory):
        lines.append("histories: none in this config (it keeps no transcript of the conversations)")
    elif namespace and not session:
        lines.append(f"histories: not swept (--namespace {namespace} names no session)")
    for swept in found:
        if not swept.policy:
            lines.append(f"{swept.memory}: {swept.describe()}")
            continue
        if swept.history:
            scope = f"session {session} only" if session else "every session"
            unit, where = "messages", "session"
        else:
            scope = f"namespace {namespace} only" if namespace else "every namespace"
            unit, where = "items", "namespace"
        total = sum(swept.rows.values())
        lines.append(f"{swept.memory}: {swept.describe()}; {verb} {total} {unit} ({scope})")
        lines += [f"  {where} {place}: {count}" for place, count in sorted(swept.rows.items())]
    notes = []
    leaves = leaf_memories(memory)
    items_expire = any(capabilities_of(m).expires and not isinstance(m, ChatMemory) for m in leaves)
    if session and not namespace and items_expire:
        notes.append(f"--session {session} sweeps histories only; --namespace sweeps the rest.")
    if not any(swept.policy for swept in found) and not notes:
        notes.append("no memory of this config has a retention or a time to live.")
    return lines, notes


def history_name(history: ChatHistory) -> str:
    """A chat history's store as a reader names it (``sqlite history /data/chat.db``)."""
    if isinstance(history, RetainedHistory):
        history = history.history
    try:
        config = history.to_config()
    except NotImplementedError:
        return repr(history)
    place = config.get("path") or config.get("url")
    return f"{config.get('type')} history {redacted(place)}" if place else repr(history)


def reshard(memory: LangChainBaseMemory, *, dry_run: bool = False) -> list[Demotion]:
    """Move the small namespaces of the memory's Chroma stores from collections into shards.

    Each store is resharded once and whole, every namespace, not only the config's
    (:meth:`ChromaStore.demote`); pgvector has no collections and is skipped.
    """
    done: list[Demotion] = []
    seen: set[tuple[str, str]] = set()
    for member in searchable_memories(memory):
        try:
            store = member.store
        except NotImplementedError:  # pgvector: one table, nothing to reshard
            continue
        # By place, not target: a copy of a folder has the original's id, and its own collections.
        collections = (store.location, store.collection_prefix)
        if collections not in seen:
            seen.add(collections)
            done += store.reshard(dry_run=dry_run)
    return done
