"""Fixtures of the fidelity suite: the emulator served on 127.0.0.1 (both vendors' flavours),
``patch(strict=True)``, and real SDK clients talking HTTP to it."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock, serve


@pytest.fixture
def served() -> Iterator[tuple[Emulator, anthropic.Anthropic, openai.OpenAI]]:
    """One emulator served on 127.0.0.1 (Anthropic Messages, and OpenAI for chat paths), and a real
    client of each SDK."""
    emulator = Emulator(clock=ManualClock())
    with serve(emulator, flavour="openai") as url:
        telos_wrap.patch(strict=True, engines={url + "/v1": "openai"})
        try:
            yield (
                emulator,
                anthropic.Anthropic(api_key="x", base_url=url, max_retries=0),
                openai.OpenAI(api_key="x", base_url=url + "/v1", max_retries=0),
            )
        finally:
            telos_wrap.unpatch()
