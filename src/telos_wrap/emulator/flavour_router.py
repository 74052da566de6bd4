"""OpenAI-compatible routers in front of Claude: OpenRouter and a LiteLLM proxy (docs/engines.md, *Routes*).

A router takes a Chat Completions request and, for a Claude model, sends the Anthropic Messages API
its translation; the prompt cache is then Anthropic's own: written only at ``cache_control``
breakpoints, read by a 20-position lookback, per model, with Anthropic's minimums and TTLs
(``anthropic_cache``). The translation (what both routers document or do, cited in docs/engines.md):

* every ``system`` / ``developer`` message, wherever it stands, becomes a block of the Anthropic
  ``system`` prompt, in order (LiteLLM ``AnthropicConfig.translate_system_message``);
* tools become Anthropic tools (``function.parameters`` → ``input_schema``), a tool's own
  ``cache_control`` kept;
* an assistant message's text becomes text blocks, its ``tool_calls`` ``tool_use`` blocks (the
  arguments parsed as JSON);
* a ``tool`` message becomes a ``tool_result`` block; consecutive user and tool messages merge into one
  Anthropic user message, consecutive assistant messages into one assistant message;
* a part-level ``cache_control`` stays on the block the part becomes, and a message-level one goes on
  its last block. **Quirk, per router:** on a ``tool`` message's text part, OpenRouter moves the
  marker onto the ``tool_result`` block; a LiteLLM proxy copies the parts verbatim into the
  ``tool_result``'s content, marker included (LiteLLM ``convert_to_anthropic_tool_result``) — the
  Messages API accepts a marker there too, and the cache entry ends at the ``tool_result`` either way.

Usage, in the Chat Completions shape (``prompt_tokens`` includes what was read and written):

* OpenRouter: ``prompt_tokens_details.cached_tokens`` (read) and ``.cache_write_tokens`` (write);
* LiteLLM proxy: ``prompt_tokens_details.cached_tokens`` and ``.cache_creation_tokens``, plus its
  top-level ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` (LiteLLM
  ``AnthropicConfig.calculate_usage``).

Any other model behind the router caches automatically, as the OpenAI flavour does (docs/vendor-facts.md §2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from .anthropic_cache import AnthropicCache, AnthropicUsage
from .anthropic_rules import place_breakpoints
from .chat_flavour import ChatFlavour
from .errors import EmulatorHTTPError, openai_error
from .flavour_openai import OpenAIFlavour
from .render import RenderedPrompt, render_anthropic

__all__ = ["LiteLLMProxyFlavour", "OpenRouterFlavour", "RouterFlavour", "chat_to_messages", "is_claude"]

Router = Literal["openrouter", "litellm"]


def is_claude(model: object) -> bool:
    """A Claude model by any router's name for it (``anthropic/claude-sonnet-4.5``, ``claude-fast``)."""
    return isinstance(model, str) and "claude" in model.lower()


def anthropic_model(model: str) -> str:
    """The Anthropic id behind a router's name: ``anthropic/claude-sonnet-4.5`` → ``claude-sonnet-4-5``."""
    return model.rsplit("/", 1)[-1].replace(".", "-")


def _text_blocks(content: Any, marker: Any) -> list[dict[str, Any]]:
    """A message's content as Anthropic blocks; ``marker`` (message-level) goes on the last one."""
    if isinstance(content, str):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    elif isinstance(content, list):
        blocks = []
        for part in content:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, Mapping) else image
                block: dict[str, Any] = {"type": "image", "source": {"type": "url", "url": url}}
            elif part.get("type") == "text":
                block = {"type": "text", "text": part.get("text")}
            else:
                block = dict(part)
            if part.get("cache_control") is not None:
                block["cache_control"] = part["cache_control"]
            blocks.append(block)
    else:
        blocks = []
    if marker is not None and blocks:
        blocks[-1] = {**blocks[-1], "cache_control": marker}
    return blocks


def _tool_result(message: Mapping[str, Any], router: Router) -> dict[str, Any]:
    content = message.get("content")
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.get("tool_call_id")}
    marker = message.get("cache_control")
    if isinstance(content, list):
        parts = _text_blocks(content, None)
        if router == "openrouter":
            # OpenRouter: a marker on a part of the tool message goes on the tool_result itself.
            for part in parts:
                if "cache_control" in part:
                    marker = part.pop("cache_control")
        result["content"] = parts
    else:
        result["content"] = content if isinstance(content, str) else ""
    if marker is not None:
        result["cache_control"] = marker
    return result


def _tool_uses(calls: Any) -> list[dict[str, Any]]:
    uses = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {}
        uses.append(
            {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments}
        )
    return uses


def chat_to_messages(body: Mapping[str, Any], router: Router) -> dict[str, Any]:
    """The Anthropic Messages body a router sends for a Chat Completions ``body`` (module docstring)."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role in ("system", "developer"):
            system.extend(_text_blocks(message.get("content"), message.get("cache_control")))
            continue
        if role == "assistant":
            side = "assistant"
            blocks = _text_blocks(message.get("content"), message.get("cache_control"))
            blocks += _tool_uses(message.get("tool_calls"))
        elif role in ("tool", "function"):
            side, blocks = "user", [_tool_result(message, router)]
        else:
            side, blocks = "user", _text_blocks(message.get("content"), message.get("cache_control"))
        if turns and turns[-1]["role"] == side:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": side, "content": blocks})
    tools = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        converted: dict[str, Any] = {
            "name": function.get("name"),
            "input_schema": function.get("parameters") or {},
        }
        if function.get("description") is not None:
            converted["description"] = function["description"]
        if tool.get("cache_control") is not None:
            converted["cache_control"] = tool["cache_control"]
        tools.append(converted)
    anthropic: dict[str, Any] = {"model": anthropic_model(str(body.get("model"))), "messages": turns}
    if system:
        anthropic["system"] = system
    if tools:
        anthropic["tools"] = tools
    return anthropic


class RouterFlavour(ChatFlavour):
    """A router: Claude models through an Anthropic cache of its own, other models like OpenAI's."""

    router: ClassVar[Router]

    def __init__(self) -> None:
        super().__init__()
        self.cache = AnthropicCache()
        self.automatic = OpenAIFlavour()

    def reset(self) -> None:
        self.cache.reset()
        self.automatic.reset()

    def _translated(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], RenderedPrompt]:
        anthropic = chat_to_messages(body, self.router)
        return anthropic, render_anthropic(anthropic, mode=self.mode)

    def validate(self, body: Mapping[str, Any], prompt: RenderedPrompt) -> None:
        if not is_claude(body.get("model")):
            self.automatic.mode = self.mode
            self.automatic.validate(body, prompt)
            return
        anthropic, rendered = self._translated(body)
        try:
            place_breakpoints(anthropic, rendered.positions)
        except EmulatorHTTPError as err:  # the upstream's 400, passed on in the router's own shape
            detail = err.body.get("error", {})
            raise openai_error(str(detail.get("message") if isinstance(detail, Mapping) else err)) from None

    def prompt_usage(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, reply: str, now: float
    ) -> tuple[int, dict[str, Any]]:
        if not is_claude(body.get("model")):
            return self.automatic.prompt_usage(body, prompt, reply, now)
        anthropic, rendered = self._translated(body)
        with self._lock:
            usage = self.cache.process(
                anthropic["model"], rendered, place_breakpoints(anthropic, rendered.positions), now
            )
        return rendered.total_tokens, self._usage_fields(usage)

    def _usage_fields(self, usage: AnthropicUsage) -> dict[str, Any]:
        read, write = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
        if self.router == "openrouter":
            return {"prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write}}
        return {
            "prompt_tokens_details": {"cached_tokens": read, "cache_creation_tokens": write},
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }


class OpenRouterFlavour(RouterFlavour):
    """``openrouter.ai/api/v1``: a tool message's part marker moves onto its ``tool_result``."""

    name = "openrouter"
    router = "openrouter"


class LiteLLMProxyFlavour(RouterFlavour):
    """A LiteLLM proxy: a tool message's parts, marker and all, go inside its ``tool_result``."""

    name = "litellm"
    router = "litellm"
