"""What every memory costs: calls, tokens, failures and time per memory and namespace, traced.

The scripted models report ``usage_metadata``; the spans a traced conversation
yields and each memory's ``status()`` must show exactly those tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, RemoveMessage
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memories import (
    CollectionMemory,
    CombinedMemory,
    ConfigError,
    InMemoryHistory,
    InvalidInputError,
    ProfileMemory,
    SummaryBufferMemory,
    VectorMemory,
    WindowMemory,
    create_memory,
)
from memories.errors import BudgetExceededError, LLMError
from memories.kernel.accounting import (
    OTHER_NAMESPACES,
    Budget,
    InProcessSpending,
    Ledger,
    ModelUsage,
    measured,
)
from memories.testing import ScriptedChatModel

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
TURNS = [
    ("Hi, I'm Ada and I live in Lisbon.", "Nice to meet you, Ada."),
    ("I keep two cats at home.", "Cats are lovely company."),
    ("I work as a nurse at night.", "Night shifts are hard."),
]


def _metered(text: str, tokens_in: int, tokens_out: int) -> ScriptedChatModel:
    """A model whose every reply is ``text`` and reports these token counts."""
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    reply = AIMessage(text, usage_metadata={**usage, "total_tokens": tokens_in + tokens_out})
    return ScriptedChatModel(responses=[reply], echo=False)


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """The SDK's in-memory exporter, on the process's tracer provider."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


def _memories(tmp_path: Path) -> dict[str, Any]:
    collection = f"t{uuid.uuid4().hex[:10]}"
    fact = json.dumps([{"op": "insert", "content": "User's name is Ada"}])
    return {
        "summary": SummaryBufferMemory(
            llm=_metered("Ada lives in Lisbon.", 120, 9),
            max_token_limit=20,
            token_counter="chars",
        ),
        "profile": ProfileMemory(
            schema=SCHEMA,
            llm=_metered('[{"op": "add", "path": "/name", "value": "Ada"}]', 50, 6),
            update_method="json",
            url=f"sqlite:///{tmp_path / 'profile.db'}",
        ),
        "collection": CollectionMemory(
            llm=_metered(fact, 70, 11),
            update_method="json",
            mode="memory",
            collection=collection,
            embeddings=EMBEDDINGS,
            url=f"sqlite:///{tmp_path / 'ledger.db'}",
        ),
        "vector": VectorMemory(mode="memory", collection=collection, embeddings=EMBEDDINGS),
    }


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_traced_conversation_has_spans_whose_tokens_match_the_models_usage(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    spans.clear()
    memories = _memories(tmp_path)
    for user, ai in TURNS:
        for memory in memories.values():
            memory.load_memory_variables({"input": user})
            memory.save_context({"input": user}, {"output": ai})
    for memory in memories.values():
        memory.flush()
    finished = spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}
    model_spans = [s for s in finished if _attributes(s).get("gen_ai.operation.name") == "chat"]
    per_kind: dict[str, ModelUsage] = {}
    for name, memory in memories.items():
        status = memory.status()
        usage = memory.usage()
        assert status.usage == usage  # status() shows the same totals
        per_kind[name] = usage.total("model")
    assert {name: u.calls > 0 for name, u in per_kind.items()} == {
        "summary": True,
        "profile": True,
        "collection": True,
        "vector": False,
    }
    scripted = {"summary": (120, 9), "profile": (50, 6), "collection": (70, 11)}
    for name, (tokens_in, tokens_out) in scripted.items():
        usage = per_kind[name]
        assert (usage.input_tokens, usage.output_tokens) == (
            tokens_in * usage.calls,
            tokens_out * usage.calls,
        )
        assert usage.unmetered == 0 and usage.failures == 0
        assert memories[name].model_usage() == usage  # the model counters are the ledger's
    assert len(model_spans) == sum(u.calls for u in per_kind.values())
    assert sum(_attributes(s)["gen_ai.usage.input_tokens"] for s in model_spans) == sum(
        u.input_tokens for u in per_kind.values()
    )
    assert sum(_attributes(s)["gen_ai.usage.output_tokens"] for s in model_spans) == sum(
        u.output_tokens for u in per_kind.values()
    )
    for span in model_spans:  # each model call is a child of a memory operation
        assert span.name == "chat ScriptedChatModel"
        assert _attributes(span)["gen_ai.request.model"] == "ScriptedChatModel"
        assert _attributes(span)["gen_ai.provider.name"] == "scriptedchatmodel"
        assert span.parent is not None
        parent = by_id[span.parent.span_id]
        assert parent.name in {"memories.save_context", "memories.load_memory_variables"}
    embedding_spans = [
        s for s in finished if _attributes(s).get("gen_ai.operation.name") == "embeddings"
    ]
    vector = memories["vector"]  # its writes embed on the background writer, counted as its own
    assert vector.usage().total("embedding").calls == vector.embedder.calls > 0
    embedded = sum(m.usage().total("embedding").calls for m in memories.values())
    assert embedded > 0 and len(embedding_spans) >= embedded
    store_spans = [s for s in finished if s.name == "transaction"]
    stored = sum(m.usage().total("store").calls for m in memories.values())
    assert stored > 0 and len(store_spans) >= stored


def test_a_flush_that_writes_queued_turns_itself_counts_their_cost() -> None:
    """Under load the background writer had not started when ``flush()`` wrote the queued
    turn in the caller's thread: its embedding was counted nowhere."""
    from memories.stores.vector.writes import background_writer

    memory = VectorMemory(
        mode="memory", collection=f"t{uuid.uuid4().hex[:10]}", embeddings=EMBEDDINGS
    )
    memory.save_context({"input": TURNS[0][0]}, {"output": TURNS[0][1]})  # the first is written now
    busy, release = threading.Event(), threading.Event()
    background_writer().schedule(("test", "busy"), lambda: busy.set() or release.wait(30), delay=0)
    try:
        assert busy.wait(30)  # the writer's one thread is taken: the next turn waits
        memory.save_context({"input": TURNS[1][0]}, {"output": TURNS[1][1]})
        assert memory.flush() and memory.status().pending == 0
    finally:
        release.set()
    assert memory.usage().total("embedding").calls == memory.embedder.calls == 2


def test_spans_carry_no_memory_text(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    spans.clear()
    memories = _memories(tmp_path)
    for user, ai in TURNS:
        for memory in memories.values():
            memory.save_context({"input": user}, {"output": ai})
            memory.load_memory_variables({"input": user})
    said = [word for user, ai in TURNS for word in (user + " " + ai).split() if len(word) > 4]
    shown = json.dumps([_attributes(s) for s in spans.get_finished_spans()], default=str)
    assert [word for word in said if word in shown] == []
    assert "Ada" not in shown and "Lisbon" not in shown


async def test_async_operations_are_spans_too(spans: InMemorySpanExporter) -> None:
    spans.clear()
    memory = SummaryBufferMemory(
        llm=_metered("Ada likes tea.", 33, 4), max_token_limit=10, token_counter="chars"
    )
    await memory.asave_context({"input": "I'm Ada and I like tea"}, {"output": "Noted, Ada."})
    await memory.aload_memory_variables({})
    await memory.aclear()
    await memory.asweep()
    finished = spans.get_finished_spans()
    names = [s.name for s in finished if s.name.startswith("memories.")]
    assert names == [
        "memories.save_context",
        "memories.load_memory_variables",
        "memories.clear",
        "memories.sweep",
    ]
    (model,) = [s for s in finished if s.name.startswith("chat ")]
    assert _attributes(model)["gen_ai.usage.input_tokens"] == 33
    assert memory.usage().total("model").input_tokens == 33


def test_a_background_fold_is_a_span_under_the_save_that_scheduled_it(
    spans: InMemorySpanExporter,
) -> None:
    spans.clear()
    memory = SummaryBufferMemory(
        llm=_metered("Ada likes tea.", 33, 4),
        max_token_limit=10,
        token_counter="chars",
        summarize="background",
        debounce=0,
    )
    memory.save_context({"input": "I'm Ada and I like tea"}, {"output": "Noted, Ada."})
    assert memory.flush()
    finished = spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}
    (model,) = [s for s in finished if s.name.startswith("chat ")]
    assert model.parent is not None
    update = by_id[model.parent.span_id]
    assert update.name == "memories.background_update"
    assert update.parent is not None
    assert by_id[update.parent.span_id].name == "memories.save_context"
    assert memory.status().usage.total("model").input_tokens == 33


def test_usage_is_counted_per_namespace_and_reads_as_json(tmp_path: Path) -> None:
    memory = ProfileMemory(
        schema=SCHEMA,
        llm=_metered('[{"op": "add", "path": "/name", "value": "Ada"}]', 50, 6),
        update_method="json",
        url=f"sqlite:///{tmp_path / 'profile.db'}",
        namespace=("users", "ada"),
    )
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    usage = memory.usage()
    assert list(usage.namespaces) == ["users.ada"]
    assert usage.namespaces["users.ada"]["model"] == usage.total("model")
    assert usage.total("store").calls > 0
    data = json.loads(json.dumps(usage.as_dict()))
    assert data["totals"]["model"]["input_tokens"] == 50
    assert data["namespaces"]["users.ada"]["model"]["calls"] == 1


def test_a_load_refused_for_its_input_costs_no_store_transaction(tmp_path: Path) -> None:
    """Sync opened (and counted as failed) a transaction for the refused load; async none."""
    from tests.entities.fakes import RuleModel

    history = {"type": "sqlite", "path": str(tmp_path / "h.db"), "session_id": "s"}
    config = {"type": "conversation_entity", "llm": RuleModel(), "history": history}
    sync_memory, async_memory = create_memory(config), create_memory(config)
    with pytest.raises(InvalidInputError):
        sync_memory.load_memory_variables({"input": None})
    with pytest.raises(InvalidInputError):
        asyncio.run(async_memory.aload_memory_variables({"input": None}))
    assert sync_memory.usage().total("store") == async_memory.usage().total("store")
    assert sync_memory.usage().total("store").calls == 0


def test_an_edit_refused_inside_a_transaction_is_no_store_failure(tmp_path: Path) -> None:
    """Sync refused it inside the turn's transaction, counted as a failed one; async did not."""
    from tests.entities.fakes import RuleModel

    history = {"type": "sqlite", "path": str(tmp_path / "h.db"), "session_id": "s"}
    config = {"type": "conversation_entity", "llm": RuleModel(), "history": history}
    sync_memory, async_memory = create_memory(config), create_memory(config)
    with pytest.raises(InvalidInputError, match="nope"):
        sync_memory.save_messages([RemoveMessage(id="nope")])
    with pytest.raises(InvalidInputError, match="nope"):
        asyncio.run(async_memory.asave_messages([RemoveMessage(id="nope")]))
    assert sync_memory.usage().total("store").failures == 0
    assert async_memory.usage().total("store").failures == 0


def test_changing_an_option_keeps_what_the_memory_has_cost() -> None:
    memory = SummaryBufferMemory(
        llm=_metered("Ada likes tea.", 33, 4), max_token_limit=10, token_counter="chars"
    )
    memory.save_context({"input": "I'm Ada and I like tea"}, {"output": "Noted, Ada."})
    memory.max_token_limit = 5  # the model and the counters derived from options are rebuilt
    memory.save_context({"input": "and green tea too"}, {"output": "Noted."})
    usage = memory.model_usage()
    assert usage.calls == 2 and usage.input_tokens == 66
    assert memory.usage().total("model") == usage


def test_a_ledger_keeps_a_bounded_number_of_namespaces_and_exact_totals() -> None:
    ledger = Ledger(max_namespaces=3)
    for i in range(10):
        ledger.record("model", f"user-{i}", ModelUsage(calls=1, input_tokens=i))
    accounts = ledger.snapshot()
    assert list(accounts.namespaces) == [OTHER_NAMESPACES, "user-8", "user-9"]
    assert accounts.namespaces[OTHER_NAMESPACES]["model"] == ModelUsage(
        calls=8, input_tokens=sum(range(8))
    )
    assert accounts.total("model") == ModelUsage(calls=10, input_tokens=45)


def test_a_rejected_reply_asked_again_counts_a_retry(tmp_path: Path) -> None:
    bad = AIMessage("not json at all", usage_metadata=_usage(10, 2))
    good = AIMessage(
        '[{"op": "add", "path": "/name", "value": "Ada"}]', usage_metadata=_usage(12, 3)
    )
    memory = ProfileMemory(
        schema=SCHEMA,
        llm=ScriptedChatModel(responses=[bad, good], echo=False),
        update_method="json",
        url=f"sqlite:///{tmp_path / 'profile.db'}",
    )
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    usage = memory.model_usage()
    assert (usage.calls, usage.retries, usage.input_tokens, usage.output_tokens) == (2, 1, 22, 5)
    assert memory.load_memory_variables({})  # the profile was written on the second try


def _usage(tokens_in: int, tokens_out: int) -> Any:
    return {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
    }


# -- budgets ------------------------------------------------------------------------------


class Clock:
    """A clock the test moves by hand (seconds since the epoch)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0  # a Friday, 08:00 UTC

    def __call__(self) -> float:
        return self.now


def test_a_spent_budget_defers_the_summary_and_keeps_every_turn() -> None:
    clock = Clock()
    session = f"s-{uuid.uuid4().hex[:8]}"
    memory = SummaryBufferMemory(
        llm=_metered("A summary.", 60, 5),
        max_token_limit=10,
        token_counter="chars",
        chat_memory=InMemoryHistory(session_id=session),
        budget=Budget(tokens=100, per="day", clock=clock),
    )
    memory.save_context({"input": "first turn, long enough to fold"}, {"output": "ok one"})
    memory.save_context({"input": "second turn, long enough to fold"}, {"output": "ok two"})
    assert memory.model_usage().calls == 2  # 65 tokens, then 130: the cap is reached
    assert memory.status().deferred is None  # nothing waits yet
    memory.save_context({"input": "third turn, waits for tomorrow"}, {"output": "ok three"})
    status = memory.status()
    assert memory.model_usage().calls == 2  # no call was made past the budget
    assert status.deferred is not None and "130 of 100 tokens" in status.deferred
    assert "2027-01-16T00:00:00+00:00" in status.deferred
    assert status.pending > 0 and status.failures == 0  # the turns wait: no failure, no backoff
    contents = [m.content for m in memory.chat_memory.messages]
    assert "third turn, waits for tomorrow" in contents
    clock.now += 86_400  # the next day
    memory.save_context({"input": "fourth turn"}, {"output": "ok four"})
    assert memory.model_usage().calls > 2  # the waiting turns are folded now
    after = memory.status()
    assert after.failures == 0 and after.deferred is None and after.pending < status.pending + 2


def test_a_background_update_past_the_budget_waits_and_runs_later(tmp_path: Path) -> None:
    clock = Clock()
    memory = ProfileMemory(
        schema=SCHEMA,
        llm=_metered('[{"op": "add", "path": "/name", "value": "Ada"}]', 50, 6),
        update_method="json",
        url=f"sqlite:///{tmp_path / 'profile.db'}",
        namespace=("users", f"u{uuid.uuid4().hex[:8]}"),
        policy="background",
        debounce=0,
        budget=Budget(calls=1, per="hour", clock=clock),
    )
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    memory.flush()
    assert memory.model_usage().calls == 1
    memory.save_context({"input": "Call me Ada Lovelace"}, {"output": "Sure"})
    memory.flush()
    status = memory.status()
    assert memory.model_usage().calls == 1
    assert status.pending == 1 and status.deferred is not None
    assert "1 of 1 calls" in status.deferred
    assert status.failures == 0 and [c.kind for c in memory.history()] == ["update"]
    clock.now += 3600
    memory.save_context({"input": "And I like tea"}, {"output": "Noted"})
    memory.flush()
    assert memory.model_usage().calls == 2 and memory.status().pending == 0


def test_a_budget_round_trips_through_config_and_bad_ones_are_refused() -> None:
    memory = SummaryBufferMemory(llm=None, budget={"tokens": 50000, "per": "day"})
    assert memory.budget == Budget(tokens=50000, per="day")
    assert memory.to_config()["budget"] == {"per": "day", "tokens": 50000}
    assert create_memory({**memory.to_config()}).budget == memory.budget
    for bad, said in [
        ({"tokens": 10, "per": "week"}, "per must be one of"),
        ({"per": "day"}, "give 'tokens' or 'calls'"),
        ({"tokens": -1}, "must be a whole number >= 0, got -1"),
        ({"tokens": 10, "dollars": 3}, "Unknown budget option"),
        ("50000", "must be a dict"),
    ]:
        with pytest.raises(ConfigError, match=said):
            SummaryBufferMemory(budget=bad)


def test_a_call_past_the_budget_is_refused_before_the_model() -> None:
    from memories.kernel.llm import ModelCaller

    clock = Clock()
    model = _metered("hi", 5, 5)
    caller = ModelCaller(model, {}, timeout=None, budget=Budget(calls=1, per="minute", clock=clock))
    caller.invoke_text("hello")
    with pytest.raises(BudgetExceededError, match="1 of 1 calls"):
        caller.invoke_text("hello again")
    assert len(model.prompts) == 1 and caller.usage.calls == 1
    clock.now += 60
    assert asyncio.run(caller.ainvoke_text("a minute later")) == "hi"


def test_a_spending_records_each_finished_call_with_its_time_and_failure() -> None:
    from memories.kernel.llm import ModelCaller

    class Kept(InProcessSpending):
        def record_call(self, memory: str, namespace: str, usage: ModelUsage, /) -> None:
            recorded.append(usage)

    class Slow(ScriptedChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            time.sleep(0.01)
            return super()._generate(*args, **kwargs)

    recorded: list[ModelUsage] = []
    model = Slow(responses=_metered("hi", 5, 5).responses, echo=False)
    caller = ModelCaller(model, {}, timeout=None, budget=Budget(calls=5), spending=Kept(10))
    caller.invoke_text("hello")
    asyncio.run(caller.ainvoke_text("hello again"))
    model.responses = [AIMessage("")]
    with pytest.raises(LLMError):
        caller.invoke_text("and again")
    assert [(u.calls, u.failures, u.input_tokens) for u in recorded] == [
        (1, 0, 5),
        (1, 0, 5),
        (1, 1, 0),
    ]
    assert all(u.seconds >= 0.01 for u in recorded[:2]), recorded


# -- reading it: a combined memory, the command line, without OpenTelemetry ----------------


def test_a_combined_memory_adds_up_its_members(tmp_path: Path) -> None:
    memories = _memories(tmp_path)
    combined = CombinedMemory(memories=[memories["summary"], memories["profile"]])
    for user, ai in TURNS:
        combined.save_context({"input": user}, {"output": ai})
    summary, profile = memories["summary"].usage(), memories["profile"].usage()
    total = combined.status().usage.total("model")
    assert total == summary.total("model").plus(profile.total("model"))
    assert (
        total.input_tokens == 120 * summary.total("model").calls + 50 * profile.total("model").calls
    )


def test_the_usage_command_runs_stdin_and_prints_each_memorys_counters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    import yaml

    from memories.faces.cli import main

    history = {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": "u1"}
    config = tmp_path / "memory.yaml"
    config.write_text(yaml.safe_dump({"type": "window", "k": 2, "history": history}))
    monkeypatch.setattr("sys.stdin", io.StringIO("one\ntwo\nthree\n"))
    assert main(["usage", "--config", str(config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (window,) = report["memories"]
    assert report["turns"] == 3 and window["memory"] == "window" and window["namespace"] == "u1"
    assert window["namespaces"]["u1"]["store"]["calls"] == window["totals"]["store"]["calls"] >= 3
    monkeypatch.setattr("sys.stdin", io.StringIO("four\n/usage\n"))
    assert main(["chat", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "window" in out and "store" in out and "tokens in" in out


def test_without_opentelemetry_nothing_is_traced_and_everything_is_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from memories.kernel import accounting

    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails as if not installed
    monkeypatch.setattr(accounting, "_tracer_checked", False)  # both restored after the test
    monkeypatch.setattr(accounting, "_tracer", None)
    monkeypatch.setattr(accounting, "_trace_api", None)
    assert accounting.tracer() is None
    memory = SummaryBufferMemory(
        llm=_metered("Ada likes tea.", 33, 4), max_token_limit=10, token_counter="chars"
    )
    memory.save_context({"input": "I'm Ada and I like tea"}, {"output": "Noted, Ada."})
    assert memory.status().usage.total("model") == ModelUsage(
        calls=1,
        input_tokens=33,
        output_tokens=4,
        seconds=memory.model_usage().seconds,
    )


def test_a_failed_call_is_counted_as_failed_and_its_span_says_the_error_type(
    spans: InMemorySpanExporter,
) -> None:
    from memories.kernel.accounting import measured, operation

    spans.clear()
    ledger, owner = Ledger(), object()
    with operation(ledger, "save_context", owner=owner, namespace="u1", memory_type="test"):
        with (
            pytest.raises(ConnectionError),
            measured("store", "transaction", {"db.system.name": "sqlite"}),
        ):
            raise ConnectionError("the database is gone: Ada's secret")
        with measured("embedding", "embeddings fake"):
            pass
    accounts = ledger.snapshot()
    assert accounts.namespaces["u1"]["store"].calls == 1
    assert accounts.namespaces["u1"]["store"].failures == 1
    assert accounts.total("embedding").failures == 0
    (failed,) = [s for s in spans.get_finished_spans() if s.name == "transaction"]
    assert _attributes(failed)["error.type"] == "ConnectionError"
    assert "Ada" not in json.dumps(_attributes(failed))  # the error's message is not recorded


def test_without_a_tracer_provider_no_span_is_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenTelemetry installed but no provider set: a save and a load start no span at all."""
    from opentelemetry.trace import ProxyTracer

    from memories.kernel import accounting

    started: list[str] = []
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # as in a process that set none
    monkeypatch.setattr(accounting, "_tracer", None)
    monkeypatch.setattr(accounting, "_tracer_checked", False)
    monkeypatch.setattr(
        ProxyTracer,
        "start_as_current_span",
        lambda self, name, **kw: started.append(name) or contextlib.nullcontext(),
    )
    memory = WindowMemory(k=2)
    memory.save_context({"input": "Hi"}, {"output": "Hello"})
    assert memory.load_memory_variables({})["history"] == "Human: Hi\nAI: Hello"
    assert accounting.tracer() is None
    assert started == []


def test_in_process_spending_keeps_the_most_recently_counted_namespaces() -> None:
    spending, budget = InProcessSpending(2), Budget(calls=5)
    for namespace in ("a", "b", "a", "c"):  # "a" counted again: "b" is the oldest
        assert spending.reserve(namespace, 0, budget) is None
    spending.add_tokens("c", 0, 7)
    assert [spending.spent(n, 0) for n in ("a", "b", "c")] == [(2, 0), (0, 0), (1, 7)]
    assert spending.spent("a", 60) == (0, 0)  # another period starts from nothing


def test_a_call_records_what_it_sets_and_refuses_a_counter_it_has_not() -> None:
    ledger = Ledger()
    with measured("model", "chat", ledger=ledger) as call:
        call.set(input_tokens=3, output_tokens=4, retries=1)
        with pytest.raises(TypeError, match=r"no counter \['tokens'\]"):
            call.set(tokens=7)
    usage = ledger.total("model")
    assert (usage.calls, usage.input_tokens, usage.output_tokens, usage.retries) == (1, 3, 4, 1)
    assert usage.failures == 0 and usage.seconds > 0
