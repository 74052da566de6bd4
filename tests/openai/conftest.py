"""Fixtures for the OpenAI client family: the emulator, the engines' endpoints, and real SDK clients.

Every client is the real ``openai`` SDK; requests go to the in-process engine emulator through an
``httpx2`` transport (``EmulatorTransport``), which answers with each vendor's own usage shape.
vLLM and SGLang are named through ``patch(engines={base_url: name})``, as a user would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
import pytest

import telos_wrap
from telos_wrap.emulator import AsyncEmulatorTransport, Emulator, EmulatorTransport, ManualClock


@dataclass(frozen=True)
class Endpoint:
    """One engine as a test target: where it lives and which model it serves."""

    engine: str
    base_url: str
    model: str
    azure: bool = False


ENDPOINTS: dict[str, Endpoint] = {
    "openai": Endpoint("openai", "https://api.openai.com/v1", "gpt-4.1"),
    "openai-5.6": Endpoint("openai", "https://api.openai.com/v1", "gpt-5.6"),
    "azure": Endpoint("openai", "https://telos-test.openai.azure.com/openai", "gpt-4.1", azure=True),
    "deepseek": Endpoint("deepseek", "https://api.deepseek.com/v1", "deepseek-chat"),
    "vllm": Endpoint("vllm", "http://gpu-box.internal:8000/v1", "qwen3-8b"),
    "sglang": Endpoint("sglang", "http://sgl-box.internal:30000/v1", "qwen3-8b"),
    "generic": Endpoint("generic", "http://llm.example.net/v1", "some-model"),
}

#: How the tests name self-hosted servers to telos (``patch(engines=...)``) and to the emulator.
SELF_HOSTED = {
    "http://gpu-box.internal:8000/v1": "vllm",
    "http://sgl-box.internal:30000/v1": "sglang",
}
EMULATOR_ROUTES = {
    "gpu-box.internal:8000": "vllm",
    "sgl-box.internal:30000": "sglang",
    "llm.example.net": "openai",
}


@pytest.fixture
def oai_patched(patched: None) -> Iterator[None]:
    """``patch(strict=True)`` plus the self-hosted engine names."""
    telos_wrap.patch(strict=True, engines=SELF_HOSTED)
    yield


@pytest.fixture
def emu() -> Emulator:
    return Emulator(clock=ManualClock(), routes=EMULATOR_ROUTES)


def _client_kwargs(endpoint: Endpoint) -> dict[str, Any]:
    if endpoint.azure:
        return {
            "azure_endpoint": endpoint.base_url.removesuffix("/openai"),
            "api_version": "2025-04-01-preview",
        }
    return {"base_url": endpoint.base_url}


@pytest.fixture
def make_client(emu: Emulator) -> Iterator[Callable[[Endpoint], openai.OpenAI]]:
    """Factory for a sync client of an endpoint (``AzureOpenAI`` for Azure), closed after the test."""
    clients: list[openai.OpenAI] = []

    def make(endpoint: Endpoint) -> openai.OpenAI:
        http_client = httpx2.Client(transport=EmulatorTransport(emu))
        cls = openai.AzureOpenAI if endpoint.azure else openai.OpenAI
        client = cls(api_key="x", http_client=http_client, max_retries=0, **_client_kwargs(endpoint))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def make_async_client(emu: Emulator) -> Callable[[Endpoint], openai.AsyncOpenAI]:
    """Factory for an async client of an endpoint (``AsyncAzureOpenAI`` for Azure)."""

    def make(endpoint: Endpoint) -> openai.AsyncOpenAI:
        http_client = httpx2.AsyncClient(transport=AsyncEmulatorTransport(emu))
        cls = openai.AsyncAzureOpenAI if endpoint.azure else openai.AsyncOpenAI
        return cls(api_key="x", http_client=http_client, max_retries=0, **_client_kwargs(endpoint))

    return make


def hint(value: dict[str, Any]) -> dict[str, Any]:
    """``telos_hint=`` as keyword arguments (the SDK's own signatures do not declare it)."""
    return {"telos_hint": value}
