"""One worker process of the two-process Redis test: runs every other turn of a shared session.

Usage: python _worker.py REDIS_URL PREFIX SESSION_ID PARITY TURNS OUT_PATH

Turns alternate through two Redis lists (``PREFIX go:0`` / ``PREFIX go:1``): the worker waits for its
turn number, runs the turn, records the exact request bytes, and hands the next turn to the other.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.sdk_http

import anthropic
import redis
from convo import RecordingTransport, run_shared_turn  # type: ignore[import-not-found]

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.sessions.redis_store import RedisStore
from tests.sdk_http import sdk_http


def main(url: str, prefix: str, session_id: str, parity: int, turns: int, out: str) -> None:
    telos_wrap.patch(strict=True)
    transport = RecordingTransport(Emulator())
    client = anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )
    store = RedisStore(url, prefix=prefix)
    sess = telos_wrap.session(session_id, store=store)
    control = redis.Redis.from_url(url)
    sent: list[dict[str, object]] = []
    for turn in range(parity, turns, 2):
        popped = control.blpop([f"{prefix}go:{parity}"], timeout=60)
        if popped is None or int(popped[1]) != turn:
            raise SystemExit(f"worker {parity}: expected turn {turn}, got {popped!r}")
        before = len(transport.bodies)
        run_shared_turn(client, sess, turn)
        sent.extend(
            {"turn": turn, "body": base64.b64encode(body).decode()} for body in transport.bodies[before:]
        )
        control.rpush(f"{prefix}go:{1 - parity}", turn + 1)
    Path(out).write_text(json.dumps(sent))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
