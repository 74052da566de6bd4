"""Promise E1 (docs/security.md): what telos learns holds no caller text, and a session can be erased.

A workload of two assistants (one with a live configuration block, one stable), per-user system
prompts naming customers and their e-mail addresses, user and assistant messages, sent through the
real SDKs (Anthropic Messages, Chat Completions, Responses) over real HTTP to the emulator, with
fleet learning on, on an in-process store and on real Redis. Every word of every system prompt and
message is a canary: none may be found in the store (session and fleet keys, key names included),
in any log record at any level, or in ``explain()`` of a Session of another process reading the same
store. ``Session.erase()`` then leaves nothing of the session in the store, and nothing it taught
the fleet.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest

import telos_wrap
from telos_wrap.sessions import MemoryStore, RedisStore, Session
from telos_wrap.sessions.learning import fleet as fleet_module
from tests.over_http import emulator_over_http
from tests.stores import reader_of

MODEL = "claude-opus-4-8"
_LETTERS = "ghjkmnpqrstvwxyz"  # no hex digit: a canary word can never be read inside a digest


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_LETTERS) for _ in range(7)).capitalize()


def _words(rng: random.Random, count: int) -> str:
    return " ".join(_word(rng) for _ in range(count))


class Workload:
    """The texts a workload sends, built from canary words (and names, e-mail addresses, values)."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.policy = "\n".join(f"{_words(rng, 6)}." for _ in range(40))
        self.opening_b = [
            f"{_words(rng, 5)}.",
            f"{_words(rng, 3)}: Basic 9.99 EUR, Pro 29.99 EUR.",
            _words(rng, 4),
        ]
        self.config_head = _words(rng, 2) + ":"
        self.config_key = _word(rng).lower()
        self.customers = [
            ("Anastasia Lopezwyn", "anastasia.lopezwyn@example.com"),
            ("Faridzh Haddadqx", "faridzh.haddadqx@example.com"),
            ("Chloexq Okaforzt", "chloexq.okaforzt@example.com"),
        ]
        self.questions = [_words(rng, 8) + "?" for _ in range(12)]
        self.answers = [_words(rng, 6) + "." for _ in range(12)]

    def system_a(self, user: int, turn: int) -> str:
        name, mail = self.customers[user]
        config = json.dumps({self.config_key: f"2026-11-23T10:0{turn}:01", "region": "eu"}, indent=2)
        return f"{self.config_head}\n{config}\nCustomer: {name} <{mail}>\n{self.policy}"

    def system_b(self, user: int) -> str:
        name, mail = self.customers[user]
        opening = "\n".join(self.opening_b)
        return f"{opening}\nCustomer: {name} <{mail}>\n{self.policy}"

    def messages(self, user: int, turn: int) -> list[dict[str, Any]]:
        name, _ = self.customers[user]
        out: list[dict[str, Any]] = []
        for t in range(turn + 1):
            out.append({"role": "user", "content": f"{name} asks: {self.questions[(user + t) % 12]}"})
            if t < turn:
                out.append({"role": "assistant", "content": self.answers[(user + t) % 12]})
        return out

    def canaries(self) -> set[str]:
        texts = [self.system_a(u, t) for u in range(3) for t in range(4)]
        texts += [self.system_b(u) for u in range(3)]
        texts += self.questions + self.answers
        found = {word.strip('.,:;?<>"{}') for text in texts for word in text.split()}
        found = {w for w in found if len(w) >= 5 and not re.fullmatch(r"[\d.:TZ\-]+|EUR|Basic|Customer", w)}
        for name, mail in self.customers:
            found |= {name, mail, *name.split(), mail.split("@")[0]}
        return found


def _send(clients: dict[str, Any], api: str, system: str, messages: list[dict[str, Any]]) -> None:
    if api == "anthropic":
        clients[api].messages.create(model=MODEL, max_tokens=8, system=system, messages=messages)
    elif api == "chat":
        clients[api].chat.completions.create(
            model="gpt-5", messages=[{"role": "system", "content": system}, *messages]
        )
    else:
        clients[api].responses.create(model="gpt-5", instructions=system, input=messages)


def _run(store: Any, work: Workload) -> list[Session]:
    """Three conversations of assistant A (live configuration), three of B, one session id shared
    by two customers (a misuse), on each API."""
    sessions = []
    with emulator_over_http() as wire:
        openai = wire.openai()
        clients: dict[str, Any] = {"anthropic": wire.anthropic(), "chat": openai, "responses": openai}
        for api in ("anthropic", "chat", "responses"):
            for user in range(3):
                with telos_wrap.session(f"a-{api}-{user}", store=store) as sess:
                    for turn in range(3):
                        _send(clients, api, work.system_a(user, turn), work.messages(user, turn))
                sessions.append(sess)
                with telos_wrap.session(f"b-{api}-{user}", store=store) as sess:
                    for turn in range(3):
                        _send(clients, api, work.system_b(user), work.messages(user, turn))
                sessions.append(sess)
            with telos_wrap.session(f"shared-{api}", store=store) as sess:
                for turn in range(4):
                    user = turn % 2
                    _send(clients, api, work.system_b(user), work.messages(user, turn // 2))
            sessions.append(sess)
        clients["anthropic"].close()
        openai.close()
    return sessions


def _memory_texts(store: MemoryStore) -> dict[str, str]:
    out = {}
    for key, entry in store._entries.items():
        state = entry.text if entry.text is not None else (entry.state.dumps() if entry.state else "")
        out[key] = state + "".join(f"{name}={blob}" for name, blob in entry.blobs.items())
    return out


def _redis_texts(store: RedisStore, prefix: str) -> dict[str, str]:
    out = {}
    for raw in store.redis.scan_iter(match=f"{prefix}*", count=1000):
        key = raw.decode()
        kind = store.redis.type(key).decode()
        if kind == "hash":
            values = store.redis.hgetall(key)
            text = "".join(k.decode() + "=" + v.decode("utf-8", "replace") for k, v in values.items())
        else:
            text = (store.redis.get(key) or b"").decode("utf-8", "replace")
        out[key] = text
    return out


def _assert_no_canary(where: str, text: str, canaries: set[str]) -> None:
    found = sorted(c for c in canaries if c in text)
    assert not found, f"{where} holds caller text: {found[:5]}"


@pytest.fixture
def work() -> Iterator[Workload]:
    yield Workload(42)


def _check(store: Any, texts: dict[str, str], sessions: list[Session], work: Workload, caplog: Any) -> None:
    canaries = work.canaries()
    assert len(canaries) > 200
    assert any(key.count("telos-fleet") for key in texts)  # the fleet was used
    for key, text in texts.items():
        _assert_no_canary(f"store key {key}", key + text, canaries)
    # telos' own records (the SDKs log their request options at DEBUG: theirs to keep).
    ours = [r for r in caplog.records if r.name.startswith("telos_wrap")]
    assert any(r.levelno == logging.DEBUG for r in ours)  # DEBUG was on and telos logged at it
    logs = "\n".join(r.getMessage() + (r.exc_text or "") for r in ours)
    _assert_no_canary("the logs", logs, canaries)
    for sess in sessions:
        other = reader_of(sess)  # another process (the session's tenant): only what the store holds
        assert other.stats.requests == sess.stats.requests > 0  # it did read the stored state
        explained = "\n".join(other.explain(n) for n in range(sess.stats.requests))
        explained += repr(other.volatile_spans) + json.dumps(other.state.to_json())
        _assert_no_canary(f"explain of {sess.id} in another process", explained, canaries)


def test_no_caller_text_in_memory_store_logs_or_explain(patched: None, caplog: Any, work: Workload) -> None:
    caplog.set_level(logging.DEBUG)
    store = MemoryStore()
    sessions = _run(store, work)
    assert any(sess.volatile_spans for sess in sessions)  # something was learned
    _check(store, _memory_texts(store), sessions, work, caplog)
    # Erasure: nothing of a session remains, nor anything it taught the fleet.
    before = _memory_texts(store)
    fleet_before = {k: v for k, v in before.items() if k.startswith(fleet_module.FLEET_PREFIX)}
    assert any(fleet_module.decode_entry(v.split("=", 1)[1]).facts for v in fleet_before.values())
    for sess in sessions:
        sess.erase()
        assert sess.store_key not in store._entries and sess.id not in store._entries
        assert sess.id not in "".join(_memory_texts(store))
    for key, text in _memory_texts(store).items():
        assert key.startswith(fleet_module.FLEET_PREFIX), key  # no session's key is left
        entry = fleet_module.decode_entry(text.split("=", 1)[1])
        assert entry.facts == () and entry.prints == (), key  # all contributors erased


@pytest.mark.redis
def test_no_caller_text_in_redis_and_erasure_there(
    patched: None, caplog: Any, work: Workload, redis_url: str, redis_prefix: str
) -> None:
    caplog.set_level(logging.DEBUG)
    store = RedisStore(redis_url, prefix=redis_prefix, ttl=600)
    try:
        sessions = _run(store, work)
        _check(store, _redis_texts(store, redis_prefix), sessions, work, caplog)
        erased, kept = sessions[::2], sessions[1::2]
        for sess in erased:
            sess.erase()
        left = _redis_texts(store, redis_prefix)
        for sess in erased:
            assert not any(k in left for key in (sess.id, sess.store_key) for k in store.keys_of(key))
        for sess in kept:
            assert any(k in left for k in store.keys_of(sess.store_key))  # its tenant's key (T2)
        for sess in kept:
            sess.erase()
        left = _redis_texts(store, redis_prefix)
        assert all(fleet_module.FLEET_PREFIX in key for key in left), sorted(left)
        for text in left.values():
            entry = fleet_module.decode_entry(text.split("=", 1)[1])
            assert entry.facts == () and entry.prints == ()
    finally:
        store.close()
