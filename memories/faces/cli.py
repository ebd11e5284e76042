"""The ``memories`` command: the demo, and the commands on a memory config.

Commands on a config: chat, usage, inspect, export, import, clear, erase,
sweep, reshard, dead-letters, serve (a web inspector), mcp (an MCP server).

Exit status: 0 on success, 1 when a confirmation is declined, 2 on a bad
config or bad input (the message goes to stderr), 3 when ``erase`` finds
something left (run it again).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from memories._version import __version__
from memories.errors import ConfigError, MemoriesError
from memories.kernel.imports import DISTRIBUTION

#: What a command runs: its parsed arguments to an exit status.
Run = Callable[[argparse.Namespace], int]

__all__ = ["LLM_ENV", "NAMESPACE_ENV", "TOKEN_ENV", "USER_ENV", "main"]

#: The environment variable that names a model when ``--llm`` is not given.
LLM_ENV = "MEMORIES_LLM"
#: The environment variable that holds ``memories serve``'s token when ``--token`` is not given.
TOKEN_ENV = "MEMORIES_TOKEN"
#: The environment variables that say whose memories ``memories mcp`` serves, when
#: ``--namespace`` / ``--user`` are not given.
NAMESPACE_ENV = "MEMORIES_NAMESPACE"
USER_ENV = "MEMORIES_USER"


def _model(spec: str | None, offline: str = "") -> tuple[Any, str]:
    """The model ``--llm`` or ``$MEMORIES_LLM`` names, and where replies come from; naming
    neither, an echo model when ``offline`` (its source) is given, else None."""
    spec = spec or os.environ.get(LLM_ENV) or None
    if spec is None and offline:
        from memories.testing import ScriptedChatModel

        return ScriptedChatModel(), offline
    if spec is None:
        return None, f"scripted (no --llm or ${LLM_ENV}: offline, no LLM)"
    from memories.kernel.llm import resolve_llm

    return resolve_llm(spec), f"from {spec}"


def _demo(args: argparse.Namespace) -> int:
    from memories.faces.demo import (
        SESSIONS,
        config_path,
        format_results,
        full_text,
        html_report,
        plot_results,
        run_demo,
    )

    llm, source = _model(args.llm)
    if args.db and not Path(args.db).expanduser().absolute().parent.is_dir():
        raise ConfigError(
            f"--db {args.db!r}: the folder {str(Path(args.db).parent)!r} does not exist; the "
            "demo makes no folders (leave --db out for a temporary one)."
        )
    results = run_demo(Path(args.db) if args.db else None, llm=llm)
    if args.plot:
        plot_results(results, args.plot)
    if args.html:
        html_report(results, args.html)
    turns = sum(len(session) for session in SESSIONS)
    print(
        f"memories demo: one user's {turns}-turn conversation in {len(SESSIONS)} sessions "
        "(the app restarts between them),"
    )
    print(f"through ConversationChain once per memory type; replies are {source}.")
    print()
    print(format_results(results))
    if args.show:
        print()
        print(full_text(results, args.show))
    for kind, where in (("picture", args.plot), ("report", args.html)):
        if where:
            print(f"\nThe {kind}: {where}")
    if llm is None:
        print()
        print("Offline, summaries are extractive (quoted sentences), the collection keeps what")
        print("the user states by rules (a correction updates it, both versions kept), and the")
        print("profile's updates are scripted JSON patches; --llm has a model do all three.")
    print()
    if args.db:
        config = shlex.quote(str(config_path(Path(args.db))))
        print(f"The data stays in {args.db}; see what each memory kept, since when and why:")
        print(f"  memories serve --config {config}")
    else:
        print("The data was in a temporary folder, now removed: --db PATH keeps it, with a config")
        print("that `memories serve --config` opens in the browser.")
    return 0


def _chat(args: argparse.Namespace) -> int:
    from memories.faces.commands import chat, open_memory

    memory = open_memory(args.config, args.session, args.namespace, command="chat")
    model, source = _model(args.llm, f"an offline echo model (no --llm or ${LLM_ENV} given)")
    _say(
        f"memories chat: {type(memory).__name__}, replies {source}.",
        "Type a message per line; /help lists the commands, /quit ends.",
    )
    prompt = "you> " if sys.stdin.isatty() else ""
    chat(memory, model, sys.stdin, sys.stdout, system=args.system, prompt=prompt)
    if prompt:  # Ctrl-D at the prompt: end the line it left
        print()
    return 0


def _usage(args: argparse.Namespace) -> int:
    import io

    from memories.faces.commands import chat, format_usage, on_a_copy, open_memory, usage_report

    model, source = _model(args.llm, "an offline echo model")
    # On a copy of the stores unless --save: measuring must not save the conversation.
    where = nullcontext(args.config) if args.save else on_a_copy(args.config, command="usage")
    with where as config:
        memory = open_memory(config, args.session, args.namespace, command="usage")
        turns = chat(memory, model, sys.stdin, io.StringIO())
        report = usage_report(memory)
    if args.json:
        json.dump({"turns": turns, "memories": report}, sys.stdout, indent=2)
        print()
    else:
        stores = "the config's stores" if args.save else "a copy of the stores, now removed"
        _say(f"{turns} turns on {stores}, replies by {source}:")
        sys.stdout.write(format_usage(report))
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from memories.faces.commands import inspect, open_memory
    from memories.faces.commands.opening import made_memory, made_options

    made_options(args.config)
    memory = made_memory(open_memory(args.config, args.session, args.namespace, command="inspect"))
    inspect(memory, sys.stdout, last=None if args.all else args.last)
    return 0


def _export(args: argparse.Namespace) -> int:
    from memories.faces.commands import export_config

    whose = {"session": args.session, "namespace": args.namespace}
    stdout = args.output in (None, "-")
    with nullcontext(sys.stdout) if stdout else open(args.output, "w", encoding="utf-8") as out:
        messages, documents = export_config(args.config, out, **whose)
    _say(f"memories export: {messages} messages, {documents} documents, entities and triples")
    return 0


def _import(args: argparse.Namespace) -> int:
    from memories.core.config import load_config, namespace_labels
    from memories.faces.commands import (
        ExportLine,
        graphs_of,
        import_jsonl,
        knowledge_of,
        open_memory,
        open_stores,
        read_jsonl,
        stores_of,
    )

    options = load_config(args.config)
    labels = namespace_labels(args.namespace) if args.namespace else None
    stores_of(options, args.session, labels, "import")  # a bad config fails before reading
    stdin = args.file == "-"
    if not stdin and not Path(args.file).is_file():
        raise ConfigError(
            f"Import file {args.file!r} does not exist (give a path, or - for stdin)."
        )
    with nullcontext(sys.stdin) if stdin else Path(args.file).open(encoding="utf-8") as handle:
        lines = read_jsonl(
            _checking(handle, args.progress),
            source="<stdin>" if stdin else args.file,
            session=args.session,
            namespace=labels,
        )
    written = import_jsonl(
        lines,
        lambda session: stores_of(options, session, labels, "import")[0],
        lambda namespace: stores_of(options, args.session, namespace, "import")[1],
        lambda session: [s for _, s in knowledge_of(open_stores(options, session, labels))],
        lambda namespace: graphs_of(open_memory(options, args.session, namespace)),
        batch_size=args.batch_size,
        progress=args.progress,
    )
    messages = sum(isinstance(line, ExportLine) for line in lines)
    sessions = len({line.session_id for line in lines if isinstance(line, ExportLine)})
    _say(
        f"memories import: {messages} messages into {sessions} session(s), "
        f"{len(lines) - messages} documents, entities and triples; {written} written "
        "(messages a session already holds are skipped, documents replaced by id, summaries "
        "and triples the store holds already skipped)"
    )
    return 0


def _checking(lines: Iterable[str], progress: bool | None) -> Iterable[str]:
    """The lines, with a progress bar while the whole file is checked, before any write."""
    from tqdm import tqdm

    disable = None if progress is None else not progress  # None: only on a terminal
    return tqdm(lines, desc="check", unit="line", disable=disable, file=sys.stderr)


def _dead_letters(args: argparse.Namespace) -> int:
    from memories.faces.commands import dead_letters, per_namespace

    memories = per_namespace(args.config, args.session, args.namespace)
    if not sum(1 for memory in memories if dead_letters(memory, sys.stdout, retry=args.retry) >= 0):
        _say("memories dead-letters: the stores hold no namespace yet.")
    return 0


def _clear(args: argparse.Namespace) -> int:
    from memories.faces.commands import clear, clear_targets, open_memory

    memory = open_memory(args.config, args.session, args.namespace, command="clear")
    targets = clear_targets(memory, namespaces=args.erase_namespace)
    if not targets:
        raise ConfigError(
            f"A {type(memory).__name__} keeps no data to erase for a session (no history, no "
            "vector memory); --erase-namespace erases profiles, entity graphs and whole "
            "namespaces."
        )
    if not args.yes and not _confirmed("This erases:", targets):
        _say("memories clear: nothing erased.")
        return 1
    for line in clear(memory, namespaces=args.erase_namespace):
        _say(f"memories clear: erased {line}.")
    return 0


def _erase(args: argparse.Namespace) -> int:
    from memories.faces.commands import erase

    report = erase(
        args.config,
        namespace=args.namespace,
        session=args.session,
        out=sys.stderr,
        confirm=(
            None
            if args.yes or args.dry_run
            else functools.partial(_confirmed, "This erases, for good (no rollback):")
        ),
        dry_run=args.dry_run,
    )
    if report is None:
        _say("memories erase: nothing erased.")
        return 1
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(report.text(stores=args.dry_run), end="")  # each store's line is written as done
    return 0 if args.dry_run or report.complete else 3


def _reshard(args: argparse.Namespace) -> int:
    from memories.faces.commands import nothing_stored, open_stores, reshard

    if _nothing_to_do("reshard", nothing_stored(args.config)):
        return 0
    memory = open_stores(args.config)
    found = reshard(memory, dry_run=True)
    movable = [d for d in found if d.moved]
    for demotion in found:
        if not demotion.moved:
            print(f"keep {demotion.namespace}: {demotion.kept}")
    if not movable:
        _say("memories reshard: no namespace to move.")
        return 0
    verb = "would move" if args.dry_run else "move"
    for demotion in movable:
        print(f"{verb} {demotion.namespace}: {demotion.documents} documents into its shard")
    if args.dry_run:
        return 0
    if not args.yes and not _confirmed(f"Move {len(movable)} namespaces?"):
        _say("memories reshard: nothing moved.")
        return 1
    moved = [d for d in reshard(memory) if d.moved]
    documents = sum(d.documents for d in moved)
    _say(f"memories reshard: {len(moved)} namespaces ({documents} documents) moved into shards.")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from memories.faces.commands import nothing_stored, open_stores, sweep, sweep_report

    if _nothing_to_do("sweep", nothing_stored(args.config)):
        return 0
    memory = open_stores(args.config, args.session, args.namespace)
    found = sweep(
        memory,
        dry_run=args.dry_run,
        session=bool(args.session),
        namespace=bool(args.namespace),
    )
    if args.dry_run:
        _say("memories sweep: a dry run, nothing is deleted.")
    lines, notes = sweep_report(
        memory, found, dry_run=args.dry_run, session=args.session, namespace=args.namespace
    )
    print(*lines, sep="\n")
    for note in notes:
        _say(f"memories sweep: {note}")
    return 0


def _say(*lines: str) -> None:
    """What a command tells the person running it, on stderr (its output goes to stdout)."""
    print(*lines, sep="\n", file=sys.stderr)


def _confirmed(question: str, lines: Sequence[str] = ()) -> bool:
    """Ask ``question`` (after ``lines``, indented) on stdout; whether stdin answered yes."""
    if lines:
        print(question, *(f"  {line}" for line in lines), sep="\n")
        question = "Go on?"
    print(f"{question} [y/N] ", end="")
    sys.stdout.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _nothing_to_do(command: str, unmade: list[str]) -> bool:
    """Say so when none of the config's stores exists (opening them would only make them)."""
    if unmade:
        where = ", ".join(repr(place) for place in unmade)
        _say(f"memories {command}: nothing is stored yet ({where} do not exist).")
    return bool(unmade)


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _serve(args: argparse.Namespace) -> int:
    from memories.kernel.imports import import_object

    token = args.token or os.environ.get(TOKEN_ENV) or None
    loopback = _is_loopback(args.host)
    if not loopback and token is None:
        raise ConfigError(
            f"--host {args.host!r} is reachable from other machines, and the inspector shows "
            f"what every user's memories hold: set a token (--token or ${TOKEN_ENV}) to serve "
            "beyond this machine, or leave --host at 127.0.0.1."
        )
    create_app = import_object("memories.faces.server.app", "create_app", what="the inspector")
    run = import_object("uvicorn", "run", what="the inspector's web server")
    from memories.faces.server.app import LOOPBACK_HOSTS
    from memories.faces.server.service import Inspector

    app = create_app(
        Inspector(args.config, allow_writes=args.allow_writes),
        token=token,
        hosts=LOOPBACK_HOSTS if loopback else ("*",),
        timeout=args.timeout,
    )
    where = f"http://{args.host}:{args.port}/"
    mode = "inspector (writes allowed)" if args.allow_writes else "read-only inspector"
    _say(f"memories serve: {mode} of {args.config} at {where}")
    if token is not None:
        _say(f"Open {where}?token=... once (the token you set) in your browser.")
    run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_keep_alive=5,
        timeout_graceful_shutdown=5,
        limit_concurrency=64,
        h11_max_incomplete_event_size=16_384,
    )
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from memories.kernel.imports import import_object

    serve = import_object("memories.faces.mcp_server", "serve", what="the MCP server")
    from memories.faces.mcp_server import ConfigTools

    tools = ConfigTools(
        args.config,
        namespace=args.namespace or os.environ.get(NAMESPACE_ENV) or None,
        user=args.user or os.environ.get(USER_ENV) or None,
    )
    _say(f"memories mcp: {', '.join(tools.tools)} over stdio, for {tools.whose}")
    serve(tools, timeout=args.timeout)
    return 0


def _positive(text: str) -> int:
    """An argparse type: a whole number > 0."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a whole number > 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memories",
        description=(__doc__ or "").replace("``", ""),  # reST marks read as noise in a terminal
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"memories {__version__} ({DISTRIBUTION})"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run the scripted conversation with each memory type")
    demo.add_argument(
        "--db",
        help="SQLite file for the histories; the vector memory's Chroma folder goes beside it "
        "(NAME.chroma), and NAME.yaml, a config that `memories serve --config` opens. "
        "Default: a temporary folder, removed at the end",
    )
    demo.add_argument("--show", metavar="MEMORY", help="also print what MEMORY injects, whole")
    demo.add_argument(
        "--plot", metavar="FILE.png", help="draw tokens and LLM calls per turn (the plot extra)"
    )
    demo.add_argument(
        "--html", metavar="FILE.html", help="the table, every injection whole, and the picture"
    )
    demo.add_argument(
        "--llm", help=f"a real model, e.g. openai:gpt-4o-mini (default: ${LLM_ENV}, else scripted)"
    )
    demo.set_defaults(run=_demo)

    def with_config(
        run: Run, help: str, *, dry_run: str = "", confirm: bool = False, timeout: int = 0
    ) -> argparse.ArgumentParser:
        """The command ``run`` runs (``_dead_letters``: ``dead-letters``) over a config file;
        ``dry_run``: that flag's help; ``confirm``: ``--yes``; ``timeout``: ``--timeout``'s
        default (0: no such option)."""
        command = commands.add_parser(run.__name__[1:].replace("_", "-"), help=help)
        command.set_defaults(run=run)
        command.add_argument(
            "--config", required=True, help="memory config file (.yaml, .yml, .toml, .json)"
        )
        if dry_run:
            command.add_argument("--dry-run", action="store_true", help=dry_run)
        if confirm:
            command.add_argument(
                "-y", "--yes", action="store_true", help="do not ask for confirmation"
            )
        if timeout:
            command.add_argument(
                "--timeout",
                type=_positive,
                default=timeout,
                help=f"seconds to wait for the stores, then an error (default {timeout})",
            )
        return command

    def configured(
        run: Run, help: str, *, dry_run: str = "", confirm: bool = False, llm: bool = False
    ) -> argparse.ArgumentParser:
        """A command over one session and namespace of a config (the config's by default);
        ``llm``: it takes ``--llm``."""
        command = with_config(run, help, dry_run=dry_run, confirm=confirm)
        command.add_argument(
            "--session", help="the session to use (default: the config's history session_id)"
        )
        command.add_argument(
            "--namespace",
            help="the namespace of a profile or vector memory, labels joined by '.' "
            "(default: the config's)",
        )
        if llm:
            command.add_argument(
                "--llm", help=f"model, e.g. openai:gpt-4o-mini (default: ${LLM_ENV}, else echo)"
            )
        return command

    chat = configured(_chat, "chat with a configured memory, one line per message", llm=True)
    chat.add_argument("--system", default="", help="a system prompt")

    usage = configured(
        _usage,
        "run the conversation on stdin (one user line each) on a copy of the stores and print "
        "what each memory's model calls, embeddings and store transactions cost",
        llm=True,
    )
    usage.add_argument("--json", action="store_true", help="print the counters as JSON")
    usage.add_argument(
        "--save",
        action="store_true",
        help="run on the config's own stores, saving the conversation there (default: on a "
        "temporary copy of its files, removed at the end; a server store needs --save)",
    )

    inspect = configured(_inspect, "show a session's messages, memory state and what it injects")
    inspect.add_argument("--last", type=_positive, default=20, help="messages to show (default 20)")
    inspect.add_argument("--all", action="store_true", help="show every message")

    export = configured(_export, "write a session's messages as JSON Lines")
    export.add_argument("-o", "--output", help="output file (default: stdout)")

    import_ = configured(_import, "append messages from a JSON Lines export")
    import_.add_argument("file", help="the export file, or - for stdin")
    import_.add_argument(
        "--batch-size", type=_positive, default=500, help="messages per transaction (default 500)"
    )
    import_.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: on a terminal)",
    )

    clear = configured(
        _clear,
        "erase a session: its messages, its vector documents and the memory's state",
        confirm=True,
    )
    clear.add_argument(
        "--erase-namespace",
        action="store_true",
        help="also erase the long-term memories whole: every session's vector documents of "
        "the namespace, the profile and the entity graph",
    )

    letters = configured(_dead_letters, "list the vector documents the store refused and set aside")
    letters.add_argument(
        "--retry",
        nargs="*",
        metavar="ID",
        help="queue these set-aside documents again (no ID: all of them) and write them now",
    )

    erase = with_config(
        _erase,
        "erase a person's data in every store of a config (a namespace, a session or "
        "both), then count again: the report shows 0 remaining",
        dry_run="count what would go; erase nothing",
        confirm=True,
    )
    erase.add_argument(
        "--namespace", help="the person's namespace, labels joined by '.' (e.g. users.maya)"
    )
    erase.add_argument("--session", help="the person's chat session")
    erase.add_argument("--json", action="store_true", help="print the report as JSON")

    with_config(
        _reshard,
        "move small namespaces of a Chroma store made before shards into shared "
        "collections (safe while the application runs; re-run after a crash)",
        dry_run="say what would move; move nothing",
        confirm=True,
    )

    configured(
        _sweep,
        "delete the raw history past each memory's retention and the items past their time to "
        "live, in every session and namespace of the stores (only --session's or --namespace's "
        "when given)",
        dry_run="count what would go; delete nothing",
    )

    serve = with_config(
        _serve,
        "a web inspector and JSON API over a config, read-only by default (server extra)",
        timeout=15,
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=_positive, default=8765, help="port (default 8765)")
    serve.add_argument(
        "--token",
        help=f"required on every request (default: ${TOKEN_ENV}); needed beyond 127.0.0.1",
    )
    serve.add_argument(
        "--allow-writes",
        action="store_true",
        help="show and allow the actions: edit, delete, roll back, retry dead letters",
    )

    mcp = with_config(
        _mcp,
        "an MCP server over stdio: the memory tools of a config (the mcp extra)",
        timeout=30,
    )
    mcp.add_argument(
        "--namespace",
        help=f"the one namespace every call uses, labels joined by '.' (default: ${NAMESPACE_ENV})",
    )
    mcp.add_argument(
        "--user",
        help=f"fills the config's {{user_id}} (default: ${USER_ENV}, else the client's name)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memories`` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except MemoriesError as exc:
        _say(f"memories: {exc}")
        return 2
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):  # `memories export | head`: the reader left
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (stdout closes at exit)
            return 0
        where = f": {exc.filename}" if exc.filename else ""
        _say(f"memories: {exc.strerror or exc}{where}")
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)  # Ctrl-C left the cursor after the prompt
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
