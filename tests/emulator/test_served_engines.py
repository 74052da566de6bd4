"""The emulator served in this process routes each flavour's base URL to the engine it emulates.

A patched OpenAI client pointed at ``{url}/openai/v1`` gets the openai engine (its
``prompt_cache_key``), ``{url}/vllm/v1`` the vllm engine (its ``cache_salt`` for an isolation hint),
so recording against the emulator tests the engine the application will run; ``{url}/v1`` stays an
unknown host (generic), ``patch(engines=...)`` still wins, and the routes go when the server stops.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, serve
from telos_wrap.endpoints import served_endpoints

_TOOL_MANUAL = "Rule: quote what the tool returns.\n" * 200


def _ask(base_url: str, **hint: Any) -> None:
    with openai.OpenAI(api_key="x", base_url=base_url, max_retries=0) as client:
        client.chat.completions.create(
            model="gpt-4.1",
            max_tokens=8,
            messages=[{"role": "system", "content": _TOOL_MANUAL}, {"role": "user", "content": "hi"}],
            **({"telos_hint": hint} if hint else {}),
        )


@pytest.fixture
def served() -> Iterator[tuple[Emulator, str]]:
    emulator = Emulator()
    with serve(emulator) as url:
        telos_wrap.patch(strict=True)
        try:
            yield emulator, url
        finally:
            telos_wrap.unpatch()


def test_each_flavour_url_gets_its_engine(served: tuple[Emulator, str]) -> None:
    emulator, url = served
    _ask(f"{url}/openai/v1")
    _ask(f"{url}/vllm/v1", isolation="tenant-1")
    _ask(f"{url}/v1")
    openai_body, vllm_body, plain_body = (record.body for record in emulator.requests)
    assert "prompt_cache_key" in openai_body
    assert "cache_salt" in vllm_body and "prompt_cache_key" not in vllm_body
    assert "prompt_cache_key" not in plain_body and "cache_salt" not in plain_body
    assert [record.status for record in emulator.requests] == [200, 200, 200]


def test_patch_engines_wins_and_routes_end_with_the_server() -> None:
    emulator = Emulator()
    with serve(emulator) as url:
        telos_wrap.patch(strict=True, engines={f"{url}/openai/v1": "generic"})
        try:
            _ask(f"{url}/openai/v1")
        finally:
            telos_wrap.unpatch()
        assert f"{url}/sglang/v1" in served_endpoints()
    assert "prompt_cache_key" not in emulator.requests[0].body
    assert not any(key.startswith(url) for key in served_endpoints())
