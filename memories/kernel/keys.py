"""Choosing which input and output of a chain run a memory stores.

This is the only place where keys are picked; every memory calls
:func:`select_turn`. The rules and messages follow LangChain's classic
memories, so behaviour does not change for a migrating user.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from langchain_core.messages import BaseMessage

from memories.errors import InvalidInputError, MissingKeyError
from memories.kernel.messages import check_storable, message_text, turn_messages

__all__ = [
    "TurnKeys",
    "get_prompt_input_key",
    "select_input_key",
    "select_output_key",
    "select_turn",
    "turn_messages_for",
]


def get_prompt_input_key(inputs: Mapping[str, Any], memory_variables: Sequence[str]) -> str:
    """Return the only input key that is neither a memory variable nor ``"stop"``.

    Raises:
        InvalidInputError: zero or several candidate keys (LangChain's message).
    """
    candidates = sorted(set(inputs).difference([*memory_variables, "stop"]))
    if len(candidates) != 1:
        raise InvalidInputError(
            f"One input key expected got {candidates}. "
            "Set `input_key` on the memory to say which input to store."
        )
    return candidates[0]


def select_input_key(
    inputs: Mapping[str, Any], memory_variables: Sequence[str], input_key: str | None
) -> str:
    """The input key to store: ``input_key`` when set, else the single prompt input."""
    if not isinstance(inputs, Mapping):
        raise InvalidInputError(
            f"inputs must be a dict of chain inputs, got {type(inputs).__name__}: {inputs!r:.80}"
        )
    key = input_key if input_key is not None else get_prompt_input_key(inputs, memory_variables)
    if key not in inputs:
        raise MissingKeyError(
            f"Input key {key!r} is not in the inputs {sorted(inputs)}. "
            "Pass it, or set `input_key` to one of the keys present."
        )
    return key


def select_output_key(
    outputs: Mapping[str, Any], output_key: str | None, owner: str, *, guess: bool = True
) -> str:
    """The output key to store: ``output_key`` when set, the only one, else ``"output"``
    (``guess=False``: no ``"output"`` among several outputs, as LangChain's string buffer)."""
    if not isinstance(outputs, Mapping):
        raise InvalidInputError(
            f"outputs must be a dict of chain outputs, got {type(outputs).__name__}: "
            f"{outputs!r:.80}"
        )
    if output_key is not None:
        key = output_key
    elif len(outputs) == 1:
        key = next(iter(outputs))
    elif not guess:
        raise InvalidInputError(f"One output key expected, got {outputs.keys()}. Set `output_key`.")
    elif "output" in outputs:
        key = "output"
        warnings.warn(
            f"'{owner}' got multiple output keys: {outputs.keys()}. The default 'output' "
            "key is being used. If this is not desired, please manually set 'output_key'.",
            stacklevel=4,
        )
    else:
        raise InvalidInputError(
            f"Got multiple output keys: {outputs.keys()}, cannot determine which to store "
            "in memory. Please set the 'output_key' explicitly."
        )
    if key not in outputs:
        raise MissingKeyError(
            f"Output key {key!r} is not in the outputs {sorted(outputs)}. "
            "Set `output_key` to one of the keys present."
        )
    return key


def select_turn(
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
    *,
    memory_variables: Sequence[str],
    input_key: str | None,
    output_key: str | None,
    owner: str,
    guess: bool = True,
) -> tuple[Any, Any]:
    """Return ``(input value, output value)`` of one chain run (``guess``: as
    :func:`select_output_key` takes it)."""
    in_key = select_input_key(inputs, memory_variables, input_key)
    out_key = select_output_key(outputs, output_key, owner, guess=guess)
    return inputs[in_key], outputs[out_key]


class TurnKeys(Protocol):
    """What a memory says about which keys to store: LangChain's three members."""

    @property
    def memory_variables(self) -> list[str]: ...

    input_key: str | None
    output_key: str | None


def turn_messages_for(
    memory: TurnKeys, inputs: Mapping[str, Any], outputs: Mapping[str, Any], *, guess: bool = True
) -> list[BaseMessage]:
    """A chain run's messages, checked before any write (``guess``: :func:`select_output_key`'s)."""
    input_value, output_value = select_turn(
        inputs,
        outputs,
        memory_variables=memory.memory_variables,
        input_key=memory.input_key,
        output_key=memory.output_key,
        owner=type(memory).__name__,
        guess=guess,
    )
    return check_storable(turn_messages(input_value, output_value))


def input_text_for(memory: TurnKeys, inputs: Mapping[str, Any]) -> str:
    """The text of a chain run's input, what a memory searches with (a load has no outputs)."""
    value = inputs[select_input_key(inputs, memory.memory_variables, memory.input_key)]
    if isinstance(value, str):
        return value
    (human, _) = turn_messages(value, "")
    return message_text(human)
