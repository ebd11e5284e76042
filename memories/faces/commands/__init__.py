"""What the ``memories`` subcommands do, apart from argument parsing.

Each works on a memory built from a config file (``--session`` moves its histories to
another session, so one config serves every user). One module per family: :mod:`.opening`
(the config's memory and its parts), :mod:`.chatting`, :mod:`.copying`, :mod:`.inspecting`,
:mod:`.transfer`, :mod:`.clearing`, :mod:`.sweeping`.
"""

from __future__ import annotations

from memories.core.members import chat_memories
from memories.faces.commands.chatting import CHAT_HELP, chat, format_usage, usage_report
from memories.faces.commands.clearing import clear, clear_targets, erase
from memories.faces.commands.copying import on_a_copy
from memories.faces.commands.inspecting import dead_letters, inspect
from memories.faces.commands.opening import (
    flush,
    graphs_of,
    histories_of,
    knowledge_of,
    leaf_memories,
    nothing_stored,
    open_memory,
    open_stores,
    per_namespace,
)
from memories.faces.commands.sweeping import reshard, sweep, sweep_report
from memories.faces.commands.transfer import (
    DocumentLine,
    EntityLine,
    ExportLine,
    TripleLine,
    export_config,
    export_jsonl,
    import_jsonl,
    read_jsonl,
    stores_of,
)

__all__ = [
    "CHAT_HELP",
    "DocumentLine",
    "EntityLine",
    "ExportLine",
    "TripleLine",
    "chat",
    "chat_memories",
    "clear",
    "clear_targets",
    "dead_letters",
    "erase",
    "export_config",
    "export_jsonl",
    "flush",
    "format_usage",
    "graphs_of",
    "histories_of",
    "import_jsonl",
    "inspect",
    "knowledge_of",
    "leaf_memories",
    "nothing_stored",
    "on_a_copy",
    "open_memory",
    "open_stores",
    "per_namespace",
    "read_jsonl",
    "reshard",
    "stores_of",
    "sweep",
    "sweep_report",
    "usage_report",
]
