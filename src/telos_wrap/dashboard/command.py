"""``telos-wrap dashboard``: the command line around ``telos_wrap.dashboard``.

``telos-wrap dashboard RECORDING`` replays a recording or trace (natively and through telos) and
serves the page on 127.0.0.1 until interrupted; ``--store URL`` reads a Redis store instead;
``--export FILE.html`` writes the page to a file and exits.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from telos_wrap.dashboard.model import Dashboard
from telos_wrap.dashboard.page import DashboardUnavailable, render
from telos_wrap.dashboard.serve import make_server

ENGINE_CHOICES = ("anthropic", "openai", "deepseek", "vllm", "sglang", "openrouter")


def add_parser(commands: Any) -> None:
    """Add the ``dashboard`` verb to the ``telos-wrap`` parser's sub-commands."""
    parser = commands.add_parser(
        "dashboard",
        help="a local page per conversation: cache reads and writes, breaks, what telos saved",
        description="Show where each conversation's cache broke and what telos saved, as a page served "
        "on 127.0.0.1 (offline: the plots' library is in the page). From a recording or trace file, "
        "replayed through the real SDKs to the built-in emulator as sent (the vendor's own caching) and "
        "through telos_wrap; or from a Redis session store (--store), which holds counters and "
        "positions only. Needs pip install 'telos-wrap[dashboard]'.",
    )
    parser.add_argument("file", nargs="?", metavar="RECORDING", help="a telos_wrap.record file or trace")
    parser.add_argument("--store", metavar="URL", help="read a Redis session store instead (redis://...)")
    parser.add_argument("--prefix", default="telos:", help="the store's key prefix (default: telos:)")
    parser.add_argument("--engine", choices=ENGINE_CHOICES, default="anthropic", help="engine to replay on")
    parser.add_argument("--limit", type=int, metavar="N", help="replay only the first N requests")
    parser.add_argument(
        "--show-text",
        action="store_true",
        help="show each cache break's sentence, which may quote the recording (never from a store)",
    )
    parser.add_argument("--export", metavar="FILE.html", help="write the page to FILE.html and exit")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to serve on (default: a free one)")


def _board(args: argparse.Namespace) -> Dashboard:
    if bool(args.file) == bool(args.store):
        raise SystemExit("telos-wrap dashboard: give a RECORDING file or --store URL (one of the two)")
    if args.store:
        from telos_wrap.dashboard.from_store import from_store_url

        try:
            return from_store_url(args.store, prefix=args.prefix)
        except Exception as exc:  # any client error becomes one line for the user
            raise SystemExit(
                f"telos-wrap dashboard: cannot read the store: {type(exc).__name__}: {exc}"
            ) from None
    from telos_wrap.dashboard.from_replay import from_replay
    from telos_wrap.replay.comparison import check_engine
    from telos_wrap.replay.runner import load_sessions

    path = Path(args.file)
    if not path.is_file():
        raise SystemExit(f"telos-wrap dashboard: {args.file}: no such file")
    try:
        sessions = load_sessions(path, limit=args.limit)
    except (ValueError, OSError, EOFError) as exc:
        raise SystemExit(f"telos-wrap dashboard: cannot read {args.file}: {exc}") from None
    if not sessions:
        raise SystemExit(f"telos-wrap dashboard: {args.file} has no requests")
    sessions = check_engine(args.engine, sessions)
    title = f"{path.name}: {len(sessions)} conversation(s)"
    return from_replay(title, sessions, engine=args.engine, show_text=args.show_text)


def run(args: argparse.Namespace) -> int:
    """Build the page, then export it or serve it until interrupted."""
    try:
        page = render(_board(args), show_text=args.show_text)
    except DashboardUnavailable as exc:
        raise SystemExit(f"telos-wrap dashboard: {exc}") from None
    if args.export:
        Path(args.export).write_text(page, encoding="utf-8")
        print(f"dashboard written to {args.export}")
        return 0
    server = make_server(page, args.host, args.port)
    host, port = server.server_address[:2]
    print(f"dashboard at http://{host!s}:{port}/ (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
