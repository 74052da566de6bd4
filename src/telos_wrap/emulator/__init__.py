"""In-process emulator of vendor prompt caches behind the real HTTP APIs.

Run the official ``anthropic`` / ``openai`` SDKs against it with no network and no API key::

    from telos_wrap.emulator import Emulator, EmulatorTransport
    emu = Emulator()
    client = anthropic.Anthropic(api_key="x", http_client=httpx2.Client(transport=EmulatorTransport(emu)))

or over real local HTTP with :func:`serve`.  See docs/emulator.md for the rules emulated.
"""

from __future__ import annotations

from .clock import Clock, ManualClock, SystemClock
from .emulator import CHAT_FLAVOURS, FLAVOURS, KNOWN_HOSTS, Emulator, Flavour, RequestRecord
from .errors import EmulatorHTTPError
from .flavour_sglang import SGLangConfig
from .flavour_vllm import VLLMConfig
from .render import RENDER_MODES, RenderMode
from .server import serve
from .tokens import BYTES_PER_TOKEN, estimate_tokens, text_for_tokens
from .transport import AsyncEmulatorTransport, EmulatorTransport
from .wire import REPLY_TEXT, EmulatorResponse

__all__ = [
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
    "RequestRecord",
    "SGLangConfig",
    "SystemClock",
    "VLLMConfig",
    "estimate_tokens",
    "serve",
    "text_for_tokens",
]
