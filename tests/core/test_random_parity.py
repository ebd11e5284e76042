"""Random sequences of calls through LangChain's classes and ours: the same values and errors.

Every LangChain-named class runs the same generated sequence of
``save_context`` / ``load_memory_variables`` / ``clear`` (sync or async,
chosen at random) and bad turns, with a fake LLM that counts words as its own
tokens and tiny limits. After every call the loaded variables, and at the end
the summary calls, must be equal; a bad turn must raise the same exception
type with LangChain's message at the start of ours.

LangChain's bugs that ours fixes on purpose: ``ConversationTokenBufferMemory``
and ``ConversationSummaryMemory`` have no ``asave_context``, so LangChain's
async save neither trims nor summarizes. Ours does on both paths, so the
reference is LangChain's sync path: each async call of ours is compared with
the sync call on LangChain's side.
"""

from __future__ import annotations

import asyncio
import re
import warnings
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import memories
from tests.summary.fakes import ScriptedLLM

SPECS: list[tuple[str, dict[str, Any], bool]] = [
    ("ConversationBufferMemory", {}, False),
    ("ConversationBufferMemory", {"return_messages": True}, False),
    ("ConversationBufferWindowMemory", {"k": 1}, False),
    ("ConversationBufferWindowMemory", {"k": 2, "return_messages": True}, False),
    ("ConversationTokenBufferMemory", {"max_token_limit": 5}, True),
    ("ConversationTokenBufferMemory", {"max_token_limit": 12, "return_messages": True}, True),
    ("ConversationSummaryMemory", {}, True),
    ("ConversationSummaryBufferMemory", {"max_token_limit": 5}, True),
    ("ConversationSummaryBufferMemory", {"max_token_limit": 14, "return_messages": True}, True),
]

WORDS = ["cats", "tea", "Oslo", "piano", "rain", "my sister", "the blue car", "yes"]
turn = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
)
operation = st.one_of(
    st.tuples(st.sampled_from(["save", "asave"]), turn),
    st.tuples(st.sampled_from(["load", "aload", "clear", "aclear"]), st.none()),
    st.tuples(st.sampled_from(["two-inputs", "two-outputs", "no-input"]), st.none()),
)

BAD_TURNS = {
    "two-inputs": ({"a": "x", "b": "y"}, {"output": "o"}),
    "two-outputs": ({"input": "x"}, {"x": "1", "y": "2"}),
    "no-input": ({}, {"output": "o"}),
}


def word_llm() -> ScriptedLLM:
    """A fake LLM whose own token counter counts words (as a user's test suite might)."""
    return ScriptedLLM(custom_get_token_ids=lambda text: text.split())


def _unordered(message: str) -> str:
    """A message with its lists sorted: LangChain lists a set's keys in hash order."""
    return re.sub(r"\[([^\]]*)\]", lambda m: str(sorted(m.group(1).split(", "))), message)


def call(memory: Any, op: str, value: Any) -> Any:
    """Perform one operation; return the loaded variables, or the exception raised."""
    try:
        if op in BAD_TURNS:
            memory.save_context(*BAD_TURNS[op])
        elif op == "save":
            memory.save_context({"input": value[0]}, {"output": value[1]})
        elif op == "asave":
            asyncio.run(memory.asave_context({"input": value[0]}, {"output": value[1]}))
        elif op in ("clear", "aclear"):
            memory.clear() if op == "clear" else asyncio.run(memory.aclear())
        elif op == "aload":
            return asyncio.run(memory.aload_memory_variables({}))
        return memory.load_memory_variables({})
    except Exception as exc:
        return exc


@settings(max_examples=80, deadline=None)
@given(spec=st.sampled_from(SPECS), operations=st.lists(operation, min_size=1, max_size=12))
def test_random_calls_give_langchains_values_and_errors(
    spec: tuple[str, dict[str, Any], bool], operations: list[tuple[str, Any]]
) -> None:
    import langchain_classic.memory as classic

    name, options, uses_llm = spec
    their_llm, our_llm = (word_llm(), word_llm()) if uses_llm else (None, None)
    extra_theirs = {"llm": their_llm} if uses_llm else {}
    extra_ours = {"llm": our_llm} if uses_llm else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(classic, name)(**options, **extra_theirs)
    ours = getattr(memories, name)(**options, **extra_ours)
    for op, value in operations:
        reference_op = op.removeprefix("a")  # LangChain's sync path (see the module's docstring)
        expected = call(theirs, reference_op, value)
        got = call(ours, op, value)
        if isinstance(expected, Exception):
            assert isinstance(got, type(expected)), (op, got, expected)
            assert _unordered(str(got)).startswith(_unordered(str(expected))), (op, got, expected)
        else:
            assert got == expected, (name, op)
    if uses_llm:
        assert our_llm.prompts == their_llm.prompts  # the same summary calls, same prompts
