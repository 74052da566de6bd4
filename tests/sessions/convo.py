"""Deterministic conversations and a transport that records the exact bytes sent (shared with _worker.py)."""

from __future__ import annotations

from typing import Any

from telos_wrap.emulator import Emulator
from tests.sdk_http import EmulatorTransport, sdk_http

MODEL = "claude-opus-4-8"  # minimum cacheable prefix: 1,024 emulated tokens
RULES = "".join(
    f"Rule {i}: answer in plain words and cite the handbook section you used.\n" for i in range(60)
)
HANDBOOK = "".join(
    f"Section {i}. " + "Refunds are issued within fourteen days of a claim. " * 6 + "\n" for i in range(30)
)


class RecordingTransport(sdk_http.BaseTransport):
    """An ``EmulatorTransport`` that keeps every request body exactly as sent."""

    def __init__(self, emulator: Emulator) -> None:
        self.inner = EmulatorTransport(emulator)
        self.bodies: list[bytes] = []

    def handle_request(self, request: sdk_http.Request) -> sdk_http.Response:
        self.bodies.append(request.read())
        return self.inner.handle_request(request)


def system_prompt(turn: int, *, clock_line: bool = True) -> str:
    """A system prompt with an *untagged* line that changes every turn (a clock)."""
    live = f"Server clock: 2026-05-01 10:{turn:02d}:07\n" if clock_line else ""
    return f"You are the support assistant of Example Corp.\n{live}{RULES}Be concise."


def user_text(turn: int) -> str:
    return f"Question {turn}: how do refunds work for order {1000 + turn}? " + "Details follow. " * 8


def assistant_text(turn: int) -> str:
    return f"Answer {turn}: refunds take fourteen days (handbook section {turn % 30})."


def messages_for(turn: int, *, rewrite: int | None = None) -> Any:
    """The application's message list for ``turn`` (its own full history, append-only).

    ``rewrite`` edits the user message of that earlier turn (a history rewrite).
    """
    messages: list[dict[str, Any]] = []
    for t in range(turn + 1):
        text = user_text(t) + (" (edited)" if rewrite == t else "")
        messages.append({"role": "user", "content": text})
        if t < turn:
            messages.append({"role": "assistant", "content": assistant_text(t)})
    return messages


def run_shared_turn(client: Any, sess: Any, turn: int) -> Any:
    """One turn of the conversation the two-process test alternates (session primitives included)."""
    if turn == 0:
        sess.pin("handbook", HANDBOOK)
    if turn == 6:
        sess.fold(message_range=(0, 4), summary="The user asked about refunds for orders 1000 and 1001.")
    if turn == 8:
        sess.fold(slugs=["handbook"], summary="Handbook: refunds within fourteen days.")
    with sess:
        return client.messages.create(
            model=MODEL, max_tokens=32, system=system_prompt(turn), messages=messages_for(turn)
        )


async def run_shared_turn_async(client: Any, sess: Any, turn: int) -> Any:
    """``run_shared_turn`` with an async client (the session primitives are sync: run in a thread)."""
    import asyncio

    if turn == 0:
        await asyncio.to_thread(sess.pin, "handbook", HANDBOOK)
    if turn == 6:
        await asyncio.to_thread(
            sess.fold, message_range=(0, 4), summary="The user asked about refunds for orders 1000 and 1001."
        )
    if turn == 8:
        await asyncio.to_thread(
            sess.fold, slugs=["handbook"], summary="Handbook: refunds within fourteen days."
        )
    async with sess:
        return await client.messages.create(
            model=MODEL, max_tokens=32, system=system_prompt(turn), messages=messages_for(turn)
        )
