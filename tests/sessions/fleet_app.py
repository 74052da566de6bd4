"""One application's conversations for the fleet-learning tests: a system prompt with a live clock
line and an environment list whose values (and item count) differ per conversation and turn."""

from __future__ import annotations

import random
from typing import Any

from .convo import MODEL, RULES, messages_for

__all__ = ["MODEL", "app_system", "converse", "messages_for"]


def app_system(
    conv: int, turn: int, *, app: str = "Example Corp", edit: bool = False, canary: str = ""
) -> str:
    """Conversation ``conv``'s system prompt at ``turn``; ``edit`` rewrites one line in words (a one-off
    prompt edit); ``canary`` goes into a value of the prompt (a digit-bearing token)."""
    rng = random.Random(f"{conv}:{turn}")
    # As many jobs as the turn says (1-3, a different count on every turn): items that come and go.
    jobs = "\n".join(
        f"JOB_{k}=running (pid {rng.randrange(1000, 99999)})" for k in range(1 + (turn + conv) % 3)
    )
    tone = "Tone: formal and brief, no small talk." if edit else "Tone: friendly and warm, a little chatty."
    ticket = f"Ticket: {canary}\n" if canary else ""
    return (
        f"You are the support assistant of {app}.\n"
        f"Server clock: 2026-05-01 10:{turn:02d}:{conv % 60:02d}\n"
        f"{tone}\n{ticket}{RULES}"
        f"Environment:\nHOME=/home/agent\nUPTIME={40 * turn + conv}s\n{jobs}\nLANG=C.UTF-8\nBe concise."
    )


def converse(client: Any, conv: int, turns: int, **system: Any) -> list[tuple[int, int]]:
    """``turns`` requests of conversation ``conv``: (cache read, cache write) per request."""
    usage = []
    for turn in range(turns):
        reply = client.messages.create(
            model=MODEL,
            max_tokens=16,
            system=app_system(conv, turn, **{k: v(turn) if callable(v) else v for k, v in system.items()}),
            messages=messages_for(turn),
        )
        usage.append((reply.usage.cache_read_input_tokens or 0, reply.usage.cache_creation_input_tokens or 0))
    return usage
