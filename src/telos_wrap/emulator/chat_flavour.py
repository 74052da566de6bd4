"""Contract shared by the OpenAI-compatible chat flavours (openai, deepseek, vllm, sglang)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from .errors import EmulatorHTTPError, openai_error
from .render import RenderedPrompt, RenderMode


class ChatFlavour(ABC):
    """One vendor/engine behind ``/v1/chat/completions``.

    A flavour validates the request (raising :class:`EmulatorHTTPError` in its own error shape),
    runs its cache rules, and returns the prompt side of ``usage``.  Implementations hold one
    lock (``self._lock``) around their cache state.
    """

    name: ClassVar[str]

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: How prompts are rendered into positions; set by the Emulator (docs/emulator.md, "Render modes").
        self.mode: RenderMode = "rendered"

    def error(self, message: str, param: str | None = None) -> EmulatorHTTPError:
        """A 400 in this flavour's error shape."""
        return openai_error(message, param=param)

    def validate(self, body: Mapping[str, Any], prompt: RenderedPrompt) -> None:  # noqa: B027
        """Reject requests the real server rejects (default: accept everything)."""

    @abstractmethod
    def prompt_usage(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, reply: str, now: float
    ) -> tuple[int, dict[str, Any]]:
        """Run the cache for a request starting at ``now``.

        Returns ``prompt_tokens`` and the other prompt-side usage fields of this flavour
        (``prompt_tokens_details`` and vendor extras).  ``reply`` is the text the emulator
        answers with (engines that cache their output need it).
        """

    def completion_details(self) -> dict[str, Any] | None:
        """``usage.completion_tokens_details`` for this flavour (None = omitted)."""
        return None

    @abstractmethod
    def reset(self) -> None:
        """Forget all cached state."""
