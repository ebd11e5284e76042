"""Recall across datasets: every ranker side by side, defaults chosen leave-one-dataset-out.

Four kinds of memory, each searched with the questions asked of it:

- ``locomo``: LoCoMo dev (five conversations between two friends, short
  turns), every turn stored with ``add`` as ``benchmarks/locomo.py`` stores
  it; recall-any@10 of the evidence turns (questions of categories 1-4).
- ``lme-sessions``: LongMemEval_S dev at session level, as LongMemEval
  scores it: per question its whole haystack (38-60 sessions), the user's
  turns stored with ``add``; sessions ranked by their first turn in the
  results; recall-all@5 of the answer sessions.
- ``lme-small``: the same questions against a small memory filled as an app
  fills one: the answer sessions plus the first two other sessions of the
  haystack, saved exchange by exchange with ``save_context`` (input = the
  user's message, output = the assistant's reply), one ``session_id`` per
  session, one namespace per question; a turn is gold when either side has
  ``has_answer``; hit@3 (and hit@1, MRR@10).
- ``demo``: the conversation of :mod:`memories.faces.demo` saved with
  ``save_context``, asked "sugar", "coffee" and "what do I drink"; a hit when
  the first result answers (says sugar, coffee, or the user's current drink).

Rankers, in one run: the default (``RecallConfig()``), our BM25 alone
(``mode="bm25"``), dense alone (``mode="dense"``), and a plain BM25 written
here independently of ours (:class:`PlainBM25`). Rankings re-rank
pre-computed candidates with the functions a memory calls (an exact cosine
search standing in for the vector store); ``--shipped`` also runs the
shipped ``VectorMemory`` end to end on the small memories and the demo.
``--turns whole`` or ``--turns input`` embeds a ``save_context`` turn by one of
its texts alone instead of as shipped (the mean of both,
:mod:`memories.stores.vector.embedded`).
"contradicts" is the share of queries whose top 10 rank a result above one
whose reported score is more than twice as high and at least 0.3 (ours report
their rank scores on the calibrated scale: :func:`calibrated_scale`).

Then the leave-one-dataset-out choice: for each of locomo, lme-sessions and
lme-small, a grid of recall settings is scored on the other two (mean of
their headline figures) and the best is reported on the held-out one.

Run from the repository root::

    python benchmarks/recall_datasets.py [--data ../shared/data] [--cache /tmp/...npz]

``--longmemeval FILE`` asks LongMemEval questions that are not in the dev split
(a ``.json.gz`` list in the same schema), so the defaults chosen on the dev
split can be scored on questions they were never chosen on.

Embeddings of every text are cached in ``--cache`` between runs (a file
outside the repository; the data are never copied into it).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.embeddings import Embeddings

from benchmarks import locomo
from memories.kernel.steps import run
from memories.stores.recall import (
    RecallConfig,
    ScoredId,
    TurnPosition,
    named_speakers,
    rank_candidates,
    speaker_key,
)
from memories.stores.recall.scores import DEFAULT_CALIBRATION, calibrated_scale, term_coverage
from memories.stores.vector.embedded import OUTPUT_AT_KEY, document_vectors, embedded_texts

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data"
DEFAULT_CACHE = Path("/tmp/recall_datasets_embeddings.npz")
#: How many results a search returns here (LongMemEval sessions need many turns for 5 sessions).
DEPTH = {"locomo": 10, "lme-sessions": 50, "lme-small": 10, "demo": 10}
#: The figure each dataset is judged by, and chosen on.
HEADLINE = {"locomo": "any@10", "lme-sessions": "all@5", "lme-small": "hit@3", "demo": "hit@1"}
#: The datasets held out in turn (the demo's three queries are a check, never tuned on).
HELD_OUT = ("locomo", "lme-sessions", "lme-small")
#: Questions per dataset (filled in by main), to pool the contradiction rate over questions.
ASKED: Counter[str] = Counter()
#: How many non-answer sessions a small memory holds besides the answer sessions.
OTHER_SESSIONS = 2
#: The deepest candidate lists a config may ask for.
MAX_CANDIDATES = 200
_TODAY = datetime.now(UTC).date()


# --------------------------------------------------------------------------- the data


@dataclass(frozen=True)
class Doc:
    """One stored document, as a memory stores it."""

    id: str
    text: str
    session: str
    turn: int
    speakers: tuple[str, ...]
    when: date | None
    output_at: int | None = None
    """A turn saved with ``save_context``: where its reply starts (its metadata says so too)."""


@dataclass(frozen=True)
class Query:
    """A question, with what answers it."""

    text: str
    gold: frozenset[str]
    """Ids of the documents that answer it."""
    sessions: tuple[str, ...] = ()
    """For session-level scoring: the sessions that answer it."""


@dataclass(frozen=True)
class Case:
    """One memory (a namespace) and the questions asked of it."""

    dataset: str
    docs: tuple[Doc, ...]
    queries: tuple[Query, ...]


def locomo_cases(path: Path) -> list[Case]:
    """Each LoCoMo conversation, stored as ``benchmarks/locomo.py`` stores it."""
    cases = []
    for conversation in locomo.load_conversations(path):
        docs = tuple(
            Doc(
                t.dia_id,
                locomo.document_text(t),
                f"{conversation.sample_id}/{t.session}",
                t.position,
                (t.speaker,),
                d.date() if (d := locomo.turn_date(t)) else None,
            )
            for t in conversation.turns
        )
        queries = tuple(
            Query(q.text, frozenset(q.evidence)) for q in locomo.scorable_questions(conversation)
        )
        cases.append(Case("locomo", docs, queries))
    return cases


def _lme_date(text: str) -> date | None:
    try:
        return datetime.strptime(text.split(" ")[0], "%Y/%m/%d").date()
    except ValueError:
        return None


def lme_session_cases(questions: Sequence[dict[str, Any]]) -> list[Case]:
    """Each question's whole haystack, the user's turns stored with ``add``."""
    cases = []
    for n, q in enumerate(questions):
        docs = []
        for sid, when, session in zip(
            q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True
        ):
            for i, turn in enumerate(session):
                if turn["role"] == "user" and turn["content"].strip():
                    docs.append(Doc(f"{n}/{sid}/{i}", turn["content"], sid, i, (), _lme_date(when)))
        query = Query(q["question"], frozenset(), tuple(q["answer_session_ids"]))
        cases.append(Case("lme-sessions", tuple(docs), (query,)))
    return cases


def exchange_text(user: str, reply: str) -> str:
    """What ``save_context({"input": user}, {"output": reply})`` stores."""
    return f"input: {user}\noutput: {reply}"


def exchange_doc(doc_id: str, user: str, reply: str, session: str, turn: int) -> Doc:
    """The document ``save_context`` stores for one exchange."""
    text = exchange_text(user, reply)
    return Doc(doc_id, text, session, turn, ("human", "ai"), _TODAY, len(f"input: {user}") + 1)


def exchanges(session: Sequence[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """A session's (user, reply, has_answer) exchanges, as an app saves them."""
    out, i = [], 0
    while i < len(session):
        turn = session[i]
        reply = session[i + 1] if i + 1 < len(session) else None
        if turn["role"] == "user" and reply is not None and reply["role"] == "assistant":
            gold = bool(turn.get("has_answer") or reply.get("has_answer"))
            out.append((turn["content"], reply["content"], gold))
            i += 2
        else:
            i += 1
    return out


def lme_small_cases(questions: Sequence[dict[str, Any]]) -> list[Case]:
    """Each question's answer sessions and two others, saved exchange by exchange."""
    cases = []
    for n, q in enumerate(questions):
        answer = set(q["answer_session_ids"])
        others = [s for s in q["haystack_session_ids"] if s not in answer][:OTHER_SESSIONS]
        keep = answer | set(others)
        docs, gold = [], set()
        for sid, session in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            if sid not in keep:
                continue
            for i, (user, reply, has_answer) in enumerate(exchanges(session)):
                doc = exchange_doc(f"{n}/{sid}/{i}", user, reply, sid, i)
                docs.append(doc)
                if has_answer:
                    gold.add(doc.id)
        if gold:
            cases.append(Case("lme-small", tuple(docs), (Query(q["question"], frozenset(gold)),)))
    return cases


def demo_cases() -> list[Case]:
    """The demo's conversation, read from the module, and its three sanity queries."""
    from memories.faces import demo

    docs = tuple(
        exchange_doc(f"demo/{s}/{i}", user, reply, f"s{s}", i)
        for s, session in enumerate(demo.SESSIONS)
        for i, (user, reply) in enumerate(session)
    )
    _, current = demo.CURRENT_PREFERENCE

    def answering(*phrases: str) -> frozenset[str]:
        return frozenset(d.id for d in docs if any(p in d.text.lower() for p in phrases))

    queries = (
        Query("sugar", answering("sugar")),
        Query("coffee", answering("coffee")),
        Query("what do I drink", answering(*current)),
    )
    return [Case("demo", docs, queries)]


def load_cases(data: Path, longmemeval: Path | None = None) -> list[Case]:
    """Every case of every dataset (LongMemEval's questions from ``longmemeval`` if given)."""
    with gzip.open(longmemeval or data / "longmemeval" / "longmemeval_s_dev.json.gz", "rt") as f:
        lme = json.load(f)
    return [
        *locomo_cases(data / "locomo" / "locomo_dev.json"),
        *lme_session_cases(lme),
        *lme_small_cases(lme),
        *demo_cases(),
    ]


# --------------------------------------------------------------------------- embeddings


class EmbeddingCache:
    """Embeddings of texts, kept in a ``.npz`` file between runs (keyed by sha1 of the text).

    ``tag_of`` says which embedder a text's vector depends on: texts that fit
    the model's window embed the same whether long texts are pooled or
    truncated, so they share one key.
    """

    def __init__(
        self,
        path: Path,
        embed: Callable[[list[str]], npt.NDArray[np.float32]],
        tag_of: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        self.path, self._embed, self._tag_of = path, embed, tag_of
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}
        if path.exists():
            with np.load(path) as saved:
                self._vectors = dict(zip(saved["keys"].tolist(), saved["vectors"], strict=True))

    @staticmethod
    def key(text: str, tag: str = "") -> str:
        return hashlib.sha1(f"{tag}\0{text}".encode() if tag else text.encode()).hexdigest()

    def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        tags = self._tag_of(list(texts)) if self._tag_of else [""] * len(texts)
        keys = [self.key(t, tag) for t, tag in zip(texts, tags, strict=True)]
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors}
        if missing:
            todo = list(missing.items())
            for start in range(0, len(todo), 512):
                chunk = todo[start : start + 512]
                vectors = self._embed([t for _, t in chunk])
                self._vectors.update(zip([k for k, _ in chunk], vectors, strict=True))
                self.save()
        matrix = np.asarray([self._vectors[k] for k in keys], dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.maximum(norms, 1e-12)

    def save(self) -> None:
        keys = np.asarray(list(self._vectors))
        vectors = np.asarray(list(self._vectors.values()), dtype=np.float32)
        np.savez(self.path, keys=keys, vectors=vectors)


# --------------------------------------------------------------------------- a plain BM25


class PlainBM25:
    """Okapi BM25 written apart from ours: lower-case words, no stemming, no stopwords."""

    def __init__(self, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(re.findall(r"\w+", t.lower())) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.average = sum(self.lengths) / max(len(self.docs), 1)
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def scores(self, query: str) -> list[float]:
        words = re.findall(r"\w+", query.lower())
        out = []
        for d, length in zip(self.docs, self.lengths, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / self.average)
            out.append(
                sum(self.idf[w] * d[w] * (self.k1 + 1) / (d[w] + norm) for w in words if w in d)
            )
        return out


# --------------------------------------------------------------------------- ranking


@dataclass
class Prepared:
    """One case ready to rank: its vectors, positions, speakers; caches of what configs share."""

    case: Case
    doc_vectors: npt.NDArray[np.float32]
    query_vectors: npt.NDArray[np.float32]
    positions: dict[str, TurnPosition]
    doc_at: dict[tuple[str, int], str]
    speakers: dict[str, frozenset[str]]
    known: set[str]
    cosines: list[dict[str, float]] = field(default_factory=list)
    """Per question, every document's cosine similarity to it."""
    dense: list[list[ScoredId]] = field(default_factory=list)
    """Per question, every document by cosine, best first."""
    lexical: dict[tuple[Any, ...], list[list[ScoredId]]] = field(default_factory=dict)
    """Per BM25 setting, per question, its hits (up to 100)."""
    terms: dict[tuple[Any, ...], dict[str, set[str]]] = field(default_factory=dict)
    """Per analysis, each document's lexical terms (for the reported scores)."""
    plain: PlainBM25 | None = None


class Cached(Embeddings):
    """LangChain ``Embeddings`` over an :class:`EmbeddingCache`."""

    def __init__(self, embed: Callable[[Sequence[str]], npt.NDArray[np.float32]]) -> None:
        self.embed = embed

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed(texts).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0].tolist()  # type: ignore[no-any-return]


#: How a turn saved with ``save_context`` is embedded (``--turns``): "shipped" (the library's
#: :func:`~memories.stores.vector.embedded.document_vectors`), or only its "whole" text, or
#: only its "input" part.
TURNS = ["shipped"]


def doc_vectors(docs: Sequence[Doc], embed: EmbeddingCache) -> npt.NDArray[np.float32]:
    """The documents' embeddings, a turn's as :data:`TURNS` says."""
    metadata = [{OUTPUT_AT_KEY: d.output_at} if d.output_at else {} for d in docs]
    if TURNS[0] == "shipped":
        documents = list(zip([d.text for d in docs], metadata, strict=True))
        return np.asarray(run(document_vectors(Cached(embed), documents)), dtype=np.float32)
    pick = 0 if TURNS[0] == "whole" else -1
    return embed([embedded_texts(d.text, m)[pick] for d, m in zip(docs, metadata, strict=True)])


def prepare(case: Case, embed: EmbeddingCache) -> Prepared:
    positions = {d.id: TurnPosition(d.session, d.turn) for d in case.docs}
    speakers = {
        d.id: frozenset(speaker_key(s) for s in d.speakers) for d in case.docs if d.speakers
    }
    prepared = Prepared(
        case,
        doc_vectors(case.docs, embed),
        embed([q.text for q in case.queries]),
        positions,
        {(p.session, p.index): i for i, p in positions.items()},
        speakers,
        {s for names in speakers.values() for s in names},
    )
    ids = [d.id for d in case.docs]
    for vector in prepared.query_vectors:
        cos = prepared.doc_vectors @ vector
        prepared.cosines.append(dict(zip(ids, cos.tolist(), strict=True)))
        order = np.argsort(-cos, kind="stable")[:MAX_CANDIDATES]
        prepared.dense.append([ScoredId(ids[i], float(cos[i])) for i in order])
    return prepared


def _lexical(prepared: Prepared, config: RecallConfig) -> list[list[ScoredId]]:
    analysis = (config.stopwords, config.stem, config.lexical_dates)
    key = (config.bm25_b, config.bm25_k1, *analysis)
    hits = prepared.lexical.get(key)
    if hits is None:
        index = config.lexical_index()
        for d in prepared.case.docs:
            index.add("c", d.id, config.lexical_text(d.text, when=d.when))
        hits = [index.search("c", q.text, limit=MAX_CANDIDATES) for q in prepared.case.queries]
        prepared.lexical[key] = hits
    return hits


def _terms(prepared: Prepared, config: RecallConfig) -> dict[str, set[str]]:
    analysis = (config.stopwords, config.stem, config.lexical_dates)
    terms = prepared.terms.get(analysis)
    if terms is None:
        analyzer = config.analyzer()
        terms = prepared.terms[analysis] = {
            d.id: set(analyzer.terms(config.lexical_text(d.text, when=d.when)))
            for d in prepared.case.docs
        }
    return terms


Ranked = list[tuple[str, float]]
"""A search's results: (doc id, the score it reports), in the order it returns them."""


def rank_ours(prepared: Prepared, config: RecallConfig, q: int) -> Ranked:
    """Our ranking of question ``q``, as a memory's search makes it, with its reported scores."""
    case, query = prepared.case, prepared.case.queries[q]
    n = min(config.candidates, len(case.docs))
    dense = prepared.dense[q][:n] if config.uses_dense else []
    lexical = _lexical(prepared, config)[q][:n] if config.uses_lexical else []
    ranked = rank_candidates(
        config,
        dense=dense,
        lexical=lexical,
        positions=prepared.positions,
        doc_at=prepared.doc_at,
        speakers=prepared.speakers,
        named=named_speakers(query.text, prepared.known),
        limit=DEPTH[case.dataset],
    )
    wanted = set(config.analyzer().terms(query.text))
    terms, cosine = _terms(prepared, config), prepared.cosines[q]
    own = [
        DEFAULT_CALIBRATION.score(
            term_coverage(wanted, terms[item.id]), cosine[item.id] if config.uses_dense else None
        )
        for item in ranked
    ]
    # The rank scores on the calibrated scale, as scoring.calibrated reports them.
    scale = calibrated_scale([item.score for item in ranked], own)
    return [(item.id, item.score * scale) for item in ranked]


def rank_plain(prepared: Prepared, q: int) -> Ranked:
    """The plain BM25's ranking (its own scores reported)."""
    case = prepared.case
    if prepared.plain is None:
        prepared.plain = PlainBM25([d.text for d in case.docs])
    scores = prepared.plain.scores(case.queries[q].text)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: DEPTH[case.dataset]]
    return [(case.docs[i].id, scores[i]) for i in order if scores[i] > 0]


def contradicts(ranked: Ranked) -> bool:
    """Whether a result of the top 10 ranks above one scoring more than twice as high (>= 0.3)."""
    top = [score for _, score in ranked[:10]]
    best_below = -math.inf
    for score in reversed(top):
        if best_below >= 0.3 and best_below > 2 * score:
            return True
        best_below = max(best_below, score)
    return False


# --------------------------------------------------------------------------- scoring


def figures(case: Case, q: int, ranked: Ranked) -> dict[str, float]:
    """The figures of one query's results, each 0-100 (MRR as 100 x reciprocal rank)."""
    query, ids = case.queries[q], [i for i, _ in ranked]
    out = {"contradicts": 100.0 * contradicts(ranked)}
    if case.dataset == "lme-sessions":
        by_doc = {d.id: d.session for d in case.docs}
        sessions = list(dict.fromkeys(by_doc[i] for i in ids))
        wanted = set(query.sessions)
        for k in (5, 10):
            found = wanted & set(sessions[:k])
            out[f"any@{k}"], out[f"all@{k}"] = 100.0 * bool(found), 100.0 * (found == wanted)
        return out
    hits = [i in query.gold for i in ids]
    for k in (1, 3, 5, 10):
        out[f"hit@{k}"] = 100.0 * any(hits[:k])
        out[f"any@{k}"] = out[f"hit@{k}"]
        out[f"all@{k}"] = 100.0 * query.gold.issubset(ids[:k])
    first = next((r for r, hit in enumerate(hits[:10], start=1) if hit), None)
    out["MRR@10"] = 100.0 / first if first else 0.0
    return out


Ranker = Callable[[Prepared, int], Ranked]


def score(prepared: Sequence[Prepared], ranker: Ranker) -> dict[str, dict[str, float]]:
    """Each dataset's figures (means over its questions) under ``ranker``."""
    sums: dict[str, Counter[str]] = {}
    counts: Counter[str] = Counter()
    for p in prepared:
        for q in range(len(p.case.queries)):
            sums.setdefault(p.case.dataset, Counter()).update(figures(p.case, q, ranker(p, q)))
            counts[p.case.dataset] += 1
    return {ds: {k: v / counts[ds] for k, v in s.items()} for ds, s in sums.items()}


def ours(config: RecallConfig) -> Ranker:
    return lambda p, q: rank_ours(p, config, q)


COLUMNS = {
    "locomo": ("any@10", "all@10", "any@5"),
    "lme-sessions": ("all@5", "any@5", "all@10"),
    "lme-small": ("hit@1", "hit@3", "MRR@10"),
    "demo": ("hit@1",),
}


def table(rows: dict[str, dict[str, dict[str, float]]]) -> str:
    """Markdown: one row per ranker, every dataset's figures and its contradiction rate."""
    head = ["ranker"]
    for ds, cols in COLUMNS.items():
        head += [f"{ds} {c}" for c in cols]
    head.append("contradicts % (all questions)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, by_ds in rows.items():
        cells = [name]
        for ds, cols in COLUMNS.items():
            cells += [f"{by_ds[ds][c]:.1f}" if ds in by_ds else "-" for c in cols]
        wrong = sum(by_ds[ds]["contradicts"] * ASKED[ds] for ds in by_ds)
        cells.append(f"{wrong / sum(ASKED[ds] for ds in by_ds):.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rankers(base: RecallConfig) -> dict[str, Ranker]:
    """The rankers compared side by side."""
    return {
        "default `RecallConfig()`": ours(base),
        "our BM25 alone": ours(replace(base, mode="bm25")),
        "dense alone": ours(replace(base, mode="dense")),
        "plain BM25 (k1 1.2, b 0.75)": rank_plain,
    }


# --------------------------------------------------------------------------- leave one dataset out


def grid(base: RecallConfig) -> list[RecallConfig]:
    """The recall settings the choice ranges over."""
    return [
        replace(
            base,
            dense_weight=dense,
            neighbour_weight=neighbour,
            bm25_b=b,
            speaker_weight=speaker,
        )
        for dense, neighbour, b, speaker in itertools.product(
            (0.3, 0.4, 0.5), (0.0, 0.25, 0.5), (0.0, 0.25, 0.5), (0.0, 1.0)
        )
    ]


def best_on(
    results: Sequence[dict[str, dict[str, float]]],
    configs: Sequence[RecallConfig],
    datasets: Sequence[str],
) -> int:
    """The config with the best mean headline on ``datasets``, up to what they can resolve.

    Configs within one question of the smallest dataset's split (1.7 points
    on 60 questions) of the best are a tie, and a tie goes to the config that
    changes fewest settings of ``RecallConfig()``: a difference the data
    cannot resolve, or a setting a dataset cannot weigh (LongMemEval names no
    speaker), is no reason to change a default.
    """
    totals = [sum(r[ds][HEADLINE[ds]] for ds in datasets) for r in results]
    step = 100.0 / min(ASKED[ds] or 1 for ds in datasets) if ASKED else 0.0
    best = max(totals)
    tied = [i for i, total in enumerate(totals) if total >= best - step - 1e-9]
    return min(tied, key=lambda i: (len(configs[i].overrides()), -totals[i], i))


def leave_one_dataset_out(prepared: Sequence[Prepared], configs: Sequence[RecallConfig]) -> str:
    """For each dataset held out: the best config on the others, and its figure held out."""
    results = []
    started = time.perf_counter()
    for config in configs:
        results.append(score(prepared, ours(config)))
    lines = [
        f"{len(configs)} settings scored in {time.perf_counter() - started:.0f} s.\n",
        "| held out | chosen on the others | held-out figure | its dev best | default |",
        "|---|---|---|---|---|",
    ]
    default = score(prepared, ours(RecallConfig()))
    overall = best_on(results, configs, HELD_OUT)
    for held in HELD_OUT:
        others = [ds for ds in HELD_OUT if ds != held]
        best = best_on(results, configs, others)
        metric = HEADLINE[held]
        dev_best = max(r[held][metric] for r in results)
        label = ", ".join(f"{k}={v}" for k, v in configs[best].overrides().items()) or "default"
        lines.append(
            f"| {held} {metric} | {label} | {results[best][held][metric]:.1f} | "
            f"{dev_best:.1f} | {default[held][metric]:.1f} |"
        )
    label = ", ".join(f"{k}={v}" for k, v in configs[overall].overrides().items()) or "default"
    verdict = "as shipped" if configs[overall] == RecallConfig() else "NOT what RecallConfig() has"
    lines.append(f"\nChosen on all three: {label} ({verdict}).")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the shipped class


def shipped(cases: Sequence[Case], embed: EmbeddingCache) -> dict[str, dict[str, float]]:
    """``VectorMemory()`` end to end on the small memories and the demo (``save_context``)."""
    import uuid

    from memories.long_term.vector import VectorMemory

    sums: dict[str, Counter[str]] = {}
    counts: Counter[str] = Counter()
    collection = f"recall-{uuid.uuid4().hex[:8]}"
    for n, case in enumerate(c for c in cases if c.dataset in ("lme-small", "demo")):
        by_text: dict[tuple[str, str], str] = {}
        memories: dict[str, VectorMemory] = {}
        for doc in case.docs:
            memory = memories.get(doc.session)
            if memory is None:
                memory = memories[doc.session] = VectorMemory(
                    mode="memory",
                    collection=collection,
                    namespace=("recall", str(n)),
                    session_id=doc.session,
                    embeddings=Cached(embed),
                    write="sync",
                )
            user, _, reply = doc.text.partition("\noutput: ")
            memory.save_context({"input": user.removeprefix("input: ")}, {"output": reply})
            by_text[doc.session, doc.text] = doc.id
        for q, query in enumerate(case.queries):
            found = memory.search(query.text, k=DEPTH[case.dataset])
            ranked = [(by_text[str(r.metadata["session"]), r.text], r.score) for r in found]
            sums.setdefault(case.dataset, Counter()).update(figures(case, q, ranked))
            counts[case.dataset] += 1
        memory.clear()
    return {ds: {k: v / counts[ds] for k, v in s.items()} for ds, s in sums.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="embedding cache (.npz)")
    parser.add_argument(
        "--longmemeval", type=Path, default=None,
        help="LongMemEval questions (.json.gz) to ask instead of the dev split (held out)",
    )  # fmt: skip
    parser.add_argument("--shipped", action="store_true", help="also run VectorMemory end to end")
    parser.add_argument("--no-choice", action="store_true", help="skip leave-one-dataset-out")
    parser.add_argument(
        "--long-texts", choices=("pool", "truncate"), default="truncate",
        help="how MiniLM embeds a text longer than its window",
    )  # fmt: skip
    parser.add_argument(
        "--turns", choices=("shipped", "whole", "input"), default="shipped",
        help="how a save_context turn is embedded: as shipped, or one of its texts alone",
    )  # fmt: skip
    args = parser.parse_args(argv)
    TURNS[0] = args.turns

    from memories.integrations.minilm import MAX_TOKENS, MiniLMEmbeddings

    # What default_embeddings() gives, with the long-text handling asked for.
    model = MiniLMEmbeddings(int8_activations=True, long_texts=args.long_texts)

    def tag_of(texts: list[str]) -> list[str]:
        if args.long_texts == "truncate":
            return [""] * len(texts)
        encoded = model._get_runtime().tokenizer.encode_batch(texts)
        return [args.long_texts if e.overflowing else "" for e in encoded]

    embed = EmbeddingCache(args.cache, model.embed, tag_of)
    print(
        f"Embeddings: MiniLM, texts over {MAX_TOKENS} tokens: {args.long_texts}; "
        f"save_context turns: {args.turns}.\n"
    )
    cases = load_cases(args.data.resolve(), args.longmemeval)
    started = time.perf_counter()
    prepared = [prepare(c, embed) for c in cases]
    counts = Counter(c.dataset for c in cases)
    asked = ASKED
    for c in cases:
        asked[c.dataset] += len(c.queries)
    print("# Recall across datasets\n")
    print(
        ", ".join(f"{ds}: {counts[ds]} memories, {asked[ds]} questions" for ds in counts)
        + f" (embedded in {time.perf_counter() - started:.0f} s).\n"
    )
    base = RecallConfig()
    rows = {name: score(prepared, ranker) for name, ranker in rankers(base).items()}
    if args.shipped:
        rows["`VectorMemory()` end to end"] = shipped(cases, embed)
    print(table(rows))
    if not args.no_choice:
        print("\n## Leave one dataset out\n")
        print(leave_one_dataset_out(prepared, grid(base)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
