"""OpenAI-compatible vendors with automatic prefix caching (docs/engines.md, *Routes*).

Gemini's OpenAI endpoint, xAI, Groq, Moonshot, Together and Fireworks cache a shared prompt prefix
on their own, with no request field to send. The emulator gives them one cache model — OpenAI's
automatic regime (docs/vendor-facts.md §2.1: from 1,024 tokens, hits in 128-token steps,
partitioned by model) — and
differs only in **where each route reports the read**, which is what ``usage_of()`` must get right:

* ``prompt_tokens_details.cached_tokens`` on every response: xAI (docs.x.ai, "Prompt Caching —
  Usage & Pricing"), Groq, Together, Fireworks;
* Moonshot (Kimi): a flat ``usage.cached_tokens``;
* Gemini's OpenAI endpoint: ``prompt_tokens_details.cached_tokens`` only when something was read
  (the native ``cachedContentTokenCount`` is absent on a miss), no cache field otherwise.

None of them reports a write counter. Requests are validated like OpenAI's (unknown top-level fields
are rejected), so a field telos added would show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from .flavour_openai import OpenAIFlavour
from .render import RenderedPrompt

__all__ = ["COMPAT_FLAVOURS", "CompatFlavour"]

UsageShape = Literal["details", "flat", "details-on-hit"]


class CompatFlavour(OpenAIFlavour):
    """One automatic-caching vendor; ``shape`` is where its usage reports the cached tokens."""

    shape: ClassVar[UsageShape] = "details"

    def prompt_usage(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, reply: str, now: float
    ) -> tuple[int, dict[str, Any]]:
        read = self._automatic_cache(body, prompt, now)
        if self.shape == "flat":
            return prompt.total_tokens, {"cached_tokens": read}
        if self.shape == "details-on-hit" and not read:
            return prompt.total_tokens, {}
        return prompt.total_tokens, {"prompt_tokens_details": {"cached_tokens": read}}


class GeminiFlavour(CompatFlavour):
    """``generativelanguage.googleapis.com/v1beta/openai``: the read only when there is one."""

    name = "gemini"
    shape = "details-on-hit"


class XAIFlavour(CompatFlavour):
    """``api.x.ai``."""

    name = "xai"


class GroqFlavour(CompatFlavour):
    """``api.groq.com/openai``."""

    name = "groq"


class MoonshotFlavour(CompatFlavour):
    """``api.moonshot.ai``: flat ``usage.cached_tokens``."""

    name = "moonshot"
    shape = "flat"


class TogetherFlavour(CompatFlavour):
    """``api.together.xyz``."""

    name = "together"


class FireworksFlavour(CompatFlavour):
    """``api.fireworks.ai``."""

    name = "fireworks"


COMPAT_FLAVOURS: Mapping[str, type[CompatFlavour]] = {
    cls.name: cls
    for cls in (GeminiFlavour, XAIFlavour, GroqFlavour, MoonshotFlavour, TogetherFlavour, FireworksFlavour)
}
"""Flavour name → class, for the routes telos serves with its ``generic`` engine."""
