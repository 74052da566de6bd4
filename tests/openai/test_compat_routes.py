"""Automatic-caching routes over the OpenAI wire, through the real ``openai`` client, in cassettes.

Gemini's OpenAI endpoint, xAI, Groq, Moonshot, Together and Fireworks (docs/engines.md, *Routes*):
telos recognises none of these hosts specially, so each gets the ``generic`` engine — canonical bytes,
no field added — and ``usage_of()`` reads the cached tokens wherever the route reports them
(``prompt_tokens_details.cached_tokens``, Moonshot's flat ``usage.cached_tokens``, or nothing at all:
``None``). Each client is pointed at the route's real base URL (so the engine comes from its host, as
for a user); ``EmulatorRedirect`` moves every request to the emulator's flavour of that route
(``flavour_compat``), served on 127.0.0.1, and vcrpy records the exchange.

Re-record (delete the stale cassettes first):

    python -m pytest tests/openai/test_compat_routes.py --record-mode=once
"""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

import telos_wrap
from telos_wrap.config import PatchConfig
from telos_wrap.ir.hints import TelosHints
from telos_wrap.patch.routing import resolve_openai_engine
from telos_wrap.pipeline import PrepareOptions, prepare

from .conftest import Endpoint, HttpWire

#: route → (its base URL, a model it serves, where its usage reports the read)
ROUTES: dict[str, tuple[str, str, str]] = {
    "gemini": ("https://generativelanguage.googleapis.com/v1beta/openai", "gemini-2.5-flash", "on-hit"),
    "xai": ("https://api.x.ai/v1", "grok-4", "details"),
    "groq": ("https://api.groq.com/openai/v1", "moonshotai/kimi-k2-instruct-0905", "details"),
    "moonshot": ("https://api.moonshot.ai/v1", "kimi-k2-0905-preview", "flat"),
    "together": ("https://api.together.xyz/v1", "deepseek-ai/DeepSeek-V3.1", "details"),
    "fireworks": (
        "https://api.fireworks.ai/inference/v1",
        "accounts/fireworks/models/kimi-k2-instruct",
        "details",
    ),
}

SYSTEM = "You are a careful agent.\n" + "".join(
    f"Rule {i}: keep replies short and cite the file you read.\n" for i in range(120)
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}},
                "required": ["path", "lines"],
            },
        },
    }
]


def _turns() -> list[dict[str, Any]]:
    """Two requests of one conversation: the second extends the first."""
    first: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What does setup.py do?"},
    ]
    second = [
        *first,
        {"role": "assistant", "content": "It builds the package."},
        {"role": "user", "content": "And pyproject.toml?"},
    ]
    return [first, second]


@pytest.mark.parametrize("route", list(ROUTES))
def test_route_hosts_get_the_generic_engine(route: str) -> None:
    """No network: the host alone decides, and none of these is a host telos adds fields for."""
    base_url = ROUTES[route][0]
    assert resolve_openai_engine(base_url, TelosHints(), PatchConfig()) == "generic"
    assert resolve_openai_engine(base_url + "/", TelosHints(), PatchConfig()) == "generic"


def _expected_read(shape: str, usage: dict[str, Any]) -> int | None:
    """The read as the route's own field states it; ``None`` when the route sent no cache field."""
    if shape == "flat":
        assert "prompt_tokens_details" not in usage
        return int(usage["cached_tokens"])
    if shape == "on-hit" and "prompt_tokens_details" not in usage:
        assert "cached_tokens" not in usage
        return None
    assert "cached_tokens" not in usage
    return int(usage["prompt_tokens_details"]["cached_tokens"])


@pytest.mark.vcr
@pytest.mark.usefixtures("patched")
@pytest.mark.parametrize("route", list(ROUTES))
def test_route_through_the_openai_client(route: str, http_wire: HttpWire, vcr: Any) -> None:
    base_url, model, shape = ROUTES[route]
    client = http_wire.client(Endpoint("generic", base_url, model))
    reads: list[int | None] = []
    for messages in _turns():
        kwargs = {"model": model, "messages": messages, "tools": copy.deepcopy(TOOLS)}
        before = copy.deepcopy(kwargs)
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        assert kwargs == before, "the caller's arguments must not be mutated"
        completion = raw.parse()
        usage = raw.http_response.json()["usage"]

        # What went out: the generic engine's canonical bytes, key order included inside the prompt
        # (the top-level fields keep the order the SDK gives them, which differs between SDK lines).
        sent = http_wire.sent[-1]
        generic = prepare("openai_chat", kwargs, PrepareOptions(engine="generic", only_what_pays=True)).body
        body = json.loads(sent.content)
        assert body == generic
        for field in ("messages", "tools"):
            assert json.dumps(body[field]) == json.dumps(generic[field]), field
        assert sent.url.path == f"/{route}{urlsplit(base_url).path}/chat/completions"

        # What usage_of() reads: exactly the route's own figures, None where it reports nothing.
        report = telos_wrap.usage_of(completion)
        assert report is not None and report.engine == "generic"
        read = _expected_read(shape, usage)
        assert report.cache_read == read
        assert report.cache_write == (None if read is None else 0)  # no route reports a write counter
        assert report.raw_input == usage["prompt_tokens"] - (read or 0)
        assert report.output == usage["completion_tokens"]
        reads.append(read)

    # The first request primes the cache, the second reads the shared prefix (so the figures mean
    # something): Gemini's endpoint sends no cache field on the miss.
    assert reads[0] == (None if shape == "on-hit" else 0)
    assert reads[1] is not None and reads[1] >= 1024
    assert len(vcr.requests) == 2
    if vcr.rewound:
        assert vcr.play_count == 2 and vcr.all_played
