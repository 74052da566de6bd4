"""OpenAI Chat Completions cache rules (docs/vendor-facts.md §2).

Two regimes, chosen by model family:

* **before GPT-5.6** — automatic caching of prompts >= 1024 tokens, hits in 128-token
  increments, free writes; ``prompt_cache_key`` is combined with the prefix for routing, which
  the emulator models as a cache partition (§2.1).  Retention ``in_memory`` (10 minutes after
  last use; "typically cleared after 5-10 minutes of inactivity") or ``24h`` (the default for
  non-ZDR organisations, SDK docstring of ``prompt_cache_retention``).
* **GPT-5.6 and later** — breakpoints: ``prompt_cache_options.mode`` ``implicit`` (one
  managed breakpoint at the newest user/tool message + the latest 3 explicit ones) or
  ``explicit`` (latest 4 explicit; none = no caching); matching exactly at breakpoints; entries
  live ``ttl`` (30m default, 12h per breakpoint) after last write/reuse; writes reported in
  ``prompt_tokens_details.cache_write_tokens`` (SDK ``PromptCacheOptions`` docstring, §2.1/§2.2).
  ``prompt_cache_key``, ``reasoning_effort``, ``verbosity`` and ``response_format`` partition
  the cache (§2.3: the diagnostics enum lists them as miss reasons).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any

from openai.types.chat import completion_create_params

from .chat_flavour import ChatFlavour
from .entry_store import EntryStore
from .prefix_tree import PrefixTree
from .render import Position, RenderedPrompt, dumps

MIN_PROMPT_TOKENS = 1024  # §2.1: "caching starts at 1024 tokens"
HIT_INCREMENT = 128  # §2.1: "hits in 128-token increments" (pre-5.6)
RETENTION_SECONDS: Mapping[str, float] = {"in_memory": 600.0, "24h": 86_400.0}
BREAKPOINT_TTL_SECONDS: Mapping[str, float] = {"30m": 1_800.0, "12h": 43_200.0}
CHAT_REQUEST_TTLS = frozenset({"30m"})  # SDK chat PromptCacheOptions.ttl: Literal["30m"]


def _typed_dict_keys(cls: type) -> frozenset[str]:
    return frozenset(getattr(cls, "__required_keys__", ())) | frozenset(getattr(cls, "__optional_keys__", ()))


#: Fields the API accepts that older SDK lines do not declare yet (the emulator stands for the API,
#: whichever SDK sends to it; an older SDK sends them through ``extra_body``).
NEWER_API_FIELDS = frozenset(
    {"prompt_cache_key", "prompt_cache_retention", "prompt_cache_options", "moderation", "safety_identifier"}
)

ACCEPTED_FIELDS = (
    _typed_dict_keys(completion_create_params.CompletionCreateParamsStreaming)
    | _typed_dict_keys(completion_create_params.CompletionCreateParamsNonStreaming)
    | NEWER_API_FIELDS
)
"""Top-level request fields the API accepts: what the installed SDK's ``completion_create_params``
declares, plus :data:`NEWER_API_FIELDS`."""

_GPT_VERSION = re.compile(r"^(?:ft:)?gpt-(\d+)(?:\.(\d+))?")


def supports_breakpoints(model: str) -> bool:
    """True for GPT-5.6 and later (``gpt-5.6*``, ``gpt-5.7*``, ``gpt-6*`` ...)."""
    m = _GPT_VERSION.match(model)
    if m is None:
        return False
    return (int(m.group(1)), int(m.group(2) or 0)) >= (5, 6)


def _implicit_target(prompt: RenderedPrompt) -> Position | None:
    """§2.1: one managed breakpoint "near the newest user/tool message" — here: its last part."""
    target: Position | None = None
    newest = -1
    for pos in prompt.positions:
        if pos.role in ("user", "tool") and pos.message_index >= newest:
            newest, target = pos.message_index, pos
    return target


class OpenAIFlavour(ChatFlavour):
    """``api.openai.com`` chat completions."""

    name = "openai"

    def __init__(self) -> None:
        super().__init__()
        self._trees: dict[Hashable, PrefixTree] = {}
        self._entries = EntryStore()

    def reset(self) -> None:
        with self._lock:
            self._trees.clear()
            self._entries.clear()

    def completion_details(self) -> dict[str, Any]:
        return {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }

    def validate(self, body: Mapping[str, Any], prompt: RenderedPrompt) -> None:
        for key in body:
            if key not in ACCEPTED_FIELDS:
                raise self.error(f"Unrecognized request argument supplied: {key}")
        model = str(body.get("model"))
        options = body.get("prompt_cache_options")
        marked = [p for p in prompt.positions if p.markers]
        if not supports_breakpoints(model):
            if options is not None:
                raise self.error(
                    f"prompt_cache_options is only supported for gpt-5.6 and later models, not '{model}'.",
                    "prompt_cache_options",
                )
            if marked:
                param = f"{marked[0].path}.prompt_cache_breakpoint"
                raise self.error(
                    f"prompt_cache_breakpoint is only supported for gpt-5.6 and later models, not '{model}'.",
                    param,
                )
        retention = body.get("prompt_cache_retention")
        if retention is not None and retention not in RETENTION_SECONDS:
            raise self.error(
                f"Invalid value for prompt_cache_retention: '{retention}'.", "prompt_cache_retention"
            )
        if isinstance(options, Mapping):
            if options.get("mode", "implicit") not in ("implicit", "explicit"):
                raise self.error(
                    "prompt_cache_options.mode must be 'implicit' or 'explicit'.", "prompt_cache_options.mode"
                )
            if "ttl" in options and options["ttl"] not in CHAT_REQUEST_TTLS:
                raise self.error("prompt_cache_options.ttl must be '30m'.", "prompt_cache_options.ttl")
            # §2.2 DISAGREE: the SDK calls the two independent, langchain4j says OpenAI rejects both.
            if "ttl" in options and retention is not None:
                raise self.error(
                    "prompt_cache_retention and prompt_cache_options.ttl cannot both be set; "
                    "use prompt_cache_options.ttl.",
                    "prompt_cache_retention",
                )
        for pos in marked:
            for marker in pos.markers:
                if marker.get("mode") != "explicit" or marker.get("ttl", "30m") not in BREAKPOINT_TTL_SECONDS:
                    raise self.error(
                        "prompt_cache_breakpoint must be {'mode': 'explicit'} with ttl '30m' or '12h'.",
                        f"{pos.path}.prompt_cache_breakpoint",
                    )

    def prompt_usage(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, reply: str, now: float
    ) -> tuple[int, dict[str, Any]]:
        model = str(body.get("model"))
        if supports_breakpoints(model):
            read, write = self._breakpoint_cache(body, prompt, now)
        else:
            read, write = self._automatic_cache(body, prompt, now), 0
        details = {"cached_tokens": read, "cache_write_tokens": write, "audio_tokens": 0}
        return prompt.total_tokens, {"prompt_tokens_details": details}

    def _automatic_cache(self, body: Mapping[str, Any], prompt: RenderedPrompt, now: float) -> int:
        """Pre-5.6: longest shared prefix, rounded down to 128, only from 1024 tokens."""
        total = prompt.total_tokens
        if total < MIN_PROMPT_TOKENS:
            return 0
        ttl = RETENTION_SECONDS[str(body.get("prompt_cache_retention") or "24h")]
        ns = (body.get("model"), body.get("prompt_cache_key"))
        with self._lock:
            tree = self._trees.setdefault(ns, PrefixTree())
            shared = tree.match(prompt.positions, now).tokens
            tree.insert(prompt.positions, now, ttl)
        hit = shared // HIT_INCREMENT * HIT_INCREMENT
        return hit if hit >= MIN_PROMPT_TOKENS else 0

    def _breakpoint_cache(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, now: float
    ) -> tuple[int, int]:
        """5.6+: read the longest entry that prefixes this prompt; write at this request's breakpoints."""
        raw_options = body.get("prompt_cache_options")
        options: Mapping[str, Any] = raw_options if isinstance(raw_options, Mapping) else {}
        mode = options.get("mode", "implicit")
        request_ttl = str(options.get("ttl", "30m"))
        explicit = [p for p in prompt.positions if p.markers]
        keep = 3 if mode == "implicit" else 4  # "latest three" / "latest four" explicit breakpoints
        chosen: list[tuple[Position, float]] = [
            (p, BREAKPOINT_TTL_SECONDS[str(p.markers[-1].get("ttl", request_ttl))]) for p in explicit[-keep:]
        ]
        if mode == "implicit":
            target = _implicit_target(prompt)
            if target is not None and target.cum_tokens >= MIN_PROMPT_TOKENS:
                chosen.append((target, BREAKPOINT_TTL_SECONDS[request_ttl]))
        elif not explicit:
            return 0, 0  # "If there are no explicit breakpoints, the request does not use prompt caching."
        ns = (
            body.get("model"),
            body.get("prompt_cache_key"),
            body.get("reasoning_effort"),
            body.get("verbosity"),
            dumps(body.get("response_format")),
        )
        with self._lock:
            read = 0
            for pos in prompt.positions:  # no content-block lookback limit
                entry = self._entries.get(ns, pos.hash, now)
                if entry is not None:
                    read = pos.cum_tokens
                    self._entries.touch(entry, now)
            furthest = read
            for pos, ttl in chosen:
                self._entries.put(ns, pos.hash, pos.cum_tokens, ttl, now)
                furthest = max(furthest, pos.cum_tokens)
        return read, furthest - read
