"""The engine registry: name → adapter factory. Built-ins register through the same call users use."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

from telos_wrap.engines.base import EngineAdapter

__all__ = ["engine_names", "get_engine", "register_engine"]

_factories: dict[str, Callable[[], EngineAdapter]] = {}
_instances: dict[str, EngineAdapter] = {}
_lock = threading.Lock()

# Built-ins, imported lazily on first use: "module:Class".
_BUILTINS = {
    "anthropic": "telos_wrap.engines.anthropic:AnthropicEngine",
    "openai": "telos_wrap.engines.openai:OpenAIEngine",
    "deepseek": "telos_wrap.engines.deepseek:DeepSeekEngine",
    "vllm": "telos_wrap.engines.vllm:VLLMEngine",
    "sglang": "telos_wrap.engines.sglang:SGLangEngine",
    "generic": "telos_wrap.engines.generic:GenericOpenAIEngine",
    "openrouter": "telos_wrap.engines.chat_breakpoints:OpenRouterEngine",
    "litellm": "telos_wrap.engines.chat_breakpoints:LiteLLMEngine",
}


def _builtin(path: str) -> Callable[[], EngineAdapter]:
    def factory() -> EngineAdapter:
        module_name, _, attribute = path.partition(":")
        adapter: EngineAdapter = getattr(importlib.import_module(module_name), attribute)()
        return adapter

    return factory


for _name, _path in _BUILTINS.items():
    _factories[_name] = _builtin(_path)


def register_engine(name: str, factory: Callable[[], EngineAdapter]) -> None:
    """Register (or replace) an engine adapter under ``name``."""
    with _lock:
        _factories[name] = factory
        _instances.pop(name, None)


def get_engine(name: str) -> EngineAdapter:
    """The adapter registered as ``name`` (one shared instance; adapters are stateless)."""
    adapter = _instances.get(name)
    if adapter is not None:
        return adapter
    with _lock:
        if name not in _factories:
            raise KeyError(f"no telos engine named {name!r}; known engines: {sorted(_factories)}")
        adapter = _instances.get(name) or _factories[name]()
        _instances[name] = adapter
        return adapter


def engine_names() -> list[str]:
    """Every registered engine name."""
    return sorted(_factories)
