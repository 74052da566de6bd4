"""Fixtures for the demo / replay / record tests: the bundled session and SDK clients on an emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from telos_wrap.emulator import Emulator, ManualClock
from telos_wrap.replay.runner import demo_path, load_sessions
from telos_wrap.replay.traces import TraceRequest
from tests.sdk_http import AsyncEmulatorTransport, EmulatorTransport, sdk_http

#: Looks like an Anthropic API key; must never reach a recording.
SECRET_KEY = "sk-ant-api03-" + "S3cr3tKeyMaterial_" * 4


@pytest.fixture(scope="session")
def demo_requests() -> list[TraceRequest]:
    """The bundled demo session (43 Anthropic requests)."""
    (session,) = load_sessions(demo_path())
    return session


@pytest.fixture
def emu() -> Emulator:
    return Emulator(clock=ManualClock())


@pytest.fixture
def claude(emu: Emulator) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(
        api_key=SECRET_KEY, http_client=sdk_http.Client(transport=EmulatorTransport(emu)), max_retries=0
    )
    yield client
    client.close()


@pytest.fixture
def gpt(emu: Emulator) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(
        api_key="sk-proj-" + "OpenAIsecret_" * 4,
        base_url="https://api.openai.com/v1",
        http_client=sdk_http.Client(transport=EmulatorTransport(emu)),
        max_retries=0,
    )
    yield client
    client.close()


@pytest.fixture
def async_claude(emu: Emulator) -> Any:
    return anthropic.AsyncAnthropic(
        api_key=SECRET_KEY,
        http_client=sdk_http.AsyncClient(transport=AsyncEmulatorTransport(emu)),
        max_retries=0,
    )
