"""The rule-based extractor: entities and relations from patterns, when no model is given.

It reads what the human says, sentence by sentence, and proposes the operations
a model would (:mod:`memories.long_term.entity_graph.operations`). Its patterns
and what they miss: docs/memories/entity-graph.md, "Without a model".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from memories.kernel.messages import message_text
from memories.long_term.entity_graph.operations import predicate_key
from memories.stores.entities.temporal_graph import Graph, name_key

__all__ = ["SENTENCES", "extract"]

_NAME = r"[A-Z][\w'-]*(?: (?:[A-Z][\w'-]*|of|de|da|van|von))*(?<! of)"
#: Where one sentence ends and the next begins.
SENTENCES = re.compile(r"(?<=[.!?])\s+")
_WORD = r"[a-z]+(?: [a-z]+)?"
#: Who a pattern is about: the speaker ("I", "my") or someone named ("Melanie", "Melanie's").
_WHO = rf"(?P<subject>I|{_NAME})"
_WHOSE = rf"(?:[Mm]y|(?P<subject>{_NAME})'s)"
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("end_lives", re.compile(rf"\b{_WHO} no longer lives? in (?P<object>{_NAME})")),
    ("end_works", re.compile(rf"\b{_WHO} no longer works? (?:at|for) (?P<object>{_NAME})")),
    (
        "end_my",
        re.compile(rf"\b{_WHOSE} (?P<predicate>{_WORD}) is not (?P<object>{_NAME}|\w+) any ?more"),
    ),
    (
        "lives_in",
        re.compile(
            rf"\b{_WHO} (?:live|lives|moved|has moved|have moved|am moving|is moving) (?:in|to) "
            rf"(?P<object>{_NAME})"
        ),
    ),
    (
        "works_at",
        re.compile(rf"\b{_WHO} (?:works?|started working) (?:at|for) (?P<object>{_NAME})"),
    ),
    (
        "my_is",
        re.compile(
            rf"\b{_WHOSE} (?P<predicate>{_WORD}) is (?!not\b)"
            rf"(?P<object>{_NAME}|[\w-]+)\b(?! any ?more)"
        ),
    ),
    ("is_my", re.compile(rf"(?P<object>{_NAME}) is my (?P<predicate>{_WORD})\b")),
    ("my_named", re.compile(rf"\b{_WHOSE} (?P<predicate>[a-z]+) (?P<object>{_NAME})")),
]
#: Capitalised words that are not names when they open a sentence (or stand alone).
_COMMON = frozenset(
    """i i'm i've i'd i'll my me we our you your he she it they this that these those the a an
    and but or so yes no not hi hello hey thanks thank ok okay well oh what who when where why
    how which did do does is are was were will would can could should have has had there here
    just also maybe sure great good nice wow sorry please let if then today tomorrow yesterday
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december""".split()  # noqa: SIM905
)


def extract(
    turns: Sequence[Sequence[BaseMessage]], graph: Graph, user: str
) -> list[dict[str, Any]]:
    """The operations the rules find in the human messages of ``turns``."""
    operations: list[dict[str, Any]] = []
    known = {name_key(e.name): e.name for e in graph.entities.values()}
    for e in graph.entities.values():
        known.update((name_key(a), a) for a in e.aliases)
    summaries = {e.name: e.summary for e in graph.standing()}
    for turn in turns:
        for message in turn:
            if not isinstance(message, HumanMessage):
                continue
            for sentence in SENTENCES.split(message_text(message)):
                operations += _sentence(sentence.strip(), user, known, summaries)
    return operations


def _sentence(
    sentence: str, user: str, known: dict[str, str], summaries: dict[str, str]
) -> list[dict[str, Any]]:
    operations: list[dict[str, Any]] = []
    if not sentence:
        return operations
    sentence = sentence.replace("\u2019", "'")
    names = _names(sentence, known)
    related: set[str] = set()
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(sentence):
            target = match.group("object")
            if target in related:
                continue
            related.add(target)
            operations += _relation(kind, match, target, user)
    for name in names:
        operations += _entity(name, sentence, known, summaries)
    return _ordered(operations)


def _relation(kind: str, match: re.Match[str], target: str, user: str) -> list[dict[str, Any]]:
    groups = match.groupdict()
    subject = groups.get("subject")
    if subject is not None and subject != "I" and subject.casefold() in _COMMON:
        return []  # "She lives in Paris": whom "she" means is not known here
    predicate = predicate_key(groups.get("predicate") or kind.removeprefix("end_"))
    predicate = {"lives": "lives_in", "works": "works_at"}.get(predicate, predicate)
    is_name = target[:1].isupper() and target.casefold() not in _COMMON
    who = user if subject in (None, "I") else subject
    relation: dict[str, Any] = {"op": "relate", "subject": who, "predicate": predicate}
    relation["object" if is_name else "value"] = target
    if kind.startswith("end_"):
        return [{**relation, "op": "end"}]
    if kind in ("my_is", "lives_in", "works_at"):
        relation["replaces"] = "all"
    return [relation]


def _names(sentence: str, known: dict[str, str]) -> list[str]:
    """The capitalised names of a sentence; one opening it only if known or of several words."""
    found = []
    for match in re.finditer(_NAME, sentence):
        words = [re.sub(r"'s$", "", w) for w in match.group(0).split()]
        if words[0].casefold() in _COMMON:
            words = words[1:]
            if not words or words[0][:1].islower():
                continue
        name = " ".join(words)
        opening = match.start() == 0 and len(words) == 1
        key = name_key(name)
        if opening and key not in known and not any(_short_form(key, k) for k in known):
            continue  # "Researching ..." opens a sentence; a name is capitalised elsewhere too
        found.append(name)
    return list(dict.fromkeys(found))


def _entity(
    name: str, sentence: str, known: dict[str, str], summaries: dict[str, str]
) -> list[dict[str, Any]]:
    key = name_key(name)
    if key in known:
        earlier = [s for s in SENTENCES.split(summaries.get(known[key], "")) if s]
        said = " ".join([*earlier, sentence][-3:])
        summaries[known[key]] = said
        return [{"op": "entity", "name": known[key], "summary": said}]
    longer = next((n for k, n in known.items() if k != key and _short_form(key, k)), None)
    shorter = next((n for k, n in known.items() if k != key and _short_form(k, key)), None)
    known[key] = name
    summaries[name] = sentence
    operations: list[dict[str, Any]] = [{"op": "entity", "name": name, "summary": sentence}]
    if longer is not None:
        reason = f"{name!r} is a short form of {longer!r}"
        operations.append({"op": "merge", "id": name, "into": longer, "reason": reason})
    elif shorter is not None:
        reason = f"{shorter!r} is a short form of {name!r}"
        operations.append({"op": "merge", "id": shorter, "into": name, "reason": reason})
    return operations


def _short_form(short: str, long: str) -> bool:
    return (
        len(short) >= 3 and " " not in short and long.split()[0].startswith(short) and long != short
    )


def _ordered(operations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entities first (a relation may name them), then the rest in order."""
    return sorted(operations, key=lambda o: o["op"] != "entity")
