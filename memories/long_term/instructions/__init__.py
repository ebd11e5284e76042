"""Procedural memory: an agent's instructions, refined from conversations and feedback."""

from memories.long_term.instructions.memory import (
    InstructionsMemory,
    InstructionsStatus,
    InstructionsVersion,
    ReflectionResult,
)
from memories.long_term.instructions.reflection import Feedback, Revision

__all__ = [
    "Feedback",
    "InstructionsMemory",
    "InstructionsStatus",
    "InstructionsVersion",
    "ReflectionResult",
    "Revision",
]
