"""The emulator's two render modes, for every flavour, through the real SDKs.

``rendered`` compares prompts as the vendor renders them; ``byte-exact`` as a cache keyed on the
request bytes would (cache markers aside). Each test sends a first request that writes the cache,
then a second one that differs only in how the same prompt is serialized, and reads the second
request's cache reads from the usage the SDK parsed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from telos_wrap.emulator import RENDER_MODES, Emulator, ManualClock, text_for_tokens
from telos_wrap.emulator.render import render_anthropic, render_chat
from tests.sdk_http import EmulatorTransport, sdk_http

LONG = text_for_tokens(3000)  # above every flavour's minimum (OpenAI: 1024)
CHAT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "deepseek": "https://api.deepseek.com",
    "vllm": "http://vllm.test/v1",
    "sglang": "http://sglang.test/v1",
}
FLAVOURS = ("anthropic", *CHAT_BASE_URLS)


class Sender:
    """One emulator in ``mode`` and a real SDK client of ``flavour`` on it; ``send`` returns reads."""

    def __init__(self, flavour: str, mode: str) -> None:
        self.flavour = flavour
        self.emu = Emulator(
            clock=ManualClock(), mode=mode, routes={"vllm.test": "vllm", "sglang.test": "sglang"}
        )
        http = sdk_http.Client(transport=EmulatorTransport(self.emu))
        self.client: Any
        if flavour == "anthropic":
            self.client = anthropic.Anthropic(api_key="x", http_client=http, max_retries=0)
        else:
            self.client = openai.OpenAI(
                api_key="x", base_url=CHAT_BASE_URLS[flavour], http_client=http, max_retries=0
            )

    def send(self, messages: list[dict[str, Any]], **kwargs: Any) -> int:
        if self.flavour == "anthropic":
            # Automatic caching: the breakpoint goes on the last block without touching its shape.
            response = self.client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=8,
                messages=messages,
                cache_control={"type": "ephemeral"},
                **kwargs,
            )
            return int(response.usage.cache_read_input_tokens or 0)
        response = self.client.chat.completions.create(
            model="gpt-4o", max_tokens=8, messages=messages, **kwargs
        )
        details = response.usage.prompt_tokens_details
        return int(details.cached_tokens or 0) if details is not None else 0


@pytest.fixture(params=[(f, m) for f in FLAVOURS for m in RENDER_MODES], ids=lambda p: f"{p[0]}-{p[1]}")
def sender(request: pytest.FixtureRequest) -> Iterator[Sender]:
    flavour, mode = request.param
    made = Sender(flavour, mode)
    yield made
    made.client.close()


def _turns(first_content: Any) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": first_content},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "And now?"},
    ]


def test_string_content_vs_one_text_part(sender: Sender) -> None:
    """The modes disagree on purpose here.

    The SDKs document a string ``content`` as shorthand for one text block, so the vendor renders
    the same prompt either way and the rendered mode reads the long first message from cache. A
    cache keyed on the request bytes sees ``"content": "..."`` and ``"content": [{"type": "text",
    ...}]`` as different bytes from the first message on, so the byte-exact mode reads nothing.
    """
    sender.send(_turns(LONG))
    reads = sender.send(_turns([{"type": "text", "text": LONG}]))
    if sender.emu.mode == "rendered":
        assert reads >= 2900, reads
    else:
        assert reads == 0, reads


def test_identical_bytes_hit_in_both_modes(sender: Sender) -> None:
    sender.send(_turns(LONG))
    assert sender.send(_turns(LONG)) >= 2900


def test_block_key_order(sender: Sender) -> None:
    """A text block's key order: the server parses the envelope (rendered: equal); the bytes differ."""
    sender.send(_turns([{"type": "text", "text": LONG}]))
    reads = sender.send(_turns([{"text": LONG, "type": "text"}]))
    if sender.emu.mode == "rendered":
        assert reads >= 2900, reads
    else:
        assert reads == 0, reads


def test_cache_markers_are_aside_in_both_modes() -> None:
    """A marker added to a block is not part of its identity in either mode (Anthropic: read at it)."""
    for mode in RENDER_MODES:
        sender = Sender("anthropic", mode)
        block = {"type": "text", "text": LONG}
        sender.send(_turns([{**block, "cache_control": {"type": "ephemeral"}}]))
        assert sender.send(_turns([block])) >= 2900, mode
        sender.client.close()


def test_message_envelope_counts_only_in_byte_exact() -> None:
    """A message's own field order and null fields are bytes, not rendered text."""
    a = {"messages": [{"role": "user", "content": LONG, "name": None}], "model": "m"}
    b = {"messages": [{"content": LONG, "role": "user"}], "model": "m"}
    assert render_chat(a).positions[-1].hash == render_chat(b).positions[-1].hash
    assert (
        render_chat(a, mode="byte-exact").positions[-1].hash
        != render_chat(b, mode="byte-exact").positions[-1].hash
    )


def test_positions_and_tokens_are_the_same_in_both_modes() -> None:
    body = {
        "model": "m",
        "system": "You are terse.",
        "tools": [{"name": "t", "input_schema": {"type": "object"}, "description": None}],
        "messages": [
            {"role": "user", "content": LONG},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "u", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u", "content": "ok"}]},
        ],
    }
    rendered = render_anthropic(body).positions
    exact = render_anthropic(body, mode="byte-exact").positions
    assert [(p.path, p.kind, p.tokens) for p in rendered] == [(p.path, p.kind, p.tokens) for p in exact]


def test_system_string_vs_block_differs_only_in_byte_exact() -> None:
    a = {"system": LONG, "messages": []}
    b = {"system": [{"type": "text", "text": LONG}], "messages": []}
    assert render_anthropic(a).positions[0].hash == render_anthropic(b).positions[0].hash
    assert (
        render_anthropic(a, mode="byte-exact").positions[0].hash
        != render_anthropic(b, mode="byte-exact").positions[0].hash
    )


def test_mode_is_checked_and_settable() -> None:
    with pytest.raises(ValueError, match="byte-exact"):
        Emulator(mode="bytes")
    emu = Emulator()
    assert emu.mode == "rendered"
    emu.mode = "byte-exact"
    assert emu.anthropic.mode == "byte-exact"
    assert {flavour.mode for flavour in emu.chat.values()} == {"byte-exact"}
