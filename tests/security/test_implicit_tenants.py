"""Promise T1 (docs/security.md): implicit conversations never span users.

The issue's scenario: one patched client serves two end users who both open with "hi"; user A's
system prompt holds a constant line ``Ticket queue size: 7.``. User B's traffic must not make telos
move A's line out of A's cached prefix (what A's model reads stays where A wrote it), and nothing of
B's text ever appears in A's requests, explanation or learned patterns. Tenant signals (the isolation
hint, credentials, user fields) give separate implicit sessions outright.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from telos_wrap.sessions import registry as session_registry
from tests.over_http import Wire

from .wire import conversation

RULES = "\n".join(f"Rule {n}: answer precisely and politely, citing the policy." for n in range(150))
PROFILE = {"A": "You help Ana Silva (CANARY-ANA).", "B": "You help Bruno Costa (CANARY-BRUNO)."}
QUEUE = {"A": 7, "B": 9}


@pytest.fixture(autouse=True)
def _no_implicit_sessions() -> Iterator[None]:
    """Each test starts and ends with no implicit session in the process."""
    session_registry._implicit.clear()
    yield
    session_registry._implicit.clear()


def _system(user: str) -> str:
    return f"{PROFILE[user]}\nTicket queue size: {QUEUE[user]}.\n{RULES}"


def _converse(wire: Wire, hint: dict[str, Any] | None = None, keys: dict[str, str] | None = None) -> None:
    clients = {user: wire.anthropic(**({"api_key": keys[user]} if keys else {})) for user in "AB"}
    for turn in range(4):
        for user in "AB":
            extra = {"telos_hint": hint[user]} if hint else {}
            clients[user].messages.create(
                model="claude-opus-4-8",
                max_tokens=8,
                system=_system(user),
                messages=conversation(turn),
                **extra,
            )
    for client in clients.values():
        client.close()


def _check(wire: Wire) -> None:
    for raw in wire.bodies:
        body = json.loads(raw)
        system = (
            body["system"] if isinstance(body["system"], str) else "".join(b["text"] for b in body["system"])
        )
        user = "A" if "CANARY-ANA" in system else "B"
        other = "B" if user == "A" else "A"
        assert PROFILE[other] not in raw.decode()
        # The constant line stays in the system prompt, where the user's application wrote it.
        assert f"{PROFILE[user]}\nTicket queue size: {QUEUE[user]}." in system
    # What a session learned holds positions and keyed digests, never text (docs/security.md, E1).
    for session in session_registry._implicit.values():
        learned = session.state.dumps()
        assert "CANARY" not in learned and "Ticket" not in learned


def test_two_users_opening_alike_on_one_client_never_learn_from_each_other(wire: Wire) -> None:
    _converse(wire)
    _check(wire)
    [shared] = session_registry._implicit.values()  # nothing tells them apart: one implicit session
    explained = shared.explain()
    assert "nothing learned from the previous request" in explained
    for n in range(len(wire.bodies)):
        text = shared.explain(n)
        assert not ("CANARY-ANA" in text and "CANARY-BRUNO" in text)


@pytest.mark.parametrize("signal", ["isolation", "credentials"])
def test_tenant_signals_separate_implicit_sessions(wire: Wire, signal: str) -> None:
    if signal == "isolation":
        _converse(wire, hint={"A": {"isolation": "tenant-a"}, "B": {"isolation": "tenant-b"}})
    else:
        _converse(wire, keys={"A": "key-of-a", "B": "key-of-b"})
    assert len(session_registry._implicit) == 2
    _check(wire)
    for session in session_registry._implicit.values():
        assert session.stats.cache_breaks == 0
        assert "key-of-" not in session.id and "key-of-" not in json.dumps(session.state.to_json())
