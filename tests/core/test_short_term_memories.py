"""Buffer, window and token-buffer memories: the contract, LangChain parity, trimming rules."""

from __future__ import annotations

import asyncio
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from memories import (
    BufferMemory,
    ConfigError,
    ConversationTokenBufferMemory,
    InMemoryHistory,
    InvalidInputError,
    SQLiteHistory,
    StringBufferMemory,
    TokenBufferMemory,
    WindowMemory,
    create_memory,
)
from memories.kernel.tokens import CharCounter, TiktokenCounter, stable_id
from memories.stores.history import ChatHistory
from tests.contract.memory_contract import TURNS, MakeMemory, MemoryContract, run_turns
from tests.helpers import fill_history_fast
from tests.probes import python


class TestBufferMemoryContract(MemoryContract):
    memory_type = "buffer"

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: BufferMemory(chat_memory=history)


class TestStringBufferMemoryContract(MemoryContract):
    memory_type = "string_buffer"
    supports_return_messages = False

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: StringBufferMemory(chat_memory=history)


class TestWindowMemoryContract(MemoryContract):
    memory_type = "window"

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: WindowMemory(chat_memory=history, k=2)


class TestTokenBufferMemoryContract(MemoryContract):
    memory_type = "token_buffer"

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: TokenBufferMemory(chat_memory=history, max_token_limit=60)


class TestConversationTokenBufferMemoryContract(MemoryContract):
    """LangChain's name: LangChain's trimming (the window may open on an AI message)."""

    memory_type = "conversation_token_buffer"

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: ConversationTokenBufferMemory(
            chat_memory=history, max_token_limit=60
        )


# -- LangChain parity ------------------------------------------------------------


def _langchain(name: str, **kwargs: object) -> object:
    import langchain_classic.memory as classic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(classic, name)(**kwargs)


@pytest.mark.parametrize("return_messages", [False, True])
@pytest.mark.parametrize(
    ("ours", "theirs", "kwargs"),
    [
        (BufferMemory, "ConversationBufferMemory", {}),
        (BufferMemory, "ConversationBufferMemory", {"human_prefix": "User", "ai_prefix": "Bot"}),
        (WindowMemory, "ConversationBufferWindowMemory", {"k": 2}),
        (WindowMemory, "ConversationBufferWindowMemory", {"k": 0}),
        (WindowMemory, "ConversationBufferWindowMemory", {"k": 50}),
    ],
)
def test_outputs_match_langchain(
    ours: type, theirs: str, kwargs: dict[str, object], return_messages: bool
) -> None:
    mine = ours(return_messages=return_messages, memory_key="chat", **kwargs)
    reference = _langchain(theirs, return_messages=return_messages, memory_key="chat", **kwargs)
    for memory in (mine, reference):
        run_turns(memory)  # type: ignore[arg-type]
    assert mine.load_memory_variables({}) == reference.load_memory_variables({})  # type: ignore[attr-defined]


def test_string_buffer_matches_langchain_exactly() -> None:
    mine = StringBufferMemory()
    reference = _langchain("ConversationStringBufferMemory")
    assert mine.load_memory_variables({}) == reference.load_memory_variables({})  # type: ignore[attr-defined]
    for memory in (mine, reference):
        run_turns(memory)  # type: ignore[arg-type]
    assert mine.load_memory_variables({}) == reference.load_memory_variables({})  # type: ignore[attr-defined]
    assert mine.load_memory_variables({})["history"].startswith("\nHuman: question 0")


def test_string_buffer_attribute_is_langchains_string() -> None:
    """``buffer`` is the string loaded, leading newline included, as LangChain's (it was not)."""
    mine = StringBufferMemory()
    reference = _langchain("ConversationStringBufferMemory")
    for memory in (mine, reference):
        run_turns(memory, TURNS[:2])  # type: ignore[arg-type]
    assert mine.buffer == reference.buffer == reference.load_memory_variables({})["history"]  # type: ignore[attr-defined]
    assert asyncio.run(mine.abuffer()) == reference.buffer  # type: ignore[attr-defined]


def test_string_buffer_takes_langchains_buffer_argument_until_cleared() -> None:
    """``buffer=`` (a transcript restored as text) was refused as an unknown argument."""
    mine = StringBufferMemory(buffer="Human: earlier\nAI: yes")
    reference = _langchain("ConversationStringBufferMemory", buffer="Human: earlier\nAI: yes")
    assert mine.load_memory_variables({}) == reference.load_memory_variables({})  # type: ignore[attr-defined]
    for memory in (mine, reference):
        run_turns(memory, TURNS[:2])  # type: ignore[arg-type]
    assert mine.load_memory_variables({}) == reference.load_memory_variables({})  # type: ignore[attr-defined]
    assert mine.buffer == reference.buffer  # type: ignore[attr-defined]
    assert (
        create_memory(mine.to_config())
        .load_memory_variables({})["history"]
        .startswith("Human: earlier")
    )
    for memory in (mine, reference):
        memory.clear()  # type: ignore[attr-defined]
        run_turns(memory, TURNS[:1])  # type: ignore[arg-type]
    assert mine.load_memory_variables({}) == reference.load_memory_variables({})  # type: ignore[attr-defined]


def test_string_buffer_refuses_return_messages() -> None:
    with pytest.raises(ValueError, match="return_messages must be False"):
        StringBufferMemory(return_messages=True)


@pytest.mark.parametrize("outputs", [{"output": "a", "other": "b"}, {}])
def test_string_buffer_refuses_several_outputs_without_output_key_as_langchain_does(
    outputs: dict[str, str],
) -> None:
    """LangChain's string buffer guesses no "output": it raises (ours warned and stored it)."""
    mine, reference = StringBufferMemory(), _langchain("ConversationStringBufferMemory")
    expected = rf"^One output key expected, got {re.escape(str(outputs.keys()))}"
    with pytest.raises(ValueError, match=f"{expected}$"):
        reference.save_context({"input": "q"}, outputs)  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidInputError, match=f"{expected}. Set `output_key`"):
            mine.save_context({"input": "q"}, outputs)
        with pytest.raises(InvalidInputError, match=f"{expected}. Set `output_key`"):
            asyncio.run(mine.asave_context({"input": "q"}, outputs))
    assert mine.buffer == reference.buffer == ""  # type: ignore[attr-defined]
    # The input is chosen first, as in LangChain's: its error comes first.
    with pytest.raises(InvalidInputError, match="One input key expected"):
        mine.save_context({"a": "1", "b": "2"}, outputs)
    named = StringBufferMemory(output_key="other")
    named.save_context({"input": "q"}, {"output": "a", "other": "b"})
    assert named.buffer == "\nHuman: q\nAI: b"


def test_langchain_output_key_rules_are_kept() -> None:
    memory = BufferMemory()
    with pytest.warns(UserWarning, match="default 'output' key is being used"):
        memory.save_context({"input": "hi"}, {"output": "hello", "extra": "x"})
    with pytest.raises(ValueError, match="Please set the 'output_key' explicitly"):
        memory.save_context({"input": "hi"}, {"a": "1", "b": "2"})
    with pytest.raises(ValueError, match=r"One input key expected got \['a', 'b'\]"):
        memory.save_context({"a": "1", "b": "2"}, {"output": "x"})
    # memory variables and "stop" are not candidates for the input
    memory.save_context({"input": "q", "history": "...", "stop": ["\n"]}, {"output": "a"})
    assert memory.load_memory_variables({})["history"].endswith("Human: q\nAI: a")


def test_explicit_keys_are_used_and_checked() -> None:
    memory = BufferMemory(input_key="question", output_key="answer")
    memory.save_context({"question": "q", "context": "c"}, {"answer": "a", "sources": []})
    assert memory.buffer_as_str == "Human: q\nAI: a"
    with pytest.raises(KeyError, match="Input key 'question' is not in the inputs"):
        memory.save_context({"query": "q"}, {"answer": "a"})


def test_ai_message_outputs_keep_their_tool_calls() -> None:
    memory = BufferMemory(return_messages=True)
    reply = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}], id="m1")
    memory.save_context({"input": "call f"}, {"output": reply})
    assert memory.buffer_as_messages[-1] == reply


def test_unknown_argument_is_an_error() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBufferMemory(max_tokens=10)  # type: ignore[call-arg]


def test_bad_option_values_name_the_value() -> None:
    with pytest.raises(ValueError, match=r"k: Input should be greater than or equal to 0, got -1"):
        WindowMemory(k=-1)
    with pytest.raises(ValueError, match=r"max_token_limit: Input should be greater than 0, got 0"):
        TokenBufferMemory(max_token_limit=0)
    with pytest.raises(ValueError, match="Unknown token counter 'words'"):
        TokenBufferMemory(token_counter="words")
    with pytest.raises(ValueError, match="chat_memory must be a history"):
        BufferMemory(chat_memory="chat.db")


# -- token buffer --------------------------------------------------------------


class CountingCounter:
    """Counts characters; records how many messages it was asked to count."""

    name = None

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[BaseMessage]) -> int:
        self.calls += len(messages)
        return sum(len(str(m.content)) + 1 for m in messages)


def test_the_llm_counts_as_in_langchain_and_an_explicit_counter_wins() -> None:
    from langchain_core.language_models import FakeListLLM

    llm = FakeListLLM(responses=[], custom_get_token_ids=lambda text: [0] * 1000)
    memory = TokenBufferMemory(llm=llm, max_token_limit=100)
    memory.save_context({"input": "hi"}, {"output": "hello"})
    assert memory.load_memory_variables({})["history"] == ""  # 1000 tokens a message
    by_tiktoken = TokenBufferMemory(llm=llm, token_counter="tiktoken", max_token_limit=100)
    by_tiktoken.save_context({"input": "hi"}, {"output": "hello"})
    assert by_tiktoken.load_memory_variables({})["history"] == "Human: hi\nAI: hello"
    counted_by_llm = TokenBufferMemory(llm=llm, token_counter=llm, max_token_limit=100)
    counted_by_llm.save_context({"input": "hi"}, {"output": "hello"})
    assert counted_by_llm.load_memory_variables({})["history"] == ""


def test_reassigning_the_limit_takes_effect() -> None:
    memory = TokenBufferMemory(max_token_limit=10_000, token_counter="chars")
    run_turns(memory)
    assert "question 0" in memory.load_memory_variables({})["history"]
    memory.max_token_limit = 30
    assert "question 0" not in memory.load_memory_variables({})["history"]


def test_each_message_is_counted_once() -> None:
    counter = CountingCounter()
    memory = TokenBufferMemory(max_token_limit=200, token_counter=counter)
    for i in range(50):
        memory.save_context({"input": f"q{i}"}, {"output": f"a{i}"})
        memory.load_memory_variables({})
    assert counter.calls == 100


def test_token_buffer_stays_within_the_limit_and_starts_on_a_human() -> None:
    counter = TiktokenCounter()
    memory = TokenBufferMemory(max_token_limit=120, return_messages=True)
    for i in range(40):
        memory.save_context(
            {"input": f"tell me about item {i} " * (i % 5 + 1)}, {"output": "ok " * i}
        )
        shown = memory.buffer_as_messages
        assert counter(shown) <= 120
        assert not shown or isinstance(shown[0], HumanMessage)


def test_trim_works_on_persistent_history_and_survives_restart(tmp_path: Path) -> None:
    counter = CountingCounter()

    def open_memory() -> TokenBufferMemory:
        history = SQLiteHistory(tmp_path / "chat.db", session_id="u1")
        return TokenBufferMemory(chat_memory=history, max_token_limit=40, token_counter=counter)

    memory = open_memory()
    run_turns(memory)
    before = memory.load_memory_variables({})
    assert "question 0" not in before["history"]  # trimmed (LangChain's pop(0) would not)
    calls = counter.calls
    reopened = open_memory()
    assert reopened.load_memory_variables({}) == before
    assert counter.calls == calls  # the counts were read back, not recomputed
    # nothing was deleted: the whole conversation is still in the log
    assert len(SQLiteHistory(tmp_path / "chat.db", session_id="u1").entries()) == 2 * len(TURNS)


def count_words(messages: list[BaseMessage]) -> int:
    """A token counter given as a plain function (no name): its identity is its import path."""
    return sum(len(str(m.content).split()) + 1 for m in messages)


def test_a_callable_counter_keys_the_same_state_in_another_process(tmp_path: Path) -> None:
    """The state key names the counter without a memory address, so a restart reuses the state."""
    path = tmp_path / "chat.db"
    script = (
        "from memories import SQLiteHistory, TokenBufferMemory\n"
        "from tests.core.test_short_term_memories import count_words\n"
        f"history = SQLiteHistory({str(path)!r}, session_id='u1')\n"
        "memory = TokenBufferMemory(chat_memory=history, max_token_limit=40, "
        "token_counter=count_words)\n"
        "memory.save_context({'input': 'hello there'}, {'output': 'hi'})\n"
        "print(memory.state_key)\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = python("-c", script, cwd=root)
    history = SQLiteHistory(path, session_id="u1")
    here = TokenBufferMemory(chat_memory=history, max_token_limit=40, token_counter=count_words)
    assert here.state_key == done.stdout.strip()
    assert history.load_state(here.state_key) is not None  # the other process's state, reused
    assert stable_id(here._counter) == f"{__name__}.count_words"


def test_changing_the_limit_recomputes_from_the_log(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "chat.db", session_id="u1")
    run_turns(TokenBufferMemory(chat_memory=history, max_token_limit=30, token_counter="chars"))
    wider = TokenBufferMemory(chat_memory=history, max_token_limit=10_000, token_counter="chars")
    assert "question 0" in wider.load_memory_variables({})["history"]


def test_messages_appended_behind_the_memorys_back_are_trimmed_on_load() -> None:
    history = InMemoryHistory()
    memory = TokenBufferMemory(chat_memory=history, max_token_limit=30, token_counter="chars")
    run_turns(memory, TURNS[:1])
    history.add_messages([HumanMessage("x" * 40), AIMessage("y" * 40), HumanMessage("last q")])
    shown = TokenBufferMemory(
        chat_memory=history, max_token_limit=30, token_counter="chars", return_messages=True
    ).buffer_as_messages
    assert shown == [HumanMessage("last q")]
    assert memory.buffer_as_messages == shown  # the existing memory catches up too


def tool_exchange(i: int) -> list[BaseMessage]:
    call_id = f"call-{i}"
    return [
        HumanMessage(f"what is the weather in city {i}?"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": i}, "id": call_id}]),
        ToolMessage(f"{i} degrees and some clouds over the town", tool_call_id=call_id),
        AIMessage(f"It is {i} degrees."),
    ]


def assert_valid_sequence(messages: list[BaseMessage]) -> None:
    """No orphan tool results, and every tool call followed by its results."""
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"orphan tool result at {i}"
            open_calls.discard(message.tool_call_id)
        elif isinstance(message, AIMessage):
            assert not open_calls, f"tool call without result before {i}"
            open_calls = {c["id"] for c in message.tool_calls if c["id"]}


@pytest.mark.parametrize("start_on", ["human", "any"])
def test_trimming_never_splits_tool_calls_from_results(start_on: str) -> None:
    history = InMemoryHistory()
    memory = TokenBufferMemory(
        chat_memory=history, max_token_limit=70, start_on=start_on, return_messages=True
    )
    for i in range(12):
        history.add_messages(tool_exchange(i))
        shown = memory.buffer_as_messages
        assert shown
        assert not isinstance(shown[0], ToolMessage)
        if start_on == "human":
            assert isinstance(shown[0], HumanMessage)
        assert_valid_sequence(shown)


def test_window_keeps_whole_exchanges_with_tool_calls() -> None:
    history = InMemoryHistory()
    for i in range(5):
        history.add_messages(tool_exchange(i))
    shown = WindowMemory(chat_memory=history, k=2, return_messages=True).buffer_as_messages
    assert shown == tool_exchange(3) + tool_exchange(4)


def test_include_system_keeps_the_leading_system_message() -> None:
    history = InMemoryHistory()
    history.add_messages([SystemMessage("You are a pirate.")])
    memory = TokenBufferMemory(
        chat_memory=history,
        max_token_limit=40,
        include_system=True,
        return_messages=True,
        token_counter="chars",
    )
    run_turns(memory)
    shown = memory.buffer_as_messages
    assert shown[0] == SystemMessage("You are a pirate.")
    assert isinstance(shown[1], HumanMessage)
    assert CharCounter()(shown) <= 40
    assert TURNS[-1][1] in str(shown[-1].content)


def test_end_on_drops_trailing_messages_of_other_types() -> None:
    history = InMemoryHistory()
    history.add_messages(tool_exchange(1)[:3])  # ends on a tool result
    memory = TokenBufferMemory(
        chat_memory=history, max_token_limit=500, end_on="human", return_messages=True
    )
    assert memory.buffer_as_messages == [HumanMessage("what is the weather in city 1?")]


exchange_kinds = st.lists(st.sampled_from(["plain", "tool", "long"]), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(kinds=exchange_kinds, limit=st.integers(min_value=5, max_value=400))
def test_window_equals_langchain_trim_messages(kinds: list[str], limit: int) -> None:
    """The incremental window is exactly trim_messages(strategy="last", start_on="human")."""
    counter = CharCounter()
    history = InMemoryHistory()
    memory = TokenBufferMemory(
        chat_memory=history, max_token_limit=limit, token_counter=counter, return_messages=True
    )
    log: list[BaseMessage] = []
    for i, kind in enumerate(kinds):
        if kind == "tool":
            new = tool_exchange(i)
        else:
            words = "many words here " * (10 if kind == "long" else 1)
            new = [HumanMessage(f"q{i} {words}"), AIMessage(f"a{i} {words}")]
        history.add_messages(new)
        log.extend(new)
        expected = trim_messages(
            log, max_tokens=limit, token_counter=counter, strategy="last", start_on="human"
        )
        assert memory.buffer_as_messages == expected


def test_loading_a_huge_session_reads_only_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "huge.db"
    SQLiteHistory(path, session_id="big")  # creates the tables
    fill_history_fast(path, "big", 50_000)  # 100,000 messages
    import memories.stores.history.sql as sql

    parsed: list[str] = []
    original = sql.load_message
    monkeypatch.setattr(sql, "load_message", lambda text: parsed.append(text) or original(text))
    history = SQLiteHistory(path, session_id="big")
    sql._decoded.cache_clear()
    token_buffer = TokenBufferMemory(chat_memory=history, max_token_limit=100)
    assert token_buffer.load_memory_variables({})["history"].endswith("AI: an answer")
    assert len(parsed) < 300
    parsed.clear()
    sql._decoded.cache_clear()  # parsed rows are kept per process: count the window's afresh
    window = WindowMemory(chat_memory=history, k=3)
    assert window.load_memory_variables({})["history"].count("Human:") == 3
    assert len(parsed) == 6


def test_same_config_memories_share_state_safely(history: ChatHistory) -> None:
    first = TokenBufferMemory(chat_memory=history, max_token_limit=50, token_counter="chars")
    second = TokenBufferMemory(chat_memory=history, max_token_limit=50, token_counter="chars")
    for i, (q, a) in enumerate(TURNS):
        (first if i % 2 else second).save_context({"input": q}, {"output": a})
    assert first.load_memory_variables({}) == second.load_memory_variables({})


def test_counter_that_is_not_a_counter_is_rejected_at_construction() -> None:
    with pytest.raises(ValueError, match=r"Cannot count tokens with 3\.5"):
        TokenBufferMemory(token_counter=3.5)


def test_custom_callable_counter_has_no_config_form() -> None:
    memory = TokenBufferMemory(token_counter=lambda messages: len(messages))
    with pytest.raises(ConfigError, match="has no config form"):
        memory.to_config()
    assert TokenBufferMemory(token_counter="chars").to_config()["token_counter"] == "chars"


@pytest.mark.parametrize("kind", ["memory", "sqlite", "langchain"])
def test_a_lone_surrogate_is_an_input_error_on_every_backend_and_nothing_is_written(
    kind: str, tmp_path: Path
) -> None:
    """Issue 10, item 8: SQLite raised a raw UnicodeEncodeError; in-memory histories took it."""
    from tests.conftest import make_history_factory

    history = make_history_factory(kind, tmp_path)("s")
    memory = BufferMemory(chat_memory=history)
    memory.save_context({"input": "fine"}, {"output": "ok"})
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        memory.save_context({"input": "bad \ud800 text"}, {"output": "ok"})
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        memory.save_messages([HumanMessage("x"), AIMessage("\udfff")])
    assert [m.content for m in memory.buffer_as_messages] == ["fine", "ok"]


@pytest.mark.parametrize("cls", [TokenBufferMemory, ConversationTokenBufferMemory])
def test_an_exchange_over_the_limit_shows_nothing_and_says_so_once(
    caplog: pytest.LogCaptureFixture, cls: type[TokenBufferMemory]
) -> None:
    """Issue 10, item 14: it returned "" with nothing logged. The warning names the class built."""
    memory = cls(max_token_limit=5)
    with caplog.at_level("WARNING", logger="memories.short_term.token_buffer"):
        # Both messages over the limit: ConversationTokenBufferMemory would show the answer alone.
        memory.save_context({"input": "a long question " * 5}, {"output": "a long answer " * 5})
        assert memory.load_memory_variables({}) == {"history": ""}
        memory.load_memory_variables({})
    warnings = [
        r.getMessage() for r in caplog.records if "over max_token_limit=5" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{cls.__name__} (session 'default'): the newest exchange")


@pytest.mark.parametrize("include_system", [False, True])
def test_oversize_truncate_shows_the_newest_human_message_cut_to_fit(include_system: bool) -> None:
    """Issue 10, item 14: the option to keep the newest human message, truncated."""
    memory = TokenBufferMemory(
        max_token_limit=30, oversize="truncate", include_system=include_system, return_messages=True
    )
    if include_system:
        memory.chat_memory.add_messages([SystemMessage("Be brief.")])
    memory.save_context({"input": "short"}, {"output": "fine"})
    long_question = "please tell me everything about the history of tea in China " * 20
    memory.save_context({"input": long_question}, {"output": "a long answer " * 20})
    shown = memory.load_memory_variables({})["history"]
    cut = shown[-1]
    assert isinstance(cut, HumanMessage) and cut.text.endswith(" [...]")
    assert long_question.startswith(cut.text.removesuffix(" [...]"))
    assert len(cut.text) > 40  # as much as fits, not a token or two
    assert memory._counter(shown) <= 30
    assert [type(m) for m in shown[:-1]] == ([SystemMessage] if include_system else [])
    assert create_memory(memory.to_config()).oversize == "truncate"
    with pytest.raises(ConfigError, match="oversize"):
        TokenBufferMemory(oversize="cut")


class WordCountingChat(FakeListChatModel):
    """A fake model with its own token counter (a word count), as users' test suites have."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        return sum(len(str(m.content).split()) for m in messages)


def test_with_llm_and_no_counter_the_models_own_counter_trims_as_langchains_does() -> None:
    """Issue 11: ours counted with tiktoken, so the same limit trimmed elsewhere."""
    model = WordCountingChat(responses=["x"])
    ours = TokenBufferMemory(llm=model, max_token_limit=7)
    theirs = _langchain("ConversationTokenBufferMemory", llm=model, max_token_limit=7)
    for i in range(4):
        turn = ({"input": f"question number {i} here"}, {"output": f"answer {i}"})
        ours.save_context(*turn)
        theirs.save_context(*turn)  # type: ignore[attr-defined]
        assert ours.load_memory_variables({}) == theirs.load_memory_variables({})  # type: ignore[attr-defined]


def test_a_model_that_cannot_count_here_falls_back_to_tiktoken_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from langchain_core.language_models import FakeListLLM

    class CannotCount(FakeListLLM):
        def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
            raise ImportError("a tokenizer would be downloaded")

    with caplog.at_level("WARNING", logger="memories.kernel.tokens"):
        first = TokenBufferMemory(llm=CannotCount(responses=["x"]))
        TokenBufferMemory(llm=CannotCount(responses=["x"]))
    assert isinstance(first._counter, TiktokenCounter)
    assert (
        sum("CannotCount cannot count tokens here" in r.getMessage() for r in caplog.records) == 1
    )
