"""The ``memories`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from memories.errors import MemoriesError

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from memories.demo import format_results, run_demo

    llm = None
    if args.llm:
        from integrations.models import resolve_llm

        llm = resolve_llm(args.llm)
    results = run_demo(Path(args.db) if args.db else None, llm=llm)
    print("memories demo: one scripted 10-turn conversation through ConversationChain,")
    source = f"from {args.llm}" if llm else "scripted (no LLM)"
    print(f"once per memory type; replies are {source}.")
    print()
    print(format_results(results))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memories", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the scripted conversation with each memory type")
    demo.add_argument("--db", help="SQLite file for the histories (default: a temporary file)")
    demo.add_argument("--llm", help="a real model, e.g. openai:gpt-4o-mini (default: scripted)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memories`` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except MemoriesError as exc:
        print(f"memories: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
