"""Evidence recall of EntityMemory on LoCoMo's multi-hop and temporal questions, beside hybrid.

For each dev conversation two fresh ``EntityMemory()`` graphs are told every
turn in order, with the default ``policy="turn"``:

- **rules**: no model: the rule-based extractor, each turn as the speaker's
  own words (``user_name`` is the speaker, so "I" and "my" are theirs);
- **annotations**: a scripted model answering from the dataset's own
  annotations: for each observation LoCoMo lists for a turn (``"Caroline
  attended an LGBTQ support group..."``, with its dia_id), the relation
  ``speaker said <observation>`` valid from the session's date, through the
  same prompt, checks and commits a real model's reply goes through;

and a fresh ``VectorMemory()`` (in-memory Chroma, hybrid recall, default
settings) stores the same turns. Then each question of categories 1
(multi-hop) and 2 (temporal) is asked of all:

- **hybrid**: ``VectorMemory.search(question, k=10)``, the turns best first;
- **entity**: ``EntityMemory.recall(question)`` (default ``max_tokens`` and
  ``hops``), each shown relation giving the turns that caused it, then each
  shown entity the turns its summary's sentences come from;
- **fused**: hybrid's and the graph's rankings by reciprocal rank fusion
  (k=60, equal weights).

A question counts for recall-any@k when one of its evidence turns is in the
top k, recall-all@k when all are. The dataset is read where it lies
(``/work/shared/data/locomo`` or a path given), never copied.

    python benchmarks/entities_locomo.py [path/to/locomo_dev.json] [--conversations N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from benchmarks.locomo import (
    CATEGORY_NAMES,
    Conversation,
    RecallTally,
    Turn,
    document_text,
    load_conversations,
    scorable_questions,
    turn_date,
    turn_metadata,
)
from memories import EntityMemory
from memories.long_term.entity_graph.extractor import SENTENCES
from memories.long_term.vector import VectorMemory
from memories.stores.recall import ScoredId, reciprocal_rank_fusion

DEFAULT_DATA = Path("/work/shared/data/locomo/locomo_dev.json")
CATEGORIES = (1, 2)
KS = (5, 10)
GRAPHS = ("rules", "annotations")
_TURN = re.compile(r"^Human: (.*?)\nAI:", re.DOTALL | re.MULTILINE)


def spoken(turn: Turn) -> str:
    """What the speaker says, as the entity memory is told it (the photo's caption too)."""
    return f"{turn.text} [shared a photo: {turn.caption}]" if turn.caption else turn.text


class AnnotationScript(BaseChatModel):
    """A scripted model: for each turn in the prompt, the operations of its LoCoMo observations."""

    script: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "locomo-annotations"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        turns = str(messages[1].text).partition("New conversation turns:\n")[2]
        operations = [op for said in _TURN.findall(turns) for op in self.script.get(said, [])]
        reply = AIMessage(json.dumps(operations))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def annotation_script(conversation: Conversation, raw: dict[str, Any]) -> dict[str, Any]:
    """Turn text -> the operations of the observations LoCoMo gives for that turn."""
    by_id = {t.dia_id: t for t in conversation.turns}
    script: dict[str, list[dict[str, Any]]] = {}
    for session in (raw.get("observation") or {}).values():
        for speaker, facts in session.items():
            for fact in facts:
                if not isinstance(fact, list) or len(fact) < 2:
                    continue
                text, dia_id = fact[0], fact[1]
                turn = by_id.get(str(dia_id)) if isinstance(dia_id, str) else None
                if turn is None or not isinstance(text, str) or not text.strip():
                    continue  # a malformed or missing dia_id: left out
                when = turn_date(turn)
                operation = {"op": "relate", "subject": speaker, "predicate": "said"}
                operation["value"] = text.strip()
                if when is not None:
                    operation["valid_at"] = when.date().isoformat()
                script.setdefault(spoken(turn), []).append(operation)
    return script


def built_graph(
    conversation: Conversation, url: str, kind: str, raw: dict[str, Any]
) -> tuple[EntityMemory, float]:
    """The conversation told to a fresh EntityMemory, turn by turn; and the seconds it took."""
    llm = AnnotationScript(script=annotation_script(conversation, raw)) if kind != "rules" else None
    memory = EntityMemory(url=url, namespace=("locomo", kind, conversation.sample_id), llm=llm)
    started = time.perf_counter()
    for turn in conversation.turns:
        memory.user_name = turn.speaker
        memory.save_context({"input": spoken(turn)}, {"output": ""})
    assert memory.status().pending == 0, memory.status()
    return memory, time.perf_counter() - started


def turn_sources(memory: EntityMemory, conversation: Conversation) -> dict[str, list[str]]:
    """Each relation's id -> the dia_ids of the turns that caused it."""
    by_text: dict[str, list[str]] = {}
    for turn in conversation.turns:
        by_text.setdefault(spoken(turn), []).append(turn.dia_id)
    sources: dict[str, list[str]] = {}
    for relation in memory.store.recorded(memory.namespace).relations.values():
        sources[relation.id] = [
            dia_id
            for messages in relation.turns
            for message in messages
            for dia_id in by_text.get(str(message.text), [])
        ]
    return sources


def sentence_sources(conversation: Conversation) -> dict[str, list[str]]:
    """Each sentence said -> the dia_ids of the turns that said it (an entity's summary is some)."""
    found: dict[str, list[str]] = {}
    for turn in conversation.turns:
        for sentence in SENTENCES.split(spoken(turn).replace("\u2019", "'")):
            found.setdefault(sentence.strip(), []).append(turn.dia_id)
    return found


def entity_ranking(
    memory: EntityMemory,
    question: str,
    sources: dict[str, list[str]],
    sentences: dict[str, list[str]],
) -> tuple[list[str], int]:
    """The turns behind what ``recall(question)`` shows (relations', then summaries'); how many
    relations it showed."""
    recalled = memory.recall(question)
    ranked: list[str] = []
    for relation in recalled.relations:
        ranked += sources.get(relation.id, [])
    for entity in recalled.entities:
        for sentence in SENTENCES.split(entity.summary):
            ranked += sentences.get(sentence.strip(), [])
    return list(dict.fromkeys(ranked)), len(recalled.relations)


def fused(hybrid: list[str], entity: list[str]) -> list[str]:
    rankings = [
        [ScoredId(i, 1.0 / (r + 1)) for r, i in enumerate(ranking)] for ranking in (hybrid, entity)
    ]
    return [s.id for s in reciprocal_rank_fusion([r for r in rankings if r])]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    args = parser.parse_args(argv)
    conversations = load_conversations(args.data)[: args.conversations]
    raws = {r["sample_id"]: r for r in json.loads(args.data.read_text(encoding="utf-8"))}
    modes = ["hybrid", *(f"{g} {m}" for g in GRAPHS for m in ("alone", "fused"))]
    tallies = {mode: RecallTally(ks=KS) for mode in modes}
    shown = {g: 0 for g in GRAPHS}
    seconds = {g: 0.0 for g in GRAPHS}
    sizes = {g: [0, 0, 0] for g in GRAPHS}
    workdir = Path(tempfile.mkdtemp(prefix="entities-locomo-"))
    url = f"sqlite:///{workdir / 'graphs.db'}"
    collection = f"entities-locomo-{uuid.uuid4().hex[:8]}"
    turns = 0
    for conversation in conversations:
        turns += len(conversation.turns)
        graphs = {}
        for kind in GRAPHS:
            memory, took = built_graph(conversation, url, kind, raws[conversation.sample_id])
            seconds[kind] += took
            graph = memory.store.recorded(memory.namespace)
            current = len(graph.current())
            sizes[kind][0] += len(graph.standing())
            sizes[kind][1] += current
            sizes[kind][2] += len(graph.relations) - current
            graphs[kind] = (memory, turn_sources(memory, conversation))
        sentences = sentence_sources(conversation)
        vector = VectorMemory(
            mode="memory", collection=collection, namespace=("locomo", conversation.sample_id)
        )
        vector.add(
            [document_text(t) for t in conversation.turns],
            metadatas=[turn_metadata(t) for t in conversation.turns],
            ids=[t.dia_id for t in conversation.turns],
            progress=False,
        )
        for question in scorable_questions(conversation):
            if question.category not in CATEGORIES:
                continue
            hybrid = [r.id for r in vector.search(question.text, k=max(KS))]
            tallies["hybrid"].add(question.category, question.evidence, hybrid)
            for kind, (memory, sources) in graphs.items():
                entity, relations = entity_ranking(memory, question.text, sources, sentences)
                shown[kind] += relations
                tallies[f"{kind} alone"].add(question.category, question.evidence, entity)
                both = fused(hybrid, entity)
                tallies[f"{kind} fused"].add(question.category, question.evidence, both)
        print(f"{conversation.sample_id}: {len(conversation.turns)} turns", file=sys.stderr)
        vector.erase_namespace()
    print(report(conversations, tallies, shown, seconds, sizes, turns))
    return 0


def report(
    conversations: Sequence[Conversation],
    tallies: dict[str, RecallTally],
    shown: dict[str, int],
    seconds: dict[str, float],
    sizes: dict[str, list[int]],
    turns: int,
) -> str:
    asked = {c: tallies["hybrid"].count(c) for c in CATEGORIES}
    lines = [
        f"## EntityMemory on LoCoMo ({len(conversations)} dev conversations, "
        f"{sum(asked.values())} questions: "
        + ", ".join(f"{asked[c]} {CATEGORY_NAMES[c]}" for c in CATEGORIES)
        + ")\n",
        "| evidence recall | "
        + " | ".join(f"{CATEGORY_NAMES[c]} any@{k}" for c in CATEGORIES for k in KS)
        + " | both all@10 |",
        "|---" * (len(CATEGORIES) * len(KS) + 2) + "|",
    ]
    labels = {
        "hybrid": "`VectorMemory()` hybrid recall alone",
        "rules alone": "`EntityMemory()`, rule-based extractor, alone",
        "rules fused": "hybrid + rule-based graph (RRF)",
        "annotations alone": "`EntityMemory()`, scripted from annotations, alone",
        "annotations fused": "hybrid + annotated graph (RRF)",
    }
    for mode, tally in tallies.items():
        cells = [f"{tally.rate('any', k, c):.1f}" for c in CATEGORIES for k in KS]
        lines.append(
            f"| {labels[mode]} | " + " | ".join(cells) + f" | {tally.rate('all', 10):.1f} |"
        )
    questions = max(sum(asked.values()), 1)
    lines.append("")
    for kind in GRAPHS:
        entities, current, closed = sizes[kind]
        lines.append(
            f"Graph {kind}: {entities} entities, {current} current and {closed} closed relations; "
            f"built at {1000 * seconds[kind] / max(turns, 1):.1f} ms a turn (SQLite, "
            f"policy='turn'); {shown[kind] / questions:.1f} relations shown per question."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
