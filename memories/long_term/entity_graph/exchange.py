"""An entity graph as export records, and the changes that import them: no I/O.

The records are those ``memories export`` writes (docs/memories/entity-graph.md);
an import writes only what the graph lacks or holds differently, under the
exported ids, so importing twice writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from memories.errors import InvalidInputError
from memories.kernel.messages import dump_message, load_message
from memories.stores.documents import Change, PendingTurn
from memories.stores.entities.temporal_graph import ENTITY_PREFIX, RELATION_PREFIX, Graph, utc

__all__ = ["check_record", "checked", "graph_records", "import_commits"]

_ENTITY_FIELDS = ("name", "type", "summary", "aliases", "merged_into", "merge_reason")
_RELATION_FIELDS = ("subject", "predicate", "object", "value", "valid_at", "invalid_at", "ended")


def graph_records(graph: Graph, recorded: Graph) -> list[dict[str, Any]]:
    """The records of a graph: ``graph`` as stored now, ``recorded`` for the relations' turns."""
    records: list[dict[str, Any]] = []
    for key, document in sorted(graph.documents.items()):
        if key.startswith(ENTITY_PREFIX):
            entity_id = key.removeprefix(ENTITY_PREFIX)
            records.append({"graph": "entity", "id": entity_id, **_entity_document(document)})
    for entity_id, entity in sorted(recorded.former.items()):
        if ENTITY_PREFIX + entity_id not in graph.documents:
            document = _entity_document({name: getattr(entity, name) for name in _ENTITY_FIELDS})
            records.append({"graph": "entity", "id": entity_id, **document, "cleared": True})
    relations = [
        (key.removeprefix(RELATION_PREFIX), document)
        for key, document in graph.documents.items()
        if key.startswith(RELATION_PREFIX)
    ]
    for relation_id, document in sorted(relations, key=lambda r: (r[1]["valid_at"], r[0])):
        known = recorded.relations.get(relation_id)
        turns, ended_by = (known.turns, known.ended_by) if known is not None else ((), ())
        records.append(
            {
                "graph": "relation",
                "id": relation_id,
                **_relation_document(document, iso=True),
                "turns": [_dumped(turn) for turn in turns],
                "ended_by": [_dumped(turn) for turn in ended_by],
            }
        )
    return records


def check_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` as an import takes it, or ValueError saying what is wrong with it."""
    kind, record_id = record.get("graph"), record.get("id")
    if not isinstance(record_id, str) or not record_id:
        raise ValueError(f"id must be a non-empty string, got {record_id!r:.80}")
    if kind == "entity":
        document = _entity_document(record)
        if not isinstance(document["name"], str) or not document["name"]:
            raise ValueError(f"an entity's name must be a non-empty string, got {record!r:.120}")
        if not isinstance(document["aliases"], list) or not all(
            isinstance(a, str) for a in document["aliases"]
        ):
            raise ValueError(f"aliases must be a list of names, got {document['aliases']!r:.80}")
        cleared = bool(record.get("cleared"))
        return {"graph": kind, "id": record_id, **document, "cleared": cleared}
    if kind == "relation":
        document = _relation_document(record, iso=False)
        for part in ("subject", "predicate"):
            if not isinstance(document[part], str) or not document[part]:
                raise ValueError(f"a relation's {part} must be a non-empty string")
        if (document["object"] is None) == (document["value"] is None):
            raise ValueError("a relation needs exactly one of object (an entity id) or value")
        turns = [_loaded(turn) for turn in record.get("turns") or []]
        ended_by = [_loaded(turn) for turn in record.get("ended_by") or []]
        return {"graph": kind, "id": record_id, **document, "turns": turns, "ended_by": ended_by}
    raise ValueError(f'graph must be "entity" or "relation", got {kind!r:.40}')


def import_commits(
    graph: Graph, recorded: Graph, records: Sequence[Mapping[str, Any]]
) -> list[tuple[str, Change, int]]:
    """The changes writing the checked ``records`` the graph lacks or holds differently.

    ``graph`` is the graph as stored, ``recorded`` as recorded (with its
    cleared entities). A relation new to the graph and ended in the record
    is written as it began and then as it ended, each change with its turns,
    as its history had them; a cleared entity new to it, as written and
    cleared. An entity cleared here since is not brought back.

    Raises:
        InvalidInputError: a relation names an entity that neither the
            records nor the graph hold (a partial file).
    """
    _check_names(recorded, records)
    commits: list[tuple[str, Change, int]] = []
    versions = graph.versions()
    for record in records:
        if record["graph"] == "entity":
            key, document = ENTITY_PREFIX + record["id"], _entity_document(record)
            held = graph.documents.get(key)
            if held is None and record["id"] in recorded.former:
                continue  # cleared here: an import never brings it back
            if record["cleared"]:
                if held is None:
                    commits.append((key, Change(document, "insert", []), 0))
                    commits.append((key, Change(None, "clear", []), 1))
                continue
            if held is None or _entity_document(held) != document:
                kind = "import" if held is not None else "insert"
                commits.append((key, Change(document, kind, []), versions.get(key, 0)))
            continue
        key, document = RELATION_PREFIX + record["id"], _relation_document(record, iso=False)
        held = graph.documents.get(key)
        if held is not None:
            if _relation_document(held, iso=True) != _relation_document(document, iso=True):
                commits.append((key, Change(document, "import", []), versions[key]))
            continue
        caused, ended_by = _turns(record["turns"]), _turns(record["ended_by"])
        if document["invalid_at"] is None:
            commits.append((key, Change(document, "insert", [], caused), 0))
        else:
            began = {**document, "invalid_at": None, "ended": None}
            commits.append((key, Change(began, "insert", [], caused), 0))
            commits.append((key, Change(document, "end", [], ended_by), 1))
    return commits


def _check_names(recorded: Graph, records: Sequence[Mapping[str, Any]]) -> None:
    known = {*recorded.entities, *recorded.former}
    known.update(r["id"] for r in records if r["graph"] == "entity")
    for record in records:
        if record["graph"] != "relation":
            continue
        for part in ("subject", "object"):
            if record[part] is not None and record[part] not in known:
                raise InvalidInputError(
                    f"The relation {record['id']!r} names the entity {record[part]!r}, which "
                    "neither the file nor the graph holds: import the whole export. Nothing "
                    "was imported."
                )


def _entity_document(document: Mapping[str, Any]) -> dict[str, Any]:
    found = {name: document.get(name) for name in _ENTITY_FIELDS}
    found["aliases"] = list(found["aliases"] or [])
    found["summary"] = found["summary"] or ""
    return found


def _relation_document(document: Mapping[str, Any], *, iso: bool) -> dict[str, Any]:
    """The stored fields of a relation, its times as ISO text (``iso``) or Unix time."""
    found = {name: document.get(name) for name in _RELATION_FIELDS}
    found["valid_at"] = _time(found["valid_at"], iso=iso, what="valid_at")
    if found["invalid_at"] is not None:
        found["invalid_at"] = _time(found["invalid_at"], iso=iso, what="invalid_at")
    return found


def _time(value: Any, *, iso: bool, what: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        when = utc(float(value))
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(f"{what} must be an ISO time, got {value!r:.80}") from exc
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
    else:
        raise ValueError(f"{what} must be an ISO time, got {value!r:.80}")
    return when.isoformat() if iso else when.timestamp()


def _dumped(turn: Sequence[Any]) -> list[Any]:
    return [json.loads(dump_message(message)) for message in turn]


def _loaded(turn: Any) -> list[Any]:
    if not isinstance(turn, list):
        raise ValueError(f"a turn must be a list of messages, got {turn!r:.80}")
    for message in turn:
        load_message(json.dumps(message))  # checked now: written as it is later
    return turn


def _turns(turns: Sequence[list[Any]]) -> tuple[PendingTurn, ...]:
    return tuple(
        PendingTurn(0, tuple(load_message(json.dumps(m)) for m in turn), 0.0) for turn in turns
    )


def checked(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every record checked (:func:`check_record`), or InvalidInputError naming the bad one."""
    try:
        return [check_record(record) for record in records]
    except ValueError as exc:
        raise InvalidInputError(f"Not an entity graph record ({exc}); nothing imported.") from exc
