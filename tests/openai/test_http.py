"""Over real local HTTP (the emulator's ``serve``): the SDK's default transport, engines named by hint
and by ``patch(engines=...)``, usage in a stream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, serve

from .conftest import hint

MESSAGES: Any = [{"role": "system", "content": "Rules " * 400}, {"role": "user", "content": "Q"}]


@pytest.fixture
def base_url(patched: None) -> Iterator[str]:
    emu = Emulator()
    with serve(emu) as url:
        # Small bodies, studied as rewritten (the default leaves them below the minimum as built).
        telos_wrap.patch(strict=True, engines={f"{url}/vllm/v1": "vllm"}, only_what_pays=False)
        yield url


def test_openai_engine_by_hint_over_http(base_url: str) -> None:
    with openai.OpenAI(api_key="x", base_url=f"{base_url}/openai/v1", max_retries=0) as client:
        for _ in range(2):
            stream = client.chat.completions.create(
                model="gpt-5.6", messages=MESSAGES, stream=True, **hint({"engine": "openai"})
            )
            chunks = list(stream)
            assert all(chunk.choices for chunk in chunks)
    report = telos_wrap.usage_of(stream)
    assert report is not None and report.engine == "openai"
    assert report.cache_read and report.cache_read > 0  # the second request read what the first wrote


def test_vllm_engine_by_base_url_over_http(base_url: str) -> None:
    with openai.OpenAI(api_key="x", base_url=f"{base_url}/vllm/v1", max_retries=0) as client:
        client.chat.completions.create(model="m", messages=MESSAGES)
        completion = client.chat.completions.create(model="m", messages=MESSAGES)
    report = telos_wrap.usage_of(completion)
    assert report is not None and report.engine == "vllm"
    assert report.cache_read and report.cache_read > 0
    assert report.cache_write is not None
