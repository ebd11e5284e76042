"""What counting and tracing add to a turn: SummaryBufferMemory and ProfileMemory on SQLite.

Run from the repository root::

    python benchmarks/accounting.py [--turns 300]

A turn is one ``save_context`` and one ``load_memory_variables`` of a
``SummaryBufferMemory`` (SQLite history, folds by an offline scripted model
that reports token usage) and of a ``ProfileMemory`` (SQLite store, an update
per turn). The same turns run four ways, each on fresh files:

- ``no accounting``: the accounting hooks replaced by empty ones (the
  library as it was before it counted anything; the peer compared);
- ``counting``: the default without OpenTelemetry installed;
- ``otel api``: ``opentelemetry-api`` installed, no SDK set up (spans are
  the API's no-op ones: what an application that installed the package for
  some other library pays);
- ``otel sdk``: the SDK recording every span into its in-memory exporter.

It prints the median and p95 of a turn's CPU time in the calling thread (the
machine is shared: CPU time leaves out waiting for it) and the spans made.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from memories import ProfileMemory, SQLiteHistory, SummaryBufferMemory
from memories.kernel import accounting
from memories.testing import ScriptedChatModel

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
USAGE = {"input_tokens": 120, "output_tokens": 9, "total_tokens": 129}


def _model(text: str) -> ScriptedChatModel:
    return ScriptedChatModel(responses=[AIMessage(text, usage_metadata=USAGE)], echo=False)


def _memories(folder: Path) -> list[Any]:
    return [
        SummaryBufferMemory(
            llm=_model("Ada talked about her day."),
            max_token_limit=200,
            token_counter="chars",
            chat_memory=SQLiteHistory(folder / "chat.db", session_id="ada"),
        ),
        ProfileMemory(
            schema=SCHEMA,
            llm=_model('[{"op": "add", "path": "/name", "value": "Ada"}]'),
            update_method="json",
            url=f"sqlite:///{folder / 'profile.db'}",
        ),
    ]


@contextlib.contextmanager
def _mode(name: str) -> Iterator[Any]:
    """The library set up as ``name`` says; yields the span exporter (or None)."""
    saved = (accounting._tracer, accounting._tracer_checked)
    exporter = None
    try:
        if name == "no accounting":

            @contextlib.contextmanager
            def nothing(*args: Any, **kwargs: Any) -> Iterator[Any]:
                yield accounting.Call(None)

            _patch_importers(nothing, nothing)
            accounting._tracer, accounting._tracer_checked = None, True
        elif name == "counting":
            accounting._tracer, accounting._tracer_checked = None, True
        elif name == "otel api":
            from opentelemetry import trace

            accounting._tracer, accounting._tracer_checked = trace.NoOpTracer(), True
        else:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            accounting._tracer, accounting._tracer_checked = provider.get_tracer("memories"), True
        yield exporter
    finally:
        accounting._tracer, accounting._tracer_checked = saved
        _patch_importers(accounting.measured, accounting.operation)


def _patch_importers(measured: Any, operation: Any) -> None:
    """The modules that imported the hooks by name get these (or the originals back)."""
    from memories.core import base, parts
    from memories.kernel import embeddings, llm
    from memories.stores import sql

    for module in (embeddings, llm, sql):
        module.measured = measured  # type: ignore[attr-defined]
    for module in (base, parts):
        module.operation = operation  # type: ignore[attr-defined]


def run(turns: int, mode: str) -> tuple[list[float], int]:
    with tempfile.TemporaryDirectory() as folder, _mode(mode) as exporter:
        memories = _memories(Path(folder))
        times = []
        for i in range(turns):
            line = f"Turn {i}: today I walked {i % 7} km and read {i % 5} chapters."
            started = time.thread_time()
            for memory in memories:
                memory.save_context({"input": line}, {"output": "Good to hear."})
                memory.load_memory_variables({"input": line})
            times.append((time.thread_time() - started) * 1000)
        for memory in memories:
            memory.close()
        return times, 0 if exporter is None else len(exporter.get_finished_spans())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    print(f"{args.turns} turns, summary buffer + profile on SQLite, CPU ms per turn")
    print(f"{'mode':<15} {'median':>8} {'p95':>8} {'spans':>7}")
    for mode in ("no accounting", "counting", "otel api", "otel sdk"):
        times, spans = run(args.turns, mode)
        p95 = statistics.quantiles(times, n=20)[-1]
        print(f"{mode:<15} {statistics.median(times):>8.2f} {p95:>8.2f} {spans:>7}")


if __name__ == "__main__":
    main()
