"""Anthropic Messages endpoints: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

Response shapes follow the installed SDK: ``types/message.py`` (non-streaming) and the
``raw_message_*_event.py`` / ``raw_content_block_*_event.py`` stream events, in the order
message_start, content_block_start, ping, content_block_delta..., content_block_stop,
message_delta, message_stop (docs/vendor-facts.md §1.5, *Streaming*; ``ping`` is skipped by the SDK's
``Stream``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .anthropic_cache import AnthropicCache, AnthropicUsage
from .anthropic_diagnostics import FingerprintStore, diagnose, fingerprint
from .anthropic_rules import place_breakpoints
from .clock import Clock
from .context_editing import apply_edits
from .errors import anthropic_error
from .render import RenderedPrompt, RenderMode, render_anthropic
from .replies import Replier, count_tool_results
from .tokens import estimate_tokens
from .windows import check_anthropic
from .wire import Handled, json_response, reply_text, split_words, sse_event, sse_response


def _require(body: Mapping[str, Any], *, needs_max_tokens: bool) -> None:
    if not isinstance(body.get("model"), str):
        raise anthropic_error("model: Field required")
    if not isinstance(body.get("messages"), list):
        raise anthropic_error("messages: Field required")
    if needs_max_tokens:
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise anthropic_error("max_tokens: Field required")
        if max_tokens < 0:
            raise anthropic_error("max_tokens: Input should be greater than or equal to 0")


class AnthropicAPI:
    """The Anthropic flavour: its cache, its diagnostics fingerprints and its handlers."""

    def __init__(
        self,
        clock: Clock,
        next_id: Callable[[], int],
        min_tokens_overrides: Mapping[str, int] | None = None,
        replier: Replier | None = None,
    ) -> None:
        self._clock = clock
        self._replier = replier
        self._next_id = next_id
        self.cache = AnthropicCache(min_tokens_overrides)
        self._fingerprints = FingerprintStore()
        self.mode: RenderMode = "rendered"  # set by the Emulator (docs/emulator.md, "Render modes")

    def reset(self) -> None:
        """Forget cache entries and diagnostics fingerprints."""
        self.cache.reset()
        self._fingerprints.clear()

    def count_tokens(self, body: Mapping[str, Any]) -> Handled:
        """``/v1/messages/count_tokens`` -> ``{"input_tokens": N}`` (SDK message_tokens_count.py)."""
        _require(body, needs_max_tokens=False)
        prompt = render_anthropic(body, mode=self.mode)
        place_breakpoints(body, prompt.positions)  # same validation as create
        return Handled(json_response(200, {"input_tokens": prompt.total_tokens}), model=str(body["model"]))

    def create(self, body: Mapping[str, Any]) -> Handled:
        """``/v1/messages``: run the cache rules, then answer with a Message or an SSE stream."""
        _require(body, needs_max_tokens=True)
        now = self._clock.now()  # §1.2: the TTL clock starts at the start of the request
        prompt = render_anthropic(body, mode=self.mode)
        body, edits = apply_edits(body, prompt.total_tokens)  # server-side context editing
        applied = [e for e in edits or () if e.get("cleared_tool_uses") or e.get("cleared_thinking_turns")]
        if applied:
            prompt = render_anthropic(body, mode=self.mode)
        breakpoints = place_breakpoints(body, prompt.positions)
        check_anthropic(str(body["model"]), prompt.total_tokens)  # docs/vendor-facts.md §9.3
        usage = self.cache.process(str(body["model"]), prompt, breakpoints, now)
        message_id = f"msg_emu_{self._next_id()}"
        diagnostics = self._diagnostics(body, prompt, message_id)
        max_tokens = int(body["max_tokens"])
        # SDK docstring of max_tokens: 0 populates the prompt cache without generating a response.
        scripted = self._replier("anthropic", body) if self._replier is not None else None
        calls: list[dict[str, Any]] = []
        if scripted is None:
            text, truncated = reply_text(max_tokens)
            stop_reason = "max_tokens" if truncated else "end_turn"
        else:
            text, seed = scripted.text, count_tool_results("anthropic", body)
            calls = [
                {
                    "type": "tool_use",
                    "id": c.call_id("anthropic", f"{seed}:{i}"),
                    "name": c.name,
                    "input": dict(c.arguments),
                }
                for i, c in enumerate(scripted.tool_calls)
            ]
            stop_reason = "tool_use" if calls else "end_turn"
        output_tokens = estimate_tokens(text + "".join(json.dumps(c["input"]) for c in calls))
        message: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": ([{"type": "text", "text": text}] if text else []) + calls,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage.to_json(output_tokens),
        }
        if "diagnostics" in body:
            message["diagnostics"] = diagnostics
        if edits is not None:  # docs/vendor-facts.md §9.2
            message["context_management"] = {"applied_edits": applied}
        headers = (("request-id", f"req_emu_{message_id[8:]}"),)
        usage_json = message["usage"]
        if body.get("stream"):
            response = sse_response(_stream_events(message, usage, text, output_tokens, calls), headers)
        else:
            response = json_response(200, message, headers)
        return Handled(response, usage=usage_json, response_id=message_id, model=str(body["model"]))

    def _diagnostics(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, message_id: str
    ) -> dict[str, Any] | None:
        current = fingerprint(body, prompt)
        self._fingerprints.put(message_id, current)
        requested = body.get("diagnostics")
        if not isinstance(requested, Mapping):
            return None
        previous_id = requested.get("previous_message_id")
        if previous_id is None:  # first turn: opt in, nothing to compare
            return None
        return diagnose(self._fingerprints.get(str(previous_id)), current)


def _stream_events(
    message: Mapping[str, Any],
    usage: AnthropicUsage,
    text: str,
    output_tokens: int,
    calls: list[dict[str, Any]] | None = None,
) -> list[bytes]:
    """The SSE event sequence of one streamed message."""
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": usage.to_json(min(1, output_tokens)),
    }
    events = [sse_event({"type": "message_start", "message": start}, "message_start")]
    if text:
        events.append(
            sse_event(
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                "content_block_start",
            )
        )
        events.append(sse_event({"type": "ping"}, "ping"))
        for piece in split_words(text):
            delta = {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            }
            events.append(sse_event(delta, "content_block_delta"))
        events.append(sse_event({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    for index, call in enumerate(calls or (), start=1 if text else 0):
        # A tool_use block starts with empty input; its JSON arrives as input_json_delta pieces.
        start_block = {**call, "input": {}}
        events.append(
            sse_event(
                {"type": "content_block_start", "index": index, "content_block": start_block},
                "content_block_start",
            )
        )
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call["input"])}
        events.append(
            sse_event({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
        )
        events.append(sse_event({"type": "content_block_stop", "index": index}, "content_block_stop"))
    # message_delta usage is cumulative and has no cache_creation breakdown (message_delta_usage.py).
    delta_usage = {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": output_tokens,
    }
    events.append(
        sse_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": delta_usage,
            },
            "message_delta",
        )
    )
    events.append(sse_event({"type": "message_stop"}, "message_stop"))
    return events
