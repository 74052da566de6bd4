"""A minimal ASGI application of the documented per-request pattern, served by real uvicorn workers
(tests/sessions/test_workers.py, benchmarks/soak_per_request.py).

Every ``POST /chat`` with ``{"conv": ID, "turn": N}`` is one turn of conversation ``ID``:
``async with telos_wrap.session(ID, store=STORE)`` around one ``AsyncAnthropic`` call (patched,
fail-open) against the emulator served at ``TELOS_APP_EMULATOR``, exactly as README's per-request
pattern shows; the answer is the call's usage and the worker's pid. ``GET /memory`` gives the worker's
resident bytes (after a full collection) and the ``Session`` objects alive.

Environment: ``TELOS_APP_REDIS`` (the store's URL), ``TELOS_APP_PREFIX`` (its key prefix),
``TELOS_APP_EMULATOR`` (the emulator's base URL), ``TELOS_APP_TIMEOUT`` (the store's timeout, s).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anthropic
from convo import MODEL, messages_for, system_prompt  # type: ignore[import-not-found]

import telos_wrap
from telos_wrap.sessions import RedisStore, Session

if os.environ.get("TELOS_APP_LOG"):  # a drill's own diagnosis: the sessions' events, per worker
    import logging

    logging.basicConfig(format=f"{os.getpid()} %(message)s", level=logging.WARNING)
    logging.getLogger("telos_wrap.sessions").setLevel(os.environ["TELOS_APP_LOG"])

telos_wrap.patch()  # production mode: fail open

STORE = RedisStore(
    os.environ["TELOS_APP_REDIS"],
    prefix=os.environ.get("TELOS_APP_PREFIX", "telos:"),
    timeout=float(os.environ.get("TELOS_APP_TIMEOUT", "1.0")),
)
_client: list[anthropic.AsyncAnthropic] = []


def _anthropic() -> anthropic.AsyncAnthropic:
    if not _client:
        _client.append(
            anthropic.AsyncAnthropic(
                api_key="app-key", base_url=os.environ["TELOS_APP_EMULATOR"], max_retries=0
            )
        )
    return _client[0]


async def _turn(conv: str, turn: int) -> dict[str, Any]:
    async with telos_wrap.session(conv, store=STORE):
        reply = await _anthropic().messages.create(
            model=MODEL, max_tokens=16, system=system_prompt(turn), messages=messages_for(turn)
        )
    usage = reply.usage
    return {
        "pid": os.getpid(),
        "read": usage.cache_read_input_tokens or 0,
        "write": usage.cache_creation_input_tokens or 0,
        "raw": usage.input_tokens,
    }


def _memory() -> dict[str, Any]:
    gc.collect()
    with open("/proc/self/statm") as statm:
        resident = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    alive = sum(1 for obj in gc.get_objects() if type(obj) is Session)
    return {"pid": os.getpid(), "rss": resident, "sessions": alive}


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    body = await _read_body(receive)
    if scope["path"] == "/memory":
        answer = _memory()
    else:
        request = json.loads(body)
        answer = await _turn(str(request["conv"]), int(request["turn"]))
    payload = json.dumps(answer).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": payload})
