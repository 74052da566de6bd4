"""Fixtures for the OpenAI client family: the emulator, the engines' endpoints, and real SDK clients.

Every client is the real ``openai`` SDK pointed at its engine's own base URL (``api.openai.com``,
Azure, ``api.deepseek.com``, self-hosted hosts), so telos resolves the engine from the URL exactly
as it does for a user; vLLM and SGLang are named through ``patch(engines={base_url: name})``.
Requests reach the engine emulator either in-process (``EmulatorTransport``: ``make_client``) or
over real HTTP (``EmulatorRedirect``: ``http_wire``), which moves each request to the local emulator
server under its flavour's path prefix and is what vcrpy records into cassettes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock, serve
from tests.sdk_http import AsyncEmulatorTransport, EmulatorTransport, redirected, sdk_http

#: The API key every test client sends: distinctive, so a scan of the cassettes can prove it is absent.
API_KEY = "sk-telos-test-0000"


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
    # Routers to Claude over the OpenAI wire (docs/engines.md, *Routes*): OpenRouter by host, a LiteLLM
    # proxy named like a self-hosted server.
    "openrouter": Endpoint("openrouter", "https://openrouter.ai/api/v1", "anthropic/claude-sonnet-4.5"),
    "litellm": Endpoint("litellm", "http://litellm-proxy.internal:4000/v1", "claude-sonnet-4-5"),
}

#: How the tests name self-hosted servers to telos (``patch(engines=...)``) and to the emulator.
SELF_HOSTED = {
    "http://gpu-box.internal:8000/v1": "vllm",
    "http://sgl-box.internal:30000/v1": "sglang",
    "http://litellm-proxy.internal:4000/v1": "litellm",
}
EMULATOR_ROUTES = {
    "litellm-proxy.internal:4000": "litellm",
    "gpu-box.internal:8000": "vllm",
    "sgl-box.internal:30000": "sglang",
    "llm.example.net": "openai",
}


@pytest.fixture
def oai_patched(patched: None) -> Iterator[None]:
    """``patch(strict=True, only_what_pays=False)`` plus the self-hosted engine names.

    These tests study what each engine adds to a request, on small bodies recorded in cassettes; the
    default ``patch()`` would send bodies below the 1,024-token minimum as the SDK built them
    (``tests/reliability/test_only_what_pays.py`` covers that default on every entry point).
    """
    telos_wrap.patch(strict=True, engines=SELF_HOSTED, only_what_pays=False)
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
        http_client = sdk_http.Client(transport=EmulatorTransport(emu))
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
        http_client = sdk_http.AsyncClient(transport=AsyncEmulatorTransport(emu))
        cls = openai.AsyncAzureOpenAI if endpoint.azure else openai.AsyncOpenAI
        return cls(api_key="x", http_client=http_client, max_retries=0, **_client_kwargs(endpoint))

    return make


# -- over real HTTP --------------------------------------------------------------------------------------

#: Picks the emulator flavour for a vendor URL with the same routing as the in-process ``emu``.
_ROUTER = Emulator(routes=EMULATOR_ROUTES)


def _redirect(request: sdk_http.Request, emulator_url: str) -> sdk_http.Request:
    """``request`` moved to ``{emulator_url}/{flavour}{path}?{query}`` (``serve()`` routes by the prefix).

    ``https://api.deepseek.com/v1/chat/completions`` becomes ``{emulator_url}/deepseek/v1/chat/completions``;
    method, headers (but ``Host``), body and extensions (timeouts) are kept.
    """
    flavour = _ROUTER.flavour_for_url(str(request.url))
    return redirected(request, f"{emulator_url}/{flavour}", request.read())


class EmulatorRedirect(sdk_http.HTTPTransport):
    """A real HTTP transport whose every request goes to the local emulator server instead of the vendor.

    vcrpy patches ``sdk_http.HTTPTransport.handle_request``, so the redirected request is what a cassette
    records (and, when replaying, what it is matched against). ``sent`` logs every redirected request.
    """

    def __init__(self, emulator_url: str, sent: list[sdk_http.Request]) -> None:
        super().__init__()
        self.emulator_url = emulator_url
        self.sent = sent

    def handle_request(self, request: sdk_http.Request) -> sdk_http.Response:
        moved = _redirect(request, self.emulator_url)
        self.sent.append(moved)
        return super().handle_request(moved)


class AsyncEmulatorRedirect(sdk_http.AsyncHTTPTransport):
    """The async twin of :class:`EmulatorRedirect`."""

    def __init__(self, emulator_url: str, sent: list[sdk_http.Request]) -> None:
        super().__init__()
        self.emulator_url = emulator_url
        self.sent = sent

    async def handle_async_request(self, request: sdk_http.Request) -> sdk_http.Response:
        moved = _redirect(request, self.emulator_url)
        self.sent.append(moved)
        return await super().handle_async_request(moved)


@dataclass
class HttpWire:
    """Real SDK clients for the endpoints, talking HTTP to the emulator server at ``emulator_url``.

    ``sent`` is every request that went out, in order. Sync clients are closed by the fixture; an
    async client must be closed by the test, inside its event loop.
    """

    emulator_url: str
    sent: list[sdk_http.Request] = field(default_factory=list)
    _clients: list[openai.OpenAI] = field(default_factory=list)

    def client(self, endpoint: Endpoint) -> openai.OpenAI:
        http_client = sdk_http.Client(transport=EmulatorRedirect(self.emulator_url, self.sent))
        cls = openai.AzureOpenAI if endpoint.azure else openai.OpenAI
        client = cls(api_key=API_KEY, http_client=http_client, max_retries=0, **_client_kwargs(endpoint))
        self._clients.append(client)
        return client

    def async_client(self, endpoint: Endpoint) -> openai.AsyncOpenAI:
        http_client = sdk_http.AsyncClient(transport=AsyncEmulatorRedirect(self.emulator_url, self.sent))
        cls = openai.AsyncAzureOpenAI if endpoint.azure else openai.AsyncOpenAI
        return cls(api_key=API_KEY, http_client=http_client, max_retries=0, **_client_kwargs(endpoint))

    def close(self) -> None:
        for client in self._clients:
            client.close()


@pytest.fixture
def http_wire(emulator_url: str) -> Iterator[HttpWire]:
    """Clients over real HTTP to the emulator server (started only when recording cassettes)."""
    wire = HttpWire(emulator_url)
    try:
        yield wire
    finally:
        wire.close()


def hint(value: dict[str, Any]) -> dict[str, Any]:
    """``telos_hint=`` as keyword arguments (the SDK's own signatures do not declare it)."""
    return {"telos_hint": value}


@pytest.fixture
def served_openai() -> Iterator[tuple[Emulator, openai.OpenAI]]:
    """The emulator's OpenAI flavour served on 127.0.0.1, ``patch(strict=True)``, and a real client."""
    emulator = Emulator(clock=ManualClock())
    with serve(emulator, flavour="openai") as url:
        telos_wrap.patch(strict=True, engines={url + "/v1": "openai"})
        try:
            yield emulator, openai.OpenAI(api_key="x", base_url=url + "/v1", max_retries=0)
        finally:
            telos_wrap.unpatch()
