"""Worker for the cross-process determinism property: prints a digest of what telos emits per request.

``python _determinism_worker.py CORPUS.json`` reads ``[[api, body], ...]`` and prints a JSON list with,
per request, the SHA-256 of the emitted body serialized the way the SDKs serialize it (insertion
order kept, so key order counts), both stateless (``pipeline.prepare``) and as the first turn of a
session (``SessionRuntime.prepare_request``), and of the session state it stores (prints and hashes).
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

from telos_wrap.pipeline import PrepareOptions, prepare
from telos_wrap.sessions import MemoryStore, Session
from telos_wrap.sessions.core import runtime_of

_API = {"anthropic": ("anthropic", "anthropic"), "openai": ("openai_chat", "openai")}


def _digest(body: Any) -> str:
    return hashlib.sha256(json.dumps(body, ensure_ascii=False).encode("utf-8")).hexdigest()


def digest_all(items: list[Any]) -> list[list[str]]:
    out = []
    for api_name, body in items:
        api, engine = _API[api_name]
        options = PrepareOptions(engine=engine, session_id="determinism")
        stateless = prepare(api, body, options).body
        session = Session("determinism", store=MemoryStore(), clock=lambda: 1_000.0)
        _, prepared = runtime_of(session).prepare_request(api, body, options)
        stored = session.store.load("determinism")
        assert stored is not None
        out.append(
            [_digest(stateless), _digest(prepared.body), hashlib.sha256(stored.text.encode()).hexdigest()]
        )
    return out


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        corpus = json.load(handle)
    print(json.dumps(digest_all(corpus)))
