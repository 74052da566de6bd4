"""Promise F2 (docs/security.md): fleet facts stay in their namespace and carry no content.

Conversations of one application template, each with secret canaries — a value in a system line
next to a line that changes every turn (so learning could anchor on it), and in every user and
assistant message — run over real HTTP to the emulator, on in-process stores and on real Redis
with several key prefixes and ``isolation`` hints. Checked: every fleet entry the store holds is
free of every canary and of the isolation key in clear; a conversation adopts facts only from its
own store, prefix and isolation key; what one tenant learned never moves anything in another's
prompt.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import telos_wrap
from telos_wrap.sessions import MemoryStore, RedisStore
from telos_wrap.sessions.learning import fleet as fleet_module
from tests.over_http import Wire
from tests.stores import fleet_blobs

MODEL = "claude-opus-4-8"
RULES = "".join(f"Rule {n}: answer precisely and politely, citing the billing policy.\n" for n in range(60))


def _canary(conv: int) -> str:
    return f"CANARY{7_731_000 + conv}"


def _system(conv: int, turn: int) -> str:
    return (
        "You are the billing assistant of Example Corp; answer billing questions only.\n"
        f"Account reference: {_canary(conv)}\n"
        f"{17 * turn + conv}s\n"  # too little text to match by itself: anchored on its neighbours
        f"Server clock: 2026-05-01 10:{turn:02d}:07\n{RULES}Be concise."
    )


def _messages(conv: int, turn: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for t in range(turn + 1):
        messages.append({"role": "user", "content": f"My card {_canary(conv)}-U{t} was charged twice. " * 4})
        if t < turn:
            messages.append({"role": "assistant", "content": f"Refund {_canary(conv)}-A{t} is on its way."})
    return messages


def _converse(
    wire: Wire, store: Any, conv: int, isolation: str | None = None, turns: int = 4, **client_args: Any
) -> Any:
    client = wire.anthropic(**client_args)
    hints = {"isolation": isolation} if isolation else None
    with telos_wrap.session(f"s-{conv}", store=store, hints=hints) as sess:
        for turn in range(turns):
            client.messages.create(
                model=MODEL, max_tokens=16, system=_system(conv, turn), messages=_messages(conv, turn)
            )
    client.close()
    return sess


def _assert_clean(entries: dict[str, str], convs: range, secrets: tuple[str, ...] = ()) -> None:
    assert entries
    for key, text in entries.items():
        for conv in convs:
            assert _canary(conv)[6:] not in key + text  # not even its digits
        for secret in secrets:
            assert secret not in key + text


def test_no_value_or_content_in_fleet_facts(wire: Wire) -> None:
    store = MemoryStore()
    first = _converse(wire, store, 1, "tenant-a")
    # It learned the anchored line for itself: its own state says where by keyed digests of the
    # lines' skeletons (values masked), as what it shares does: no value, no text.
    assert len(first.volatile_spans) == 2
    assert not any(_canary(1)[6:] in json.dumps(span.to_json()) for span in first.volatile_spans)
    _assert_clean(fleet_blobs(store), range(1, 2), ("tenant-a",))
    facts = fleet_module.decode(next(iter(fleet_blobs(store).values())))
    assert sorted(fact.kind for fact in facts) == ["value", "value"]
    second = _converse(wire, store, 2, "tenant-a")
    # Both lines are adopted, each placed and verified on conversation 2's own text.
    assert [span.origin for span in second.volatile_spans] == ["fleet", "fleet"]
    assert not any(_canary(2)[6:] in json.dumps(span.to_json()) for span in second.volatile_spans)
    assert second.stats.cache_breaks == 0
    _assert_clean(fleet_blobs(store), range(1, 3), ("tenant-a",))


def test_facts_never_cross_isolation_keys_or_stores(wire: Wire) -> None:
    store, other_store = MemoryStore(), MemoryStore()
    _converse(wire, store, 1, "tenant-a")
    for isolation, on in (("tenant-b", store), (None, store), ("tenant-a", other_store)):
        sess = _converse(wire, on, 2, isolation)
        assert all(span.origin == "" for span in sess.volatile_spans), (isolation, on is store)
        assert sess.stats.cache_breaks >= 1
    same = _converse(wire, store, 3, "tenant-a")
    assert any(span.origin == "fleet" for span in same.volatile_spans)


def test_facts_never_cross_api_keys_or_base_urls(wire: Wire) -> None:
    """Without an ``isolation`` hint the namespace is the caller's credentials and base URL (as for
    implicit sessions, T1): two tenants of one store, each with its own API key, never share."""
    store = MemoryStore()
    _converse(wire, store, 1, api_key="sk-tenant-a")
    for args in (
        {"api_key": "sk-tenant-b"},
        {"api_key": "sk-tenant-a", "base_url": "https://eu.example.com"},
    ):
        other = _converse(wire, store, 2, **args)
        assert all(span.origin == "" for span in other.volatile_spans), args
        assert other.stats.cache_breaks >= 1
    same = _converse(wire, store, 3, api_key="sk-tenant-a")
    assert any(span.origin == "fleet" for span in same.volatile_spans)
    assert same.stats.cache_breaks == 0
    _assert_clean(fleet_blobs(store), range(1, 4), ("sk-tenant-a", "sk-tenant-b", "eu.example.com"))


@pytest.mark.redis
def test_facts_never_cross_redis_prefixes(wire: Wire, redis_url: str, redis_prefix: str) -> None:
    mine = RedisStore(redis_url, prefix=redis_prefix + "a:")
    theirs = RedisStore(redis_url, prefix=redis_prefix + "b:")
    _converse(wire, mine, 1)
    stranger = _converse(wire, theirs, 2)
    assert all(span.origin == "" for span in stranger.volatile_spans)
    again = _converse(wire, mine, 3)
    assert any(span.origin == "fleet" for span in again.volatile_spans)
    raw = mine.redis
    entries = {
        key.decode(): "".join(v.decode() for v in raw.hgetall(key).values())
        for key in raw.scan_iter(match=f"{redis_prefix}*telos-fleet*", count=1000)
    }
    assert len(entries) == 2  # one per prefix (the stranger learned and published on its own)
    assert sum(key.startswith(redis_prefix + "a:") for key in entries) == 1
    _assert_clean(entries, range(1, 4))
    mine.close()
    theirs.close()


# -- per-user prompts (issue 34): one application whose prompts name their user ---------------------

NAMES = ("Ana Lopez", "Bruno Novak", "Chloe Okafor", "Dmitri Petrov", "Esi Quinn")


def _per_user_system(name: str, conv: int, turn: int) -> str:
    return (
        "You are the billing assistant of Example Corp; answer billing questions only.\n"
        f"You are helping {name}.\n"
        f"{17 * turn + conv}s\n"  # too little text to match by itself: anchored on its neighbours
        f"Server clock: 2026-05-01 10:{turn:02d}:07\n{RULES}Be concise."
    )


def _converse_as(wire: Wire, store: Any, conv: int, name: str, api_key: str, turns: int = 4) -> Any:
    client = wire.anthropic(api_key=api_key)
    with telos_wrap.session(f"u-{conv}", store=store) as sess:
        for turn in range(turns):
            client.messages.create(
                model=MODEL,
                max_tokens=16,
                system=_per_user_system(name, conv, turn),
                messages=_messages(conv, turn),
            )
    client.close()
    return sess


def test_per_user_prompts_share_facts_within_their_tenant_only(wire: Wire) -> None:
    store = MemoryStore()
    first = _converse_as(wire, store, 1, NAMES[0], "sk-tenant-a")
    assert first.stats.cache_breaks == 1 and all(span.origin == "" for span in first.volatile_spans)
    # Every later user's conversation starts with the clock fact (placed and verified on its own
    # prompt). The short value line's fact is anchored on the first user's name line, which the
    # second user's prompt does not have: not adopted (issue 42: a fact anchored one side only fits
    # none), learned at its first change, one break. Its own fact of that line, described like the
    # first one's on the prompt before any cut, merges with it (the name tokens become holes): from
    # the third user on, no break.
    for conv, name in ((2, NAMES[1]), (3, NAMES[2]), (4, NAMES[3])):
        later = _converse_as(wire, store, conv, name, "sk-tenant-a")
        assert later.stats.cache_breaks == (1 if conv == 2 else 0), name
        assert sorted(span.origin for span in later.volatile_spans)[-1] == "fleet"
        if conv > 2:
            assert {span.origin for span in later.volatile_spans} == {"fleet"}, name
    # Another tenant (its own API key) of the same store, same application text: nothing crosses.
    entries = fleet_blobs(store)
    assert len(entries) == 1
    stranger = _converse_as(wire, store, 5, NAMES[4], "sk-tenant-b")
    assert all(span.origin == "" for span in stranger.volatile_spans)
    assert stranger.stats.cache_breaks >= 1
    theirs = {k: v for k, v in fleet_blobs(store).items() if k not in entries}
    assert len(theirs) == 1  # its own namespace, written by its own conversation
    for name in NAMES[:4]:  # nothing of tenant A's prompts reaches tenant B's facts
        assert not any(part in text for text in theirs.values() for part in name.split())
    _assert_clean(fleet_blobs(store), range(1, 6), ("sk-tenant-a", "sk-tenant-b"))
