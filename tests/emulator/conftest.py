"""Fixtures: an emulator with a manual clock and real SDK clients wired to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from telos_wrap.emulator import Emulator, ManualClock
from tests.sdk_http import EmulatorTransport, sdk_http


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def emu(clock: ManualClock) -> Emulator:
    return Emulator(clock=clock)


@pytest.fixture
def claude(emu: Emulator) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(
        api_key="x", http_client=sdk_http.Client(transport=EmulatorTransport(emu)), max_retries=0
    )
    yield client
    client.close()


@pytest.fixture
def make_openai(emu: Emulator) -> Iterator[Callable[..., openai.OpenAI]]:
    """Factory: ``make_openai(base_url=...)`` -> an OpenAI client on the emulator (closed after the test)."""
    clients: list[openai.OpenAI] = []

    def make(base_url: str = "https://api.openai.com/v1", **kwargs: Any) -> openai.OpenAI:
        client = openai.OpenAI(
            api_key="x",
            base_url=base_url,
            http_client=sdk_http.Client(transport=EmulatorTransport(emu, **kwargs)),
            max_retries=0,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
