"""In-process emulator of vendor prompt caches behind the real HTTP APIs.

Run the official ``anthropic`` / ``openai`` SDKs against it with no network and no API key::

    from telos_wrap.emulator import Emulator, emulator_http_client
    emu = Emulator()
    client = anthropic.Anthropic(api_key="x", http_client=emulator_http_client(emu, "anthropic"))

or over real local HTTP with :func:`serve`.  See docs/emulator.md for the rules emulated.
"""

from __future__ import annotations

from .clock import Clock, ManualClock, SystemClock
from .emulator import BASE_PATHS, CHAT_FLAVOURS, FLAVOURS, KNOWN_HOSTS, Emulator, Flavour, RequestRecord
from .errors import EmulatorHTTPError
from .flavour_sglang import SGLangConfig
from .flavour_vllm import VLLMConfig
from .render import RENDER_MODES, RenderMode
from .replies import Replier, Reply, ToolCall, count_tool_results, script, tool_loop
from .server import flavour_base_url, serve
from .tokens import BYTES_PER_TOKEN, estimate_tokens, text_for_tokens
from .transport import (
    AsyncEmulatorTransport,
    EmulatorTransport,
    emulator_http_client,
    emulator_transport,
    sdk_http_library,
)
from .wire import REPLY_TEXT, EmulatorResponse

__all__ = [
    "BASE_PATHS",
    "BYTES_PER_TOKEN",
    "CHAT_FLAVOURS",
    "FLAVOURS",
    "KNOWN_HOSTS",
    "RENDER_MODES",
    "REPLY_TEXT",
    "AsyncEmulatorTransport",
    "Clock",
    "Emulator",
    "EmulatorHTTPError",
    "EmulatorResponse",
    "EmulatorTransport",
    "Flavour",
    "ManualClock",
    "RenderMode",
    "Replier",
    "Reply",
    "RequestRecord",
    "SGLangConfig",
    "SystemClock",
    "ToolCall",
    "VLLMConfig",
    "count_tool_results",
    "emulator_http_client",
    "emulator_transport",
    "estimate_tokens",
    "flavour_base_url",
    "script",
    "sdk_http_library",
    "serve",
    "text_for_tokens",
    "tool_loop",
]
