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
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from telos_wrap.replay.comparison import Comparison, check_engine, compare, run_demo
from telos_wrap.replay.report import plot_comparison, print_comparison
from telos_wrap.replay.responses import responses_sessions
from telos_wrap.replay.runner import AS_SENT, AUTO_CACHING, ENGINES, TELOS, load_sessions
from telos_wrap.traces import TraceRequest

# -- command line -----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="telos-wrap",
        description="See what telos_wrap saves, offline: real SDK + patch() + the built-in engine emulator.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{demo,replay}")
    demo = commands.add_parser("demo", help="replay the bundled real agent session (Anthropic)")
    demo.add_argument("--plot", metavar="FILE.png", help="draw cumulative hit ratio and cost per turn")
    demo.add_argument("--json", action="store_true", help="print the results as JSON")
    demo.add_argument("--no-jitter", action="store_true", help="skip the harness-jittered replay")
    rep = commands.add_parser("replay", help="replay a recording (telos_wrap.record) or a trace file")
    rep.add_argument("file", metavar="FILE.jsonl[.xz]")
    rep.add_argument(
        "--engine", choices=list(ENGINES), default="anthropic", help="emulated engine (default: anthropic)"
    )
    rep.add_argument(
        "--api",
        choices=["native", "responses"],
        default="native",
        help="native: each request as recorded; responses: chat requests converted to OpenAI "
        "Responses requests (instructions + input items), for --engine openai|vllm|sglang",
    )
    rep.add_argument("--json", action="store_true", help="print the results as JSON")
    rep.add_argument(
        "--jitter", action="store_true", help="also replay it the way a careless harness sends it"
    )
    rep.add_argument("--limit", type=_positive, metavar="N", help="replay only the first N requests")
    rep.add_argument("--plot", metavar="FILE.png", help="draw cumulative hit ratio and cost per turn")
    rep.add_argument("--per-turn", action="store_true", help="per-turn tables even for several sessions")
    return parser


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
    if args.plot:
        _check_plot_target(args.plot)
    if args.command == "demo":
        comparison = run_demo(jittered=not args.no_jitter)
        _emit(comparison, args, per_turn=True)
        return 0
    sessions = check_engine(args.engine, _load_user_file(args.file, args.limit))
    if args.api == "responses":
        sessions = _as_responses(args.engine, sessions)
    variants = ["recorded", "jittered"] if args.jitter else ["recorded"]
    strategies = [AS_SENT, AUTO_CACHING, TELOS] if args.engine == "anthropic" else [AS_SENT, TELOS]
    comparison = compare(
        f"{args.file}: {len(sessions)} session(s)",
        sessions,
        engine=args.engine,
        variants=variants,
        strategies=strategies,
    )
    _emit(comparison, args, per_turn=args.per_turn or len(sessions) == 1)
    return 0


def _as_responses(engine: str, sessions: list[list[TraceRequest]]) -> list[list[TraceRequest]]:
    if engine not in ("openai", "vllm", "sglang"):
        raise SystemExit(
            f"telos-wrap: --api responses needs --engine openai, vllm or sglang (not {engine}): "
            "those serve the Responses API"
        )
    return responses_sessions(sessions)


def _check_plot_target(path: str) -> None:
    if not path.lower().endswith((".png", ".svg", ".pdf")):
        raise SystemExit(f"telos-wrap: --plot {path}: expected a .png (or .svg / .pdf) file name")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("telos-wrap: --plot needs matplotlib: pip install 'telos-wrap[plot]'") from None


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
