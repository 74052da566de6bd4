"""``telos-wrap``: see what telos_wrap saves on a real agent session, offline and without a key.

``telos-wrap demo`` replays the bundled session (``telos_wrap/data/demo_session.jsonl.xz``, see
``DEMO_SOURCE.md``); ``telos-wrap replay FILE`` replays a recording (``telos_wrap.record``) or a
trace file (``--api responses`` converts its chat requests into OpenAI Responses requests,
``telos_wrap.replay.responses``). Every request goes through the real ``anthropic`` / ``openai`` SDK and
``telos_wrap.patch()`` to the built-in engine emulator (``telos_wrap.emulator``), once as the
agent sent it (telos disabled for the call) and once through telos_wrap; the emulator's usage
fields give input tokens, cache reads and writes, and the cost relative to sending everything
uncached (Anthropic: read 0.1x, 5-minute write 1.25x, 1-hour write 2x; other engines: their
``EngineProfile`` multipliers).

The replay machinery lives in ``telos_wrap.replay`` (also what ``benchmarks/cache_efficiency.py``
uses); this module is the command line around it.

Why one module, over 500 lines: it is the parser of every verb and the few lines that hand each to
its room (replay, the emulator, ``check``, ``autopatch``; the dashboard's verb lives in
``dashboard/command.py``); the verbs share their flags' helpers and the one ``--help`` test.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from telos_wrap import __version__ as telos_wrap_version
from telos_wrap.autopatch import (
    OPTIONS_VARIABLE,
    PATCH_VARIABLE,
    STORE_VARIABLE,
    environment,
    options_from_environment,
)
from telos_wrap.check import DEFAULT_MODELS, as_dict, print_header, print_row, print_verdict, run_check
from telos_wrap.config import PatchConfig, updated
from telos_wrap.dashboard import command as dashboard_command
from telos_wrap.emulator import (
    CHAT_FLAVOURS,
    RENDER_MODES,
    Emulator,
    Replier,
    flavour_base_url,
    script,
    serve,
)
from telos_wrap.emulator.replies import replies_from_json, tool_call_from_spec, tool_loop
from telos_wrap.errors import TelosOptionError
from telos_wrap.replay.comparison import Comparison, check_engine, compare, run_demo
from telos_wrap.replay.report import plot_comparison, print_comparison
from telos_wrap.replay.responses import responses_sessions
from telos_wrap.replay.runner import AS_SENT, AUTO_CACHING, ENGINES, TELOS, load_sessions
from telos_wrap.replay.traces import TraceRequest, content_hashing

# -- command line -----------------------------------------------------------------------------------

_EPILOG = (
    "Zero-code: `telos-wrap run -- python app.py` patches an unmodified application; "
    "`telos-wrap emulator` serves the offline emulator for any client; `telos-wrap check` compares "
    "telos' predicted cache reads with what your vendor reports, with your own key."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="telos-wrap",
        description="telos_wrap keeps your anthropic / openai SDK calls hitting the vendors' prompt caches. "
        "This command measures it (offline, against the built-in engine emulator), patches applications "
        "without code changes, and checks telos' predictions against your vendor.",
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{demo,replay,run,emulator,check,dashboard}"
    )
    demo = commands.add_parser(
        "demo",
        help="replay the bundled real agent session (Anthropic): cost without and with telos",
        description="Replay a recorded 43-request LangGraph customer-support session through the real "
        "anthropic SDK to the built-in emulator: as sent, with Anthropic's automatic caching, and through "
        "telos_wrap; then the same session as a careless harness sends it (jittered). Offline, no key.",
    )
    demo.add_argument("--plot", metavar="FILE.png", help="draw cumulative hit ratio and cost per turn")
    demo.add_argument("--json", action="store_true", help="print the results as JSON")
    demo.add_argument("--no-jitter", action="store_true", help="skip the harness-jittered replay")
    demo.add_argument("--per-turn", action="store_true", help="also print one row per request")
    _progress_flag(demo)
    rep = commands.add_parser(
        "replay",
        help="replay a recording (telos_wrap.record) or a trace file",
        description="Replay your own traffic — a file written by `with telos_wrap.record(FILE):` or a "
        "trace file — through the real SDKs to the built-in emulator, as sent and through telos_wrap.",
    )
    rep.add_argument("file", metavar="FILE.jsonl[.xz]", help="the recording or trace file (.jsonl, .gz, .xz)")
    rep.add_argument(
        "--engine", choices=list(ENGINES), default="anthropic", help="emulated engine (default: anthropic)"
    )
    rep.add_argument(
        "--api",
        choices=["native", "responses"],
        default="native",
        help="native: each request as recorded; responses: chat requests converted to OpenAI "
        "Responses requests (instructions + input items), Responses requests as recorded, for "
        "--engine openai|vllm|sglang",
    )
    rep.add_argument("--json", action="store_true", help="print the results as JSON")
    rep.add_argument(
        "--jitter", action="store_true", help="also replay it the way a careless harness sends it"
    )
    rep.add_argument("--limit", type=_positive, metavar="N", help="replay only the first N requests")
    rep.add_argument("--plot", metavar="FILE.png", help="draw cumulative hit ratio and cost per turn")
    rep.add_argument("--per-turn", action="store_true", help="also print one row per request")
    _progress_flag(rep)
    run = commands.add_parser(
        "run",
        help="run a command with telos_wrap.patch() applied at Python start-up (no code change)",
        description="Start COMMAND with telos_wrap.patch() applied before the application's first line, "
        "in every Python process it starts (a sitecustomize directory first on PYTHONPATH, and "
        "TELOS_WRAP_PATCH=1). Options are checked before the command starts. Python run with -I or -E "
        "ignores PYTHONPATH, and so is not patched.",
    )
    run.add_argument("--strict", action="store_true", help="raise TelosStageError instead of failing open")
    run.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="URL=ENGINE",
        help="name the engine of an OpenAI-compatible server (repeatable), e.g. "
        "http://gpu-box:8000/v1=vllm — patch(engines=...)",
    )
    run.add_argument(
        "--options",
        metavar="JSON",
        help="any patch() options as a JSON object, e.g. '{\"only_what_pays\": false}'",
    )
    run.add_argument(
        "--store",
        metavar="URL",
        help="the session store every process shares (its default store), e.g. redis://redis:6379/0, "
        "rediss://, redis+cluster://h1:p1,h2:p2, redis+sentinel://s1:26379/SERVICE; also read from "
        f"{STORE_VARIABLE}",
    )
    run.add_argument(
        "--print-env",
        action="store_true",
        help="print the environment variables that do the same (for process managers) and exit",
    )
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command to run")
    emu = commands.add_parser(
        "emulator",
        help="serve the built-in engine emulator on 127.0.0.1 for any client or language",
        description="Serve the offline engine emulator (Anthropic Messages, OpenAI Chat Completions and "
        "Responses, DeepSeek, vLLM, SGLang; docs/emulator.md) on 127.0.0.1 until interrupted. Any API "
        "key is accepted; nothing leaves the machine.",
    )
    emu.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    emu.add_argument(
        "--flavour",
        choices=list(CHAT_FLAVOURS),
        default="openai",
        help="what {url}/v1/chat/completions emulates (default: openai); {url}/NAME/... always emulates NAME "
        "(the printed base URLs)",
    )
    emu.add_argument(
        "--mode",
        choices=list(RENDER_MODES),
        default="rendered",
        help="what a cache is keyed on: the rendered prompt (default) or the request bytes",
    )
    scripted = emu.add_mutually_exclusive_group()
    scripted.add_argument(
        "--tool-call",
        action="append",
        default=[],
        metavar="NAME[:JSON]",
        help="script the model: call this tool (JSON object of arguments) before answering; repeat for "
        "a sequence, one call per model request of each user question, then --final-text",
    )
    scripted.add_argument(
        "--replies",
        metavar="FILE.json",
        help='script the model from a file: a JSON list of {"text": ..., "tool_calls": [{"name": ..., '
        '"arguments": {...}}]}, the k-th answering the k-th model request of each user question',
    )
    emu.add_argument(
        "--final-text",
        default="Done.",
        metavar="TEXT",
        help="with --tool-call: the answer once the calls are done (default: Done.)",
    )
    chk = commands.add_parser(
        "check",
        help="telos' predicted cache reads beside what your vendor reports, per request (your key)",
        description="Send a short scripted session (a few cents, the vendor's cheapest model that caches) "
        "through the real SDK and telos_wrap.patch() with your own key (ANTHROPIC_API_KEY / "
        "OPENAI_API_KEY), and print per request the cache read telos predicted (the built-in emulator "
        "answering the same bytes) beside the one the vendor reported. Exit status 1 when they disagree.",
    )
    chk.add_argument("vendor", choices=list(DEFAULT_MODELS), help="which SDK and service to check")
    chk.add_argument(
        "--model",
        help=f"model to use (default: anthropic {DEFAULT_MODELS['anthropic']}, "
        f"openai {DEFAULT_MODELS['openai']})",
    )
    chk.add_argument(
        "--base-url",
        help="send to this base URL instead of the vendor's (e.g. the one `telos-wrap emulator` prints)",
    )
    chk.add_argument("--api-key", help="API key (default: the SDK's own environment variable)")
    chk.add_argument(
        "--turns", type=_positive, default=4, metavar="N", help="requests to send (1-5, default 4)"
    )
    chk.add_argument("--json", action="store_true", help="print the results as JSON")
    dashboard_command.add_parser(commands)
    return parser


def _progress_flag(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show a progress line on stderr (default: only when stderr is a terminal)",
    )
    group.add_argument("--no-progress", dest="progress", action="store_false", help="never show it")


def _version() -> str:
    try:
        return metadata.version("telos-wrap")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return telos_wrap_version


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def _load_user_file(path: str, limit: int | None) -> list[list[TraceRequest]]:
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"telos-wrap: {path}: no such file")
    try:
        sessions = load_sessions(file, limit=limit)
    except (ValueError, OSError, EOFError) as exc:
        raise SystemExit(f"telos-wrap: cannot read {path}: {exc}") from None
    if not sessions:
        raise SystemExit(f"telos-wrap: {path} has no requests")
    return sessions


def _emit(comparison: Comparison, args: argparse.Namespace, *, per_turn: bool) -> None:
    if args.plot:
        plot_comparison(comparison, args.plot)
    if args.json:
        sys.stdout.write(json.dumps(comparison.to_json(turns=True), indent=1, ensure_ascii=False) + "\n")
    else:
        print_comparison(comparison, sys.stdout, per_turn=per_turn)
        if args.plot:
            sys.stdout.write(f"plot written to {args.plot}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``telos-wrap`` console script."""
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    if args.command == "emulator":
        return _serve(args)
    if args.command == "check":
        return _check(args)
    if args.command == "dashboard":
        return dashboard_command.run(args)
    if args.plot:
        _check_plot_target(args.plot)
    if args.command == "demo":
        comparison = run_demo(jittered=not args.no_jitter, show_progress=args.progress)
        _emit(comparison, args, per_turn=args.per_turn)
        return 0
    _note(args, f"loading {args.file} …")
    hashed = _hashed_note(args.file)
    sessions = check_engine(args.engine, _load_user_file(args.file, args.limit))
    if args.api == "responses":
        sessions = _as_responses(args.engine, sessions)
    variants = ["recorded", "jittered"] if args.jitter else ["recorded"]
    strategies = [AS_SENT, AUTO_CACHING, TELOS] if args.engine == "anthropic" else [AS_SENT, TELOS]
    comparison = compare(
        f"{args.file}: {len(sessions)} session(s){hashed}",
        sessions,
        engine=args.engine,
        variants=variants,
        strategies=strategies,
        show_progress=args.progress,
    )
    _emit(comparison, args, per_turn=args.per_turn)
    return 0


def _hashed_note(path: str) -> str:
    """What the title says of a ``hash_content=True`` recording; an old fixed-length one is refused."""
    try:
        hashing = content_hashing(path) if Path(path).is_file() else None
    except (OSError, EOFError, ValueError):
        return ""  # _load_user_file says what is wrong with the file
    if hashing == "fixed":
        raise SystemExit(
            f"telos-wrap: {path} was recorded with hash_content=True by an earlier telos_wrap: every text "
            "is a 71-character sha256 digest, so the prompt sizes, and every figure a replay would give, "
            "are not the original's. Record again with this version (its digests keep each line's length)."
        )
    if hashing == "sized":
        return (
            " — texts hashed (digests of the same length, line by line: prompt sizes are the recording's; "
            "telos cannot recognise a clock or environment line inside a digest, so what moving them would "
            "save is not counted)"
        )
    return ""


def _note(args: argparse.Namespace, text: str) -> None:
    """A line on stderr where the progress line would show (never in --json output)."""
    if args.progress or (args.progress is None and sys.stderr.isatty()):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


# -- run: zero-code adoption --------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    options = _run_options(args)
    store = _run_store(args.store)
    env = environment(options, store=store)
    if args.print_env:
        for name in ("PYTHONPATH", PATCH_VARIABLE, OPTIONS_VARIABLE, STORE_VARIABLE):
            if name in env:
                sys.stdout.write(f"{name}={shlex.quote(env[name])}\n")
        return 0
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise SystemExit("telos-wrap run: no command given; e.g. telos-wrap run -- python app.py")
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise SystemExit(f"telos-wrap run: cannot start {command[0]!r}: {exc.strerror or exc}") from None
    return 127  # pragma: no cover - execvpe does not return


def _run_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.options:
        try:
            options = options_from_environment({OPTIONS_VARIABLE: args.options})
        except TelosOptionError as exc:
            raise SystemExit(f"telos-wrap run: --options: {exc}") from None
    engines = dict(options.get("engines") or {})
    for item in args.engine:
        url, sep, name = item.rpartition("=")
        if not sep or not url:
            raise SystemExit(
                f"telos-wrap run: --engine {item!r}: expected URL=ENGINE, e.g. http://gpu-box:8000/v1=vllm"
            )
        engines[url] = name
    if engines:
        options["engines"] = engines
    if args.strict:
        options["strict"] = True
    try:
        updated(PatchConfig(), options)
    except TelosOptionError as exc:
        raise SystemExit(f"telos-wrap run: {exc}") from None
    return options


def _run_store(url: str | None) -> str | None:
    """``--store`` (or ``TELOS_STORE_URL`` already in the environment), checked before the command
    starts; a bad URL stops here, saying what a good one looks like."""
    from telos_wrap.sessions.stores.from_url import store_from_url

    given = url if url is not None else os.environ.get(STORE_VARIABLE, "").strip() or None
    if given is None:
        return None
    try:
        store_from_url(given)
    except TelosOptionError as exc:
        where = "--store" if url is not None else STORE_VARIABLE
        raise SystemExit(f"telos-wrap run: {where}: {exc}") from None
    return given


# -- emulator ---------------------------------------------------------------------------------------


def _replier(args: argparse.Namespace) -> tuple[Replier | None, str]:
    """The scripted model of ``--tool-call`` / ``--replies``, and a line saying what it does."""
    if args.tool_call:
        try:
            calls = [tool_call_from_spec(spec) for spec in args.tool_call]
        except ValueError as exc:
            raise SystemExit(f"telos-wrap emulator: --tool-call {exc}") from None
        names = ", ".join(call.name for call in calls)
        return tool_loop(calls, args.final_text), (
            f"  scripted: each user question gets tool calls {names}, one per request, then "
            f"{args.final_text!r} (Anthropic Messages and Chat Completions)"
        )
    if args.replies:
        try:
            replies = replies_from_json(json.loads(Path(args.replies).read_text(encoding="utf-8")))
        except OSError as exc:
            raise SystemExit(
                f"telos-wrap emulator: --replies {args.replies}: {exc.strerror or exc}"
            ) from None
        except ValueError as exc:
            raise SystemExit(f"telos-wrap emulator: --replies {args.replies}: {exc}") from None
        return script(replies), (
            f"  scripted: each user question gets the {len(replies)} replies of {args.replies} in turn, "
            "then the fixed text (Anthropic Messages and Chat Completions)"
        )
    return None, ""


def _serve(args: argparse.Namespace) -> int:
    replier, scripted = _replier(args)
    emulator = Emulator(mode=args.mode, replier=replier)
    try:
        server = serve(emulator, flavour=args.flavour, port=args.port)
        url = server.__enter__()
    except OSError as exc:
        raise SystemExit(f"telos-wrap emulator: cannot listen on 127.0.0.1:{args.port}: {exc}") from None
    try:
        out = sys.stdout
        out.write(f"telos-wrap emulator serving on {url} (Ctrl-C to stop); any API key works\n")
        for name in ("anthropic", *CHAT_FLAVOURS):
            out.write(f"  {name:<10} base_url={flavour_base_url(url, name)}\n")
        if scripted:
            out.write(scripted + "\n")
        out.write(
            "  telos in another process does not know this is the emulator: name the engine, e.g. "
            f"telos-wrap run --engine {url}/openai/v1=openai -- ... (or patch(engines={{...}}))\n"
        )
        out.flush()
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.__exit__(None, None, None)
    return 0


# -- check ------------------------------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    vendor = args.vendor
    model = args.model or DEFAULT_MODELS[vendor]
    out = sys.stdout
    if not args.json:
        print_header(out, vendor, model, args.base_url or f"the {vendor} API")
    try:
        checked = run_check(
            vendor,
            model=model,
            base_url=args.base_url,
            api_key=args.api_key,
            turns=args.turns,
            on_request=None if args.json else (lambda item: print_row(out, item)),
        )
    except Exception as exc:  # the vendor's own error (a bad key, an unknown model): said plainly
        raise SystemExit(f"telos-wrap check: {type(exc).__name__}: {exc}") from None
    if args.json:
        ok = all(item.agrees for item in checked)
        out.write(
            json.dumps(
                {"vendor": vendor, "model": model, "requests": [as_dict(c) for c in checked], "agrees": ok},
                indent=1,
            )
            + "\n"
        )
        return 0 if ok else 1
    return 0 if print_verdict(out, checked) else 1


def _as_responses(engine: str, sessions: list[list[TraceRequest]]) -> list[list[TraceRequest]]:
    if engine not in ("openai", "vllm", "sglang"):
        raise SystemExit(
            f"telos-wrap: --api responses needs --engine openai, vllm or sglang (not {engine}): "
            "those serve the Responses API"
        )
    converted = responses_sessions(sessions)
    if not converted:  # never "Totals over 0 requests"
        apis = sorted({r.api for s in sessions for r in s})
        raise SystemExit(
            f"telos-wrap: --api responses replays Chat Completions and Responses requests; the file has "
            f"{', '.join(apis)} requests only"
        )
    return converted


def _check_plot_target(path: str) -> None:
    if not path.lower().endswith((".png", ".svg", ".pdf")):
        raise SystemExit(f"telos-wrap: --plot {path}: expected a .png (or .svg / .pdf) file name")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("telos-wrap: --plot needs matplotlib: pip install 'telos-wrap[plot]'") from None


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
