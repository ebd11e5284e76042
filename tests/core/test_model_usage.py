"""What a memory's model calls cost: every call counted once, with the model's own token counts."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from langchain_core.language_models import FakeListLLM
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from memories import SummaryMemory
from memories.kernel.llm import ModelCaller, ModelUsage


def _reply(text: str, tokens_in: int, tokens_out: int) -> AIMessage:
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    return AIMessage(text, usage_metadata={**usage, "total_tokens": tokens_in + tokens_out})


def _metered_model(*replies: AIMessage) -> Any:
    return GenericFakeChatModel(messages=iter(replies))


class Failing(GenericFakeChatModel):
    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the provider is down")


def test_a_summary_memory_counts_its_calls_and_the_models_tokens() -> None:
    model = _metered_model(_reply("Ada likes tea.", 40, 5), _reply("Ada likes green tea.", 52, 6))
    memory = SummaryMemory(llm=model, token_counter="chars")
    assert memory.model_usage() == ModelUsage()
    memory.save_context({"input": "I'm Ada, I like tea"}, {"output": "Noted."})
    memory.save_context({"input": "Green tea, to be exact"}, {"output": "Noted."})
    usage = memory.model_usage()
    assert (usage.calls, usage.failures, usage.unmetered) == (2, 0, 0)
    assert (usage.input_tokens, usage.output_tokens) == (92, 11)
    assert usage.seconds > 0


async def test_async_calls_are_counted_the_same() -> None:
    memory = SummaryMemory(
        llm=_metered_model(_reply("Ada likes tea.", 40, 5)), token_counter="chars"
    )
    await memory.asave_context({"input": "I'm Ada, I like tea"}, {"output": "Noted."})
    usage = memory.model_usage()
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (1, 40, 5)


def test_a_failed_call_is_counted_and_the_turn_is_kept() -> None:
    memory = SummaryMemory(llm=Failing(messages=iter([])), token_counter="chars")
    memory.save_context({"input": "hello"}, {"output": "hi"})  # kept; the summary retries later
    usage = memory.model_usage()
    assert (usage.calls, usage.failures, usage.input_tokens) == (1, 1, 0)
    assert memory.chat_memory.messages[0].content == "hello"


def test_an_empty_answer_is_a_failure_and_a_string_reply_is_unmetered() -> None:
    caller = ModelCaller(FakeListLLM(responses=["   ", "a summary"]), {}, timeout=5)
    with pytest.raises(Exception, match="empty text"):
        caller.invoke_text("summarise")
    assert caller.invoke_text("summarise") == "a summary"
    usage = caller.usage
    assert (usage.calls, usage.failures, usage.unmetered) == (2, 1, 2)


def test_usage_survives_a_copy_and_a_pickle_of_the_caller() -> None:
    caller = ModelCaller(FakeListLLM(responses=["one", "two"]), {}, timeout=None)
    caller.invoke_text("x")
    for copied in (copy.deepcopy(caller), pickle.loads(pickle.dumps(caller))):
        assert copied.usage.calls == 1
        copied.invoke_text("y")  # its own lock works
        assert copied.usage.calls == 2 and caller.usage.calls == 1


def test_usage_reads_as_a_dict() -> None:
    usage = ModelUsage(calls=2, input_tokens=10)
    assert usage.as_dict() == {
        "calls": 2,
        "failures": 0,
        "input_tokens": 10,
        "output_tokens": 0,
        "unmetered": 0,
        "seconds": 0.0,
        "retries": 0,
    }


def _profile(model: Any) -> Any:
    from memories import ProfileMemory

    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    return ProfileMemory(schema=schema, llm=model, update_method="json", url="sqlite://")


def _entities(model: Any) -> Any:
    from memories import ConversationEntityMemory

    return ConversationEntityMemory(llm=model)


@pytest.mark.parametrize(
    ("make", "reply"),
    [
        (lambda m: SummaryMemory(llm=m, token_counter="chars"), "Ada said hello."),
        (_profile, '[{"op": "add", "path": "/name", "value": "Ada"}]'),
        (_entities, "Ada"),
    ],
    ids=["summary", "profile", "entities"],
)
def test_status_shows_the_same_usage(make: Any, reply: str) -> None:
    memory = make(_metered_model(*[_reply(reply, 30, 4)] * 3))
    memory.load_memory_variables({"input": "Hello, I'm Ada"})  # the entity memory asks here
    memory.save_context({"input": "Hello, I'm Ada"}, {"output": "Hi Ada"})
    status = memory.status()
    assert status.model == memory.model_usage()
    assert status.model.calls >= 1 and status.model.input_tokens == 30 * status.model.calls


def test_a_memory_that_can_take_a_model_shows_empty_usage_without_one() -> None:
    from memories import CollectionMemory, EntityMemory

    made = [
        EntityMemory(url="sqlite://"),  # its rule-based extractor
        CollectionMemory(mode="memory", collection="usage_without_model"),  # offline rules
        SummaryMemory(),  # extractive
    ]
    for memory in made:
        assert memory.status().model == ModelUsage(), type(memory).__name__
