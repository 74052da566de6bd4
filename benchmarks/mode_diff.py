"""Why do the emulator's two render modes disagree? Show where a request stops matching its predecessor.

    python benchmarks/mode_diff.py --source mini-swe-agent --vendor openai --style tagged-envelope
        [--strategy telos_wrap|as sent|auto-caching] [--sessions N] [--max-turns N] [--limit N]

Replays the sessions (as ``benchmarks/cache_efficiency.py`` does) and, for every request after the
first of a session, renders the body that went out and the previous request's body in both modes
(docs/emulator.md, "Render modes") and finds the first position where each mode's chained prefix
hash differs. Where the byte-exact prefix ends earlier than the rendered one, it prints that
position and the two blocks' JSON as sent (and the message envelopes): the bytes a cache keyed on
the request would see change, although the rendered prompt does not.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cache_efficiency import CLEAN, DEFAULT_TRACES, sessions_of, styled

from telos_wrap.emulator import Emulator, ManualClock
from telos_wrap.emulator.render import Position, RenderedPrompt, envelope, render_anthropic, render_chat
from telos_wrap.replay.runner import AS_SENT, AUTO_CACHING, TELOS, patched, replay


def _render(api: str, body: Mapping[str, Any], mode: str) -> RenderedPrompt:
    if api == "anthropic":
        return render_anthropic(body, mode="byte-exact" if mode == "byte-exact" else "rendered")
    return render_chat(body, mode="byte-exact" if mode == "byte-exact" else "rendered")


def shared_positions(before: RenderedPrompt, after: RenderedPrompt) -> int:
    """How many leading positions of ``after`` have the same chained hash as in ``before``."""
    count = 0
    for a, b in zip(before.positions, after.positions, strict=False):
        if a.hash != b.hash:
            break
        count += 1
    return count


def _short(value: Any, width: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _message(body: Mapping[str, Any], pos: Position) -> Any:
    if pos.message_index < 0:
        return None
    messages = body.get("messages") or []
    return envelope(messages[pos.message_index]) if pos.message_index < len(messages) else None


def explain(api: str, bodies: Sequence[Mapping[str, Any]], limit: int) -> int:
    """Print where byte-exact stops earlier than rendered; returns how many requests did."""
    found = 0
    for n in range(1, len(bodies)):
        before, after = bodies[n - 1], bodies[n]
        rendered = shared_positions(_render(api, before, "rendered"), _render(api, after, "rendered"))
        exact_before, exact_after = _render(api, before, "byte-exact"), _render(api, after, "byte-exact")
        exact = shared_positions(exact_before, exact_after)
        if exact >= rendered:
            continue
        found += 1
        if found > limit:
            continue
        old, new = exact_before.positions[exact], exact_after.positions[exact]
        print(
            f"  request {n}: byte-exact prefix ends at position {exact} ({new.path}), "
            f"rendered goes on to {rendered}"
        )
        print(f"    before: {_short(old.block)}   envelope {_short(_message(before, old))}")
        print(f"    after:  {_short(new.block)}   envelope {_short(_message(after, new))}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--traces", type=Path, default=DEFAULT_TRACES)
    add("--source", required=True, help="trace file stem, e.g. mini-swe-agent")
    add("--vendor", choices=("anthropic", "openai"), required=True)
    add("--style", default=CLEAN)
    add("--strategy", default=TELOS.name, choices=(TELOS.name, AS_SENT.name, AUTO_CACHING.name))
    add("--sessions", type=int, default=2)
    add("--max-turns", type=int)
    add("--limit", type=int, default=5, help="requests to print per session")
    args = parser.parse_args(argv)
    strategy = {s.name: s for s in (TELOS, AS_SENT, AUTO_CACHING)}[args.strategy]
    sessions, _ = sessions_of(
        args.traces / f"{args.source}.jsonl.xz", args.vendor, args.sessions, args.max_turns
    )
    with patched():
        for session in sessions:
            requests, _ = styled(session, args.style)
            emu = Emulator(clock=ManualClock())
            replay([requests], strategy, engine=args.vendor, emulator=emu)
            bodies = [r.body for r in emu.requests]
            print(f"session {session[0].session} ({len(bodies)} requests):")
            found = explain(args.vendor, bodies, args.limit)
            print(f"  {found} requests where byte-exact matched less of the previous request than rendered")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
