"""The :class:`Emulator`: one prefix cache per vendor flavour, request routing, request log."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from .anthropic_api import AnthropicAPI
from .chat_flavour import ChatFlavour
from .clock import Clock, SystemClock
from .clouds import cloud_messages_path
from .errors import EmulatorHTTPError, anthropic_error, openai_error
from .flavour_compat import (
    FireworksFlavour,
    GeminiFlavour,
    GroqFlavour,
    MoonshotFlavour,
    TogetherFlavour,
    XAIFlavour,
)
from .flavour_deepseek import DeepSeekFlavour
from .flavour_openai import OpenAIFlavour
from .flavour_router import LiteLLMProxyFlavour, OpenRouterFlavour
from .flavour_sglang import SGLangConfig, SGLangFlavour
from .flavour_vllm import VLLMConfig, VLLMFlavour
from .openai_compat import handle_chat
from .render import RenderMode, check_mode
from .replies import Replier
from .responses_api import RESPONSES_FLAVOURS, ResponsesAPI, not_served
from .wire import EmulatorResponse, Handled, json_response

#: Automatic-caching vendors telos serves with its ``generic`` engine (``flavour_compat``).
CompatChatFlavour = Literal["gemini", "xai", "groq", "moonshot", "together", "fireworks"]
#: Every flavour served on the OpenAI chat wire (``/v1/chat/completions``).
ChatFlavourName = Literal["openai", "deepseek", "vllm", "sglang", "openrouter", "litellm", CompatChatFlavour]
#: Every flavour the emulator serves. The Literals are the one list; the tuples below are read from
#: them (``typing.get_args`` flattens a nested Literal, in order), so the two cannot drift apart.
Flavour = Literal["anthropic", ChatFlavourName]
COMPAT_CHAT_FLAVOURS: tuple[Flavour, ...] = get_args(CompatChatFlavour)
CHAT_FLAVOURS: tuple[Flavour, ...] = get_args(ChatFlavourName)
FLAVOURS: tuple[Flavour, ...] = get_args(Flavour)

KNOWN_HOSTS: Mapping[str, Flavour] = {
    "api.anthropic.com": "anthropic",
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "openrouter.ai": "openrouter",
    "generativelanguage.googleapis.com": "gemini",
    "api.x.ai": "xai",
    "api.groq.com": "groq",
    "api.moonshot.ai": "moonshot",
    "api.together.xyz": "together",
    "api.fireworks.ai": "fireworks",
}
"""Built-in host -> flavour mapping used by the in-process transport."""

BASE_PATHS: Mapping[Flavour, str] = {
    "anthropic": "",
    "openai": "/v1",
    "deepseek": "/v1",
    "vllm": "/v1",
    "sglang": "/v1",
    "openrouter": "/api/v1",
    "litellm": "/v1",
    "gemini": "/v1beta/openai",
    "xai": "/v1",
    "groq": "/openai/v1",
    "moonshot": "/v1",
    "together": "/v1",
    "fireworks": "/inference/v1",
}
"""Each flavour's base path on the vendor's own host (``openai.OpenAI(base_url=...)``'s path): the
local server (:func:`~telos_wrap.emulator.serve`) serves chat flavour NAME at ``{url}/NAME`` + this
path, which ``telos-wrap emulator`` prints. The emulator answers any path ending in
``/chat/completions`` under ``{url}/NAME``; these are the ones a client copied from the vendor's docs
uses (Gemini ``/v1beta/openai``, Groq ``/openai/v1``, Fireworks ``/inference/v1``, OpenRouter
``/api/v1``)."""


def _check_flavour(name: str, allowed: tuple[Flavour, ...] = FLAVOURS) -> Flavour:
    for flavour in allowed:
        if flavour == name:
            return flavour
    raise ValueError(f"unknown flavour {name!r}; expected one of {', '.join(allowed)}")


@dataclass(frozen=True)
class RequestRecord:
    """One request the emulator handled (successful or rejected)."""

    method: str
    url: str
    path: str
    flavour: Flavour
    body: Any  # the decoded JSON body (None if it was not JSON)
    status: int
    usage: dict[str, Any] | None  # the usage object returned, None for errors / count_tokens
    response_id: str | None
    model: str | None
    error: dict[str, Any] | None  # the error body for status >= 400


class Emulator:
    """In-process emulation of the vendors' prompt caches behind their HTTP APIs.

    Args:
        clock: time source for TTLs (default :class:`SystemClock`; use :class:`ManualClock` in tests).
        default_openai_flavour: flavour for ``/chat/completions`` on hosts that are neither
            built in (:data:`KNOWN_HOSTS`) nor in ``routes``.
        routes: extra ``{host_or_base_url: flavour}`` mappings; a key containing ``://`` matches
            URLs starting with it (longest wins), otherwise it matches ``host`` or ``host:port``.
        vllm / sglang: server flags of those flavours.
        anthropic_min_tokens: overrides of the per-model minimum cacheable length.
        mode: ``"rendered"`` (default) compares prompts as the vendor renders them;
            ``"byte-exact"`` as a cache keyed on the request bytes would (cache markers aside).
            Applies to every flavour; settable later (``emu.mode = "byte-exact"``). See
            docs/emulator.md, "Render modes".
        replier: scripts what the model answers (text and tool calls) from the request; the fixed
            :data:`REPLY_TEXT` when ``None`` (:mod:`telos_wrap.emulator.replies`).
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        default_openai_flavour: str = "openai",
        routes: Mapping[str, str] | None = None,
        vllm: VLLMConfig | None = None,
        sglang: SGLangConfig | None = None,
        anthropic_min_tokens: Mapping[str, int] | None = None,
        mode: str = "rendered",
        replier: Replier | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self._default: Flavour = _check_flavour(default_openai_flavour, CHAT_FLAVOURS)
        self.routes: dict[str, Flavour] = {k: _check_flavour(v) for k, v in (routes or {}).items()}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._log: list[RequestRecord] = []
        self.anthropic = AnthropicAPI(self.clock, self._next_id, anthropic_min_tokens, replier)
        self.replier = replier
        self.chat: dict[Flavour, ChatFlavour] = {
            "openai": OpenAIFlavour(),
            "deepseek": DeepSeekFlavour(),
            "vllm": VLLMFlavour(vllm),
            "sglang": SGLangFlavour(sglang),
            "openrouter": OpenRouterFlavour(),
            "litellm": LiteLLMProxyFlavour(),
            "gemini": GeminiFlavour(),
            "xai": XAIFlavour(),
            "groq": GroqFlavour(),
            "moonshot": MoonshotFlavour(),
            "together": TogetherFlavour(),
            "fireworks": FireworksFlavour(),
        }
        #: ``/v1/responses`` in front of the openai, vllm and sglang caches (``responses_api``).
        self.responses = ResponsesAPI(self._next_id)
        self.mode = mode

    @property
    def mode(self) -> RenderMode:
        """How every flavour compares prompts: ``"rendered"`` or ``"byte-exact"``."""
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        self._mode: RenderMode = check_mode(value)
        self.anthropic.mode = self._mode
        for flavour in self.chat.values():
            flavour.mode = self._mode

    @property
    def replier(self) -> Replier | None:
        """What the model answers on Messages and Chat Completions (``None``: the fixed text)."""
        return self._replier

    @replier.setter
    def replier(self, value: Replier | None) -> None:
        self._replier = value
        self.anthropic._replier = value

    @property
    def default_openai_flavour(self) -> Flavour:
        """Flavour for chat requests to unknown hosts."""
        return self._default

    @default_openai_flavour.setter
    def default_openai_flavour(self, value: str) -> None:
        self._default = _check_flavour(value, CHAT_FLAVOURS)

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the handled requests, oldest first."""
        with self._lock:
            return list(self._log)

    def reset(self) -> None:
        """Empty every cache and the request log (ids keep counting)."""
        self.anthropic.reset()
        for flavour in self.chat.values():
            flavour.reset()
        self.responses.reset()
        with self._lock:
            self._log.clear()

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def flavour_for_url(self, url: str) -> Flavour:
        """Flavour that serves ``/chat/completions`` at ``url`` (routes, known hosts, default)."""
        base_matches = [k for k in self.routes if "://" in k and url.startswith(k.rstrip("/"))]
        if base_matches:  # routes may be edited in place, so re-check the value
            return _check_flavour(self.routes[max(base_matches, key=len)])
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        for key in (parts.netloc.lower(), host):
            if key in self.routes:
                return _check_flavour(self.routes[key])
        return KNOWN_HOSTS.get(host, self._default)

    def handle(self, method: str, url: str, body: bytes, *, flavour: str | None = None) -> EmulatorResponse:
        """Answer one HTTP request.  ``flavour`` forces the chat flavour (used by the server)."""
        path = urlsplit(url).path.rstrip("/")
        cloud = cloud_messages_path(path)  # Claude on Bedrock / Vertex AI (``clouds``)
        if cloud is not None:
            path = cloud[0]
        is_messages = path.endswith(("/messages", "/messages/count_tokens"))
        if is_messages:
            chosen: Flavour = "anthropic"
        elif flavour is not None:
            chosen = _check_flavour(flavour)
        else:
            chosen = self.flavour_for_url(url)
        decoded: Any = None
        try:
            try:
                decoded = json.loads(body) if body else None
            except ValueError as exc:
                raise _error(chosen, f"The request body is not valid JSON: {exc}") from None
            if cloud is not None and cloud[1] is not None and isinstance(decoded, dict):
                decoded = {**decoded, "model": cloud[1]}  # the cloud names the model in the URL
            handled = self._dispatch(method, path, chosen, decoded)
        except EmulatorHTTPError as err:
            handled = Handled(json_response(err.status, err.body))
        record = RequestRecord(
            method=method.upper(),
            url=url,
            path=path,
            flavour=chosen,
            body=decoded,
            status=handled.response.status,
            usage=handled.usage,
            response_id=handled.response_id,
            model=handled.model,
            error=handled.response.json() if handled.response.status >= 400 else None,
        )
        with self._lock:
            self._log.append(record)
        return handled.response

    def _dispatch(self, method: str, path: str, flavour: Flavour, body: Any) -> Handled:
        if method.upper() != "POST":
            raise _error(flavour, f"{method} {path} is not supported", status=404)
        if not isinstance(body, Mapping):
            raise _error(flavour, "The request body must be a JSON object.")
        if path.endswith("/messages/count_tokens"):
            return self.anthropic.count_tokens(body)
        if path.endswith("/messages"):
            return self.anthropic.create(body)
        if path.endswith("/chat/completions") and flavour != "anthropic":
            return handle_chat(self.chat[flavour], body, self.clock.now(), self._next_id, self._replier)
        if (
            path.endswith(("/responses", "/responses/input_tokens", "/responses/compact"))
            and flavour != "anthropic"
        ):
            if flavour not in RESPONSES_FLAVOURS:
                raise not_served(flavour)
            chat = self.chat[flavour]
            if path.endswith("/input_tokens"):
                return self.responses.input_tokens(chat, body)
            if path.endswith("/compact"):
                return self.responses.compact(chat, body, self.clock.now())
            return self.responses.create(chat, body, self.clock.now())
        raise _error(flavour, f"Unknown path {path}", status=404)


def _error(flavour: Flavour, message: str, status: int = 400) -> EmulatorHTTPError:
    """An error in the shape of the API that ``flavour`` speaks."""
    if flavour == "anthropic":
        return anthropic_error(
            message, status=status, kind="not_found_error" if status == 404 else "invalid_request_error"
        )
    return openai_error(message, status=status)
