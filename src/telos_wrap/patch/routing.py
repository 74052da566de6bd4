"""Which requests telos rewrites, and with which engine.

Dispatch is on the request URL the SDK built (``options.url``), so every public entry point that
sends a Messages, Chat Completions or Responses request — ``create``, ``stream()``, ``parse()``, raw and
streaming-response wrappers, beta twins, tool runners — is recognised in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from telos_wrap.config import PatchConfig
from telos_wrap.endpoints import served_endpoints
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api

__all__ = ["Route", "resolve_openai_engine", "route_request"]


@dataclass(frozen=True, slots=True)
class Route:
    """A request telos handles: its wire API, engine, and whether it only counts tokens."""

    api: Api
    engine: str
    count_only: bool = False
    #: False for a request that reads the conversation without being one of its turns (Responses
    #: ``compact``): rewritten like a turn, never recorded as one.
    turn: bool = True


# Vendor hosts recognised without configuration (docs/engines.md, *Routes*). Self-hosted vLLM /
# SGLang and LiteLLM proxies are never guessed.
_HOST_ENGINES = {"api.openai.com": "openai", "api.deepseek.com": "deepseek", "openrouter.ai": "openrouter"}


def resolve_openai_engine(base_url: str, hints: TelosHints, config: PatchConfig) -> str:
    """Engine for an OpenAI-client request: hint → patch(engines=) → emulator served here → known
    host → generic."""
    if hints.engine is not None:
        return hints.engine
    normalized = base_url.rstrip("/")
    host = urlsplit(normalized).hostname or ""
    # patch(engines=) first, then the built-in emulator's flavour URLs served in this process.
    for key, engine in (*config.engines.items(), *served_endpoints().items()):
        if key.rstrip("/") in (normalized, host) or normalized.startswith(key.rstrip("/") + "/"):
            return engine
    if host in _HOST_ENGINES:
        return _HOST_ENGINES[host]
    if host.endswith(".openai.azure.com"):
        return "openai"
    return "generic"


def route_request(
    sdk: str, method: str, url: str, base_url: str, hints: TelosHints, config: PatchConfig
) -> Route | None:
    """The route for a request, or ``None`` when telos leaves it alone."""
    if method.lower() != "post":
        return None
    path = url.split("?", 1)[0]
    if sdk == "anthropic":
        if path == "/v1/messages":
            return Route("anthropic", "anthropic")
        if path == "/v1/messages/count_tokens":
            return Route("anthropic", "anthropic", count_only=True)
        return None
    if sdk != "openai":
        return None
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return Route("openai_chat", resolve_openai_engine(base_url, hints, config))
    # OpenAI Responses (docs/engines.md, "OpenAI Responses"): create / stream / parse, the token
    # count (not a turn) and context compaction (not a turn either, but it reads the same prefix).
    if path.endswith("/responses"):
        return Route("openai_responses", resolve_openai_engine(base_url, hints, config))
    if path.endswith("/responses/input_tokens"):
        return Route("openai_responses", resolve_openai_engine(base_url, hints, config), count_only=True)
    if path.endswith("/responses/compact"):
        return Route("openai_responses", resolve_openai_engine(base_url, hints, config), turn=False)
    return None
