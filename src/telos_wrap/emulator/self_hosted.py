"""What the self-hosted engines (vLLM, SGLang) share: per-namespace prefix trees and their error shape."""

from __future__ import annotations

from collections.abc import Hashable

from .chat_flavour import ChatFlavour
from .errors import EmulatorHTTPError, engine_error
from .prefix_tree import PrefixTree

__all__ = ["SelfHostedFlavour"]


class SelfHostedFlavour(ChatFlavour):
    """A self-hosted OpenAI-compatible server: one prefix tree per cache namespace (salt, extra key)."""

    def __init__(self) -> None:
        super().__init__()
        self._trees: dict[Hashable, PrefixTree] = {}

    def reset(self) -> None:
        with self._lock:
            self._trees.clear()

    def error(self, message: str, param: str | None = None) -> EmulatorHTTPError:
        return engine_error(message)
