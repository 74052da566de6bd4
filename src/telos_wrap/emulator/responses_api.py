"""``POST /v1/responses`` (+ ``/input_tokens``, ``/compact``) on the openai, vllm and sglang flavours.

Shapes follow the installed ``openai`` SDK (``types/responses/response.py``, ``response_usage.py``,
``response_stream_event.py``, ``compacted_response.py``, ``input_token_count_response.py``).

* **Render** (what the cache sees): tools, then ``instructions`` as one system position, then every
  input item in order — a message's content parts, any other item as one position — rendered by the
  same chained-hash builder as chat (``render.render_chat``), so the flavour's cache rules apply as
  they are (docs/vendor-facts.md §2.1: the cached prefix is the rendered context, in this order).
* **Server-held state**: every response's full context (earlier items + this input + its output) is
  kept under its id; ``previous_response_id`` prepends it (``instructions`` are not carried over, SDK
  docstring), an unknown id is a 400. A ``conversation`` id accumulates items the same way.
* **Cache rules**: the flavour's own (``prompt_usage``), fed a chat-shaped view of the fields that
  partition the cache (``prompt_cache_key``/``_options``/``_retention``, ``reasoning.effort``,
  ``text.verbosity``, ``text.format`` — §2.3), and reported the Responses way:
  ``usage.input_tokens`` (inclusive) and ``input_tokens_details.cached_tokens`` /
  ``cache_write_tokens`` (vLLM's ``created_cache_tokens`` is its write count). A flavour whose usage
  flag is off (vLLM/SGLang config) omits ``input_tokens_details``.
* **Validation**: openai accepts only the fields the SDK's ``response_create_params`` declares, gates the
  5.6-only cache fields by model and allows ``ttl`` ``"30m"``/``"12h"``; vLLM accepts
  ``prompt_cache_options`` but rejects ``ttl: "12h"`` (§4.2); SGLang accepts everything.
* **Reply**: with a function tool offered (``tool_choice`` not ``"none"``) and a user message as the
  newest input item (system/developer items after it do not count), a ``function_call`` of the first
  function tool by name, with arguments built from its required properties; otherwise the
  deterministic text reply. Streams send the SDK's event sequence, ``response.created`` …
  ``response.completed`` (usage only on the last, §2.5).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .chat_flavour import ChatFlavour
from .errors import EmulatorHTTPError, openai_error
from .flavour_openai import BREAKPOINT_TTL_SECONDS, RETENTION_SECONDS, supports_breakpoints
from .render import RenderedPrompt, RenderMode, render_chat
from .tokens import estimate_tokens
from .windows import check_responses
from .wire import Handled, json_response, reply_text, split_words, sse_event, sse_response

__all__ = ["RESPONSES_FLAVOURS", "ResponsesAPI", "render_responses"]

#: The chat flavours that also serve ``/v1/responses`` (DeepSeek does not).
RESPONSES_FLAVOURS = frozenset({"openai", "vllm", "sglang"})
_REQUEST_TTLS = frozenset({"30m", "12h"})  # SDK Responses PromptCacheOptions.ttl
_VLLM_TTLS = frozenset({"30m"})  # vLLM's ResponsesRequest: ttl Literal["30m"] (§4.2)
_CALLER_OUTPUTS = ("_output", "mcp_approval_response")
_TEXT_PARTS = frozenset({"input_text", "output_text"})


def _typed_dict_keys(cls: type) -> frozenset[str]:
    return frozenset(getattr(cls, "__required_keys__", ())) | frozenset(getattr(cls, "__optional_keys__", ()))


#: The API's cache fields (docs/engines.md, "OpenAI Responses"): the server accepts them from any
#: client, whether or not the installed SDK's types declare them yet (openai 2.0 does not).
_CACHE_FIELDS = frozenset({"prompt_cache_key", "prompt_cache_retention", "prompt_cache_options"})


def _accepted_fields() -> frozenset[str]:
    try:
        from openai.types.responses import response_create_params
    except ImportError:  # an openai SDK from before the Responses API: no field check
        return frozenset()
    declared = _typed_dict_keys(response_create_params.ResponseCreateParamsStreaming) | _typed_dict_keys(
        response_create_params.ResponseCreateParamsNonStreaming
    )
    return declared | _CACHE_FIELDS


ACCEPTED_FIELDS = _accepted_fields()
"""Top-level request fields the installed SDK's ``response_create_params`` declares, plus the API's
cache fields (empty: unchecked)."""


def _item_role(item: Mapping[str, Any]) -> str:
    kind = str(item.get("type", ""))
    return "tool" if kind.endswith(_CALLER_OUTPUTS) else "assistant"


def _rendered_part(part: Any) -> Any:
    """An ``input_text`` / ``output_text`` part as the text the model sees (a plain ``text`` part)."""
    if isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
        return {**part, "type": "text"}
    return part


def _as_chat(items: Sequence[Any], instructions: Any, mode: RenderMode) -> list[dict[str, Any]]:
    """Input items as chat-shaped messages for the renderer (one position per non-message item).

    In ``rendered`` mode a text part is a ``text`` part whatever its Responses type, so a string
    ``content`` equals a one-part list, as for chat; ``byte-exact`` keeps the parts as sent.
    """
    messages: list[dict[str, Any]] = []
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    for item in items:
        if not isinstance(item, Mapping):
            continue
        if item.get("type", "message") == "message" and isinstance(item.get("role"), str):
            message = dict(item)
            content = message.get("content")
            if mode == "rendered" and isinstance(content, list):
                message["content"] = [_rendered_part(part) for part in content]
            messages.append(message)
        else:
            messages.append({"role": _item_role(item), "content": [dict(item)]})
    return messages


def render_responses(
    items: Sequence[Any], instructions: Any, tools: Any, *, mode: RenderMode = "rendered"
) -> RenderedPrompt:
    """Positions of a Responses request: tools, instructions, then the input items (see module docstring).

    ``mode`` is the emulator's render mode (docs/emulator.md, "Render modes"), as for chat.
    """
    return render_chat({"tools": tools, "messages": _as_chat(items, instructions, mode)}, mode=mode)


def _items(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def _partition_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-named fields the flavours' cache rules read (§2.3 lists them as miss reasons)."""
    reasoning = body.get("reasoning")
    text = body.get("text")
    return {
        "model": body.get("model"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "prompt_cache_options": body.get("prompt_cache_options"),
        "prompt_cache_retention": body.get("prompt_cache_retention"),
        "reasoning_effort": reasoning.get("effort") if isinstance(reasoning, Mapping) else None,
        "verbosity": text.get("verbosity") if isinstance(text, Mapping) else None,
        "response_format": text.get("format") if isinstance(text, Mapping) else None,
        "cache_salt": body.get("cache_salt"),
        "extra_key": body.get("extra_key"),
    }


def _arguments(tool: Mapping[str, Any]) -> str:
    parameters = tool.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    required = parameters.get("required") if isinstance(parameters, Mapping) else None
    values: dict[str, Any] = {}
    defaults = {"string": "emulated", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    for name in required if isinstance(required, list) else []:
        schema = properties.get(name) if isinstance(properties, Mapping) else None
        kind = schema.get("type") if isinstance(schema, Mapping) else "string"
        values[str(name)] = defaults.get(kind if isinstance(kind, str) else "string", "emulated")
    return json.dumps(values, separators=(",", ":"))


def _tool_to_call(body: Mapping[str, Any], items: Sequence[Any]) -> Mapping[str, Any] | None:
    """The function tool the reply calls, or ``None`` for a text reply (see module docstring)."""
    # The newest item that is not a system/developer message (an envelope item after the turn is context).
    turn = [
        item
        for item in items
        if not (isinstance(item, Mapping) and item.get("role") in ("system", "developer"))
    ]
    if body.get("tool_choice") == "none" or not turn:
        return None
    newest = turn[-1]
    if not (
        isinstance(newest, Mapping)
        and newest.get("role") == "user"
        and newest.get("type", "message") == "message"
    ):
        return None
    tools = body.get("tools")
    functions = (
        [t for t in tools if isinstance(t, Mapping) and t.get("type") == "function"]
        if isinstance(tools, list)
        else []
    )
    named = [t for t in functions if isinstance(t.get("name"), str)]
    return min(named, key=lambda t: str(t["name"])) if named else None


class ResponsesAPI:
    """The Responses endpoints in front of the chat flavours' caches (see module docstring)."""

    def __init__(self, next_id: Callable[[], int]) -> None:
        self._next_id = next_id
        self._lock = threading.Lock()
        self._contexts: dict[str, list[Any]] = {}
        self._conversations: dict[str, list[Any]] = {}

    def reset(self) -> None:
        """Forget stored responses and conversations."""
        with self._lock:
            self._contexts.clear()
            self._conversations.clear()

    # -- validation --------------------------------------------------------------------------------

    def _validate(self, flavour: ChatFlavour, body: Mapping[str, Any], prompt: RenderedPrompt) -> None:
        if not isinstance(body.get("model"), str):
            raise flavour.error("Missing required parameter: 'model'.", "model")
        raw = body.get("input")
        if raw is not None and not isinstance(raw, (str, list)):
            raise flavour.error(
                "Invalid type for 'input': expected a string or an array of input items.", "input"
            )
        if isinstance(raw, list) and not all(isinstance(item, Mapping) for item in raw):
            raise flavour.error("Invalid 'input': every input item must be an object.", "input")
        options = body.get("prompt_cache_options")
        ttl = options.get("ttl") if isinstance(options, Mapping) else None
        if flavour.name == "vllm":
            if ttl is not None and ttl not in _VLLM_TTLS:
                raise flavour.error(
                    "prompt_cache_options.ttl: Input should be '30m'", "prompt_cache_options.ttl"
                )
            flavour.validate(body, prompt)
            return
        if flavour.name != "openai":
            flavour.validate(body, prompt)
            return
        for key in body:
            if ACCEPTED_FIELDS and key not in ACCEPTED_FIELDS:
                raise flavour.error(f"Unrecognized request argument supplied: {key}")
        model = str(body["model"])
        marked = [p for p in prompt.positions if p.markers]
        if not supports_breakpoints(model) and (options is not None or marked):
            field = "prompt_cache_options" if options is not None else "prompt_cache_breakpoint"
            raise flavour.error(
                f"{field} is only supported for gpt-5.6 and later models, not '{model}'.", field
            )
        retention = body.get("prompt_cache_retention")
        if retention is not None and retention not in RETENTION_SECONDS:
            raise flavour.error(
                f"Invalid value for prompt_cache_retention: '{retention}'.", "prompt_cache_retention"
            )
        if ttl is not None and ttl not in _REQUEST_TTLS:
            raise flavour.error(
                "prompt_cache_options.ttl must be '30m' or '12h'.", "prompt_cache_options.ttl"
            )
        if ttl is not None and retention is not None:
            raise flavour.error(
                "prompt_cache_retention and prompt_cache_options.ttl cannot both be set; "
                "use prompt_cache_options.ttl.",
                "prompt_cache_retention",
            )
        for pos in marked:
            for marker in pos.markers:
                if marker.get("mode") != "explicit" or marker.get("ttl", "30m") not in BREAKPOINT_TTL_SECONDS:
                    raise flavour.error(
                        "prompt_cache_breakpoint must be {'mode': 'explicit'} with ttl '30m' or '12h'.",
                        f"{pos.path}.prompt_cache_breakpoint",
                    )

    # -- context ------------------------------------------------------------------------------------

    def _context(self, flavour: ChatFlavour, body: Mapping[str, Any]) -> tuple[list[Any], str | None]:
        """(every item the model sees, conversation id) — server-held items first."""
        earlier: list[Any] = []
        previous = body.get("previous_response_id")
        conversation = body.get("conversation")
        conversation_id = conversation.get("id") if isinstance(conversation, Mapping) else conversation
        with self._lock:
            if isinstance(previous, str):
                if previous not in self._contexts:
                    raise flavour.error(
                        f"Previous response with id '{previous}' not found.", "previous_response_id"
                    )
                earlier = list(self._contexts[previous])
            elif isinstance(conversation_id, str):
                earlier = list(self._conversations.get(conversation_id, []))
        return [*earlier, *_items(body.get("input"))], conversation_id if isinstance(
            conversation_id, str
        ) else None

    def _usage(
        self, flavour: ChatFlavour, body: Mapping[str, Any], prompt: RenderedPrompt, text: str, now: float
    ) -> dict[str, Any]:
        total, fields = flavour.prompt_usage(_partition_view(body), prompt, text, now)
        output = estimate_tokens(text)
        usage: dict[str, Any] = {
            "input_tokens": total,
            "output_tokens": output,
            "total_tokens": total + output,
        }
        details = fields.get("prompt_tokens_details")
        if isinstance(details, Mapping):
            write = details.get("cache_write_tokens", details.get("created_cache_tokens"))
            usage["input_tokens_details"] = {"cached_tokens": details.get("cached_tokens", 0)}
            if write is not None or flavour.name == "vllm":
                usage["input_tokens_details"]["cache_write_tokens"] = write or 0
        usage["output_tokens_details"] = {"reasoning_tokens": 0}
        return usage

    # -- endpoints ----------------------------------------------------------------------------------

    def create(self, flavour: ChatFlavour, body: Mapping[str, Any], now: float) -> Handled:
        """``POST /v1/responses``."""
        items, conversation = self._context(flavour, body)
        prompt = render_responses(items, body.get("instructions"), body.get("tools"), mode=flavour.mode)
        self._validate(flavour, body, prompt)
        refused = check_responses(str(body.get("model", "")), prompt.total_tokens, body.get("truncation"))
        if refused is not None:  # docs/vendor-facts.md §9.3
            raise refused
        number = self._next_id()
        response_id = f"resp_emu_{number}"
        tool = _tool_to_call(body, items)
        if tool is not None:
            arguments = _arguments(tool)
            output: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_emu_{number}",
                "call_id": f"call_emu_{number}",
                "name": tool["name"],
                "arguments": arguments,
                "status": "completed",
            }
            text = arguments
        else:
            max_tokens = body.get("max_output_tokens")
            text, _ = reply_text(max_tokens if isinstance(max_tokens, int) else None)
            output = {
                "type": "message",
                "id": f"msg_emu_{number}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
            }
        usage = self._usage(flavour, body, prompt, text, now)
        with self._lock:
            self._contexts[response_id] = [*items, output]
            if conversation is not None:
                self._conversations[conversation] = [*items, output]
        response = self._response(body, response_id, [output], usage)
        headers = (("x-request-id", f"req_emu_{number}"),)
        if body.get("stream"):
            reply = sse_response(_events(response, output), headers)
        else:
            reply = json_response(200, response, headers)
        return Handled(reply, usage=usage, response_id=response_id, model=str(body["model"]))

    def input_tokens(self, flavour: ChatFlavour, body: Mapping[str, Any]) -> Handled:
        """``POST /v1/responses/input_tokens``: a count; the cache is neither read nor written."""
        items, _ = self._context(flavour, body)
        prompt = render_responses(items, body.get("instructions"), body.get("tools"), mode=flavour.mode)
        return Handled(
            json_response(200, {"object": "response.input_tokens", "input_tokens": prompt.total_tokens})
        )

    def compact(self, flavour: ChatFlavour, body: Mapping[str, Any], now: float) -> Handled:
        """``POST /v1/responses/compact``: reads the prompt like a turn, answers one compaction item."""
        items, _ = self._context(flavour, body)
        prompt = render_responses(items, body.get("instructions"), body.get("tools"), mode=flavour.mode)
        self._validate(flavour, body, prompt)
        number = self._next_id()
        summary = f"compacted {len(items)} items"
        usage = self._usage(flavour, body, prompt, summary, now)
        output = {
            "type": "message",
            "id": f"msg_emu_{number}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": summary, "annotations": [], "logprobs": []}],
        }
        compacted_id = f"resp_emu_{number}"
        compacted = {
            "id": compacted_id,
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [output],
            "usage": usage,
        }
        return Handled(
            json_response(200, compacted), usage=usage, response_id=compacted_id, model=str(body["model"])
        )

    @staticmethod
    def _response(
        body: Mapping[str, Any], response_id: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed" if usage is not None else "in_progress",
            "model": body["model"],
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "instructions": body.get("instructions"),
            "previous_response_id": body.get("previous_response_id"),
            "prompt_cache_key": body.get("prompt_cache_key"),
            "store": body.get("store", True),
            "usage": usage,
        }


def _events(response: dict[str, Any], item: dict[str, Any]) -> list[bytes]:
    """The SDK's event sequence for one output item; usage only on ``response.completed``."""
    sequence = iter(range(1_000_000))
    pending = {**response, "status": "in_progress", "output": [], "usage": None}

    def event(kind: str, **fields: Any) -> bytes:
        return sse_event({"type": kind, "sequence_number": next(sequence), **fields}, event=kind)

    events = [event("response.created", response=pending), event("response.in_progress", response=pending)]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        started = {**item, "status": "in_progress", "content": []}
        events.append(event("response.output_item.added", output_index=0, item=started))
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        events.append(
            event(
                "response.content_part.added", item_id=item["id"], output_index=0, content_index=0, part=empty
            )
        )
        for piece in split_words(text):
            events.append(
                event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=0,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            )
        events.append(
            event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                text=text,
                logprobs=[],
            )
        )
        events.append(
            event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                part=item["content"][0],
            )
        )
    else:
        started = {**item, "status": "in_progress", "arguments": ""}
        events.append(event("response.output_item.added", output_index=0, item=started))
        events.append(
            event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=0,
                delta=item["arguments"],
            )
        )
        events.append(
            event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=0,
                arguments=item["arguments"],
                name=item["name"],
            )
        )
    events.append(event("response.output_item.done", output_index=0, item=item))
    events.append(event("response.completed", response=response))
    return events


def not_served(flavour: str) -> EmulatorHTTPError:
    """The 404 of a flavour that has no Responses endpoint."""
    return openai_error(f"The {flavour} flavour does not serve the Responses API.", status=404)
