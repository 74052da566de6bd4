"""What the security suite's requests hold, and what a model (and a log) could read of one. The wire
itself (the emulator over real HTTP and the clients that reach it) is tests/over_http.py; the
``wire`` fixture is in tests/security/conftest.py."""

from __future__ import annotations

from typing import Any


def text_of(body: Any) -> str:
    """Every string in ``body`` joined: what a model (and a log) could read of a request."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    return "\n".join(out)


def conversation(turn: int) -> list[dict[str, Any]]:
    """The messages of request ``turn`` of a plain conversation that opens with ``"hi"`` (the opening
    two users share: an implicit session cannot tell them apart by their messages)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for n in range(1, turn + 1):
        messages += [
            {"role": "assistant", "content": f"answer {n}"},
            {"role": "user", "content": f"more {n}"},
        ]
    return messages
