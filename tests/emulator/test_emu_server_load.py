"""The local server under a crowd: many concurrent SDK calls, none retried, none dropped.

``socketserver``'s listen queue of 5 reset 6 to 12 of 30 concurrent ``AsyncOpenAI`` calls sent to
``telos-wrap emulator`` (``APIConnectionError`` with ``max_retries=0``); ``serve()`` queues
``LISTEN_BACKLOG`` connections. The server in its own process is what shows it: in process, the
client's event loop and the server's threads share one interpreter and the burst arrives slower.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import anthropic
import openai
import pytest

from telos_wrap.emulator import Emulator, flavour_base_url, serve
from telos_wrap.emulator.server import LISTEN_BACKLOG

from ..docs.fixtures import start_cli_emulator, stop_cli_emulator

CALLS = 100


async def _burst(base_url: str, calls: int) -> tuple[list[str], list[str]]:
    async with (
        anthropic.AsyncAnthropic(api_key="x", base_url=base_url, max_retries=0) as claude,
        openai.AsyncOpenAI(api_key="x", base_url=flavour_base_url(base_url, "openai"), max_retries=0) as gpt,
    ):

        async def ask_claude(i: int) -> str:
            message = await claude.messages.create(
                model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": f"q{i}"}]
            )
            return message.id

        async def ask_gpt(i: int) -> str:
            completion = await gpt.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": f"q{i}"}]
            )
            return completion.id

        # One SDK at a time: each burst opens its connections at once.
        gpt_ids = await asyncio.gather(*(ask_gpt(i) for i in range(calls)))
        claude_ids = await asyncio.gather(*(ask_claude(i) for i in range(calls)))
    return list(claude_ids), list(gpt_ids)


def test_the_command_line_emulator_answers_every_concurrent_call() -> None:
    """``telos-wrap emulator`` in its own process: 100 concurrent calls per SDK, no retries."""
    process, url, _ = start_cli_emulator(["telos-wrap", "emulator"])
    try:
        claude_ids, gpt_ids = asyncio.run(_burst(url, CALLS))
    finally:
        err = stop_cli_emulator(process)
    assert len(set(claude_ids)) == CALLS and len(set(gpt_ids)) == CALLS
    assert "Traceback" not in err, err[-3000:]


def test_concurrent_calls_of_both_sdks_are_all_answered_in_process() -> None:
    emu = Emulator()
    with serve(emu) as url:
        claude_ids, gpt_ids = asyncio.run(_burst(url, CALLS))
    assert len(set(claude_ids)) == CALLS and len(set(gpt_ids)) == CALLS
    log = emu.requests
    assert len(log) == 2 * CALLS and {r.status for r in log} == {200}
    assert sorted(r.flavour for r in log) == ["anthropic"] * CALLS + ["openai"] * CALLS


def test_the_listen_queue_is_deep() -> None:
    assert LISTEN_BACKLOG >= 1024


def test_a_client_that_hangs_up_mid_request_is_one_debug_line(caplog: pytest.LogCaptureFixture) -> None:
    """A half-sent request (a client that timed out) ends its connection without a traceback."""
    emu = Emulator()
    caplog.set_level(logging.DEBUG, logger="telos_wrap.emulator.server")
    with serve(emu) as url:
        port = int(url.rsplit(":", 1)[1])
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(
                    b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + b"{" * 10
                )
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(caplog.records) < 5:
            time.sleep(0.05)
        # The server still answers afterwards.
        with openai.OpenAI(api_key="x", base_url=flavour_base_url(url, "openai"), max_retries=0) as client:
            client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
    assert [r.status for r in emu.requests] == [200]
    hung = [r for r in caplog.records if "hung up" in r.getMessage()]
    assert len(hung) == 5 and all(r.levelno == logging.DEBUG and r.exc_info is None for r in hung)
