"""One worker process of the two-process Redis tests: runs every other turn of a shared session.

Usage: python _worker.py REDIS_URL PREFIX SESSION_ID PARITY TURNS OUT_PATH [MODE [CONTROL_URL]]

MODE is ``sync`` (``anthropic.Anthropic``, the store's sync client; default) or ``async``
(``anthropic.AsyncAnthropic``, the store's ``redis.asyncio`` client). Turns are handed over through
Redis lists on CONTROL_URL (default: REDIS_URL): the worker waits on ``PREFIX go:PARITY`` for its
turn number, runs the turn, records the exact request bytes, and pushes the next turn number to the
other worker's list — or, with a CONTROL_URL, to ``PREFIX done`` for the test to hand on (so it can
restart the session's Redis between two turns).
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.sdk_http

import anthropic
from convo import RecordingTransport, run_shared_turn, run_shared_turn_async  # type: ignore[import-not-found]

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.sessions import RedisStore
from telos_wrap.sessions.stores import redis_urls
from tests.sdk_http import AsyncEmulatorTransport, sdk_http


class _AsyncRecording(AsyncEmulatorTransport):
    def __init__(self, emulator: Emulator) -> None:
        super().__init__(emulator)
        self.bodies: list[bytes] = []

    async def handle_async_request(self, request: sdk_http.Request) -> sdk_http.Response:
        self.bodies.append(request.read())
        return await super().handle_async_request(request)


def main(
    url: str, prefix: str, session_id: str, parity: int, turns: int, out: str, mode: str, control_url: str
) -> None:
    telos_wrap.patch(strict=True)
    store = RedisStore(url, prefix=prefix)
    sess = telos_wrap.session(session_id, store=store)
    control = redis_urls.sync_client(redis_urls.parse(control_url), {})  # a server or a cluster
    relay = control_url != url
    sent: list[dict[str, object]] = []

    def wait_turn(turn: int) -> None:
        popped = control.blpop([f"{prefix}go:{parity}"], timeout=60)
        if popped is None or int(popped[1]) != turn:
            raise SystemExit(f"worker {parity}: expected turn {turn}, got {popped!r}")

    def hand_on(turn: int) -> None:
        control.rpush(f"{prefix}done" if relay else f"{prefix}go:{1 - parity}", turn + 1)

    if mode == "sync":
        transport = RecordingTransport(Emulator())
        client = anthropic.Anthropic(
            api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
        )
        for turn in range(parity, turns, 2):
            wait_turn(turn)
            before = len(transport.bodies)
            run_shared_turn(client, sess, turn)
            sent.extend(
                {"turn": turn, "body": base64.b64encode(b).decode()} for b in transport.bodies[before:]
            )
            hand_on(turn)
    else:

        async def run() -> None:
            transport = _AsyncRecording(Emulator())
            client = anthropic.AsyncAnthropic(
                api_key="test", http_client=sdk_http.AsyncClient(transport=transport), max_retries=0
            )
            for turn in range(parity, turns, 2):
                await asyncio.to_thread(wait_turn, turn)
                before = len(transport.bodies)
                await run_shared_turn_async(client, sess, turn)
                sent.extend(
                    {"turn": turn, "body": base64.b64encode(b).decode()} for b in transport.bodies[before:]
                )
                await sess.aflush()  # the other worker reads this turn's usage from the store
                hand_on(turn)
            await store.aclose()

        asyncio.run(run())
    sess.flush()
    Path(out).write_text(json.dumps(sent))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0],
        args[1],
        args[2],
        int(args[3]),
        int(args[4]),
        args[5],
        args[6] if len(args) > 6 else "sync",
        args[7] if len(args) > 7 else args[0],
    )
