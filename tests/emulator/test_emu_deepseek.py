"""DeepSeek context caching conformance (docs/vendor-facts.md §3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from telos_wrap.emulator import REPLY_TEXT, Emulator, estimate_tokens

from .emu_helpers import text

A = {"role": "system", "content": text(1000, "a")}


def user(fill: str, tokens: int = 50) -> dict[str, Any]:
    return {"role": "user", "content": text(tokens, fill)}


@pytest.fixture
def ds(make_openai: Callable[..., openai.OpenAI]) -> openai.OpenAI:
    return make_openai(base_url="https://api.deepseek.com")


def hit_miss(client: openai.OpenAI, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[int, int]:
    r = client.chat.completions.create(model="deepseek-chat", messages=messages, **kwargs)
    u = r.usage
    extra = u.model_extra or {}
    assert u.prompt_tokens == extra["prompt_cache_hit_tokens"] + extra["prompt_cache_miss_tokens"]
    assert u.prompt_tokens_details.cached_tokens == extra["prompt_cache_hit_tokens"]
    return extra["prompt_cache_hit_tokens"], extra["prompt_cache_miss_tokens"]


def test_doc_example_a_b_then_a_c_then_a_d(ds: openai.OpenAI, emu: Emulator) -> None:
    assert hit_miss(ds, [A, user("b")]) == (0, 1050)
    assert hit_miss(ds, [A, user("c")]) == (0, 1050)  # miss, but A is now persisted
    assert hit_miss(ds, [A, user("d")]) == (1000, 50)
    assert [r.flavour for r in emu.requests] == ["deepseek"] * 3


def test_request_boundary_units_serve_appended_requests(ds: openai.OpenAI) -> None:
    reply = estimate_tokens(REPLY_TEXT)
    assert hit_miss(ds, [A, user("b")]) == (0, 1050)
    # end of input: A+B is a unit
    assert hit_miss(ds, [A, user("b"), user("c", 10)]) == (1050, 10)
    # end of output: A+B+reply is a unit (multi-turn resend of the history)
    turn2 = [A, user("b"), {"role": "assistant", "content": REPLY_TEXT}, user("e", 10)]
    assert hit_miss(ds, turn2) == (1050 + reply, 10)


def test_common_prefix_inside_a_block_is_persisted(ds: openai.OpenAI) -> None:
    doc = text(300, "p")
    assert hit_miss(ds, [{"role": "user", "content": doc + "first question"}]) == (0, 304)
    assert hit_miss(ds, [{"role": "user", "content": doc + "other question"}]) == (0, 304)
    assert hit_miss(ds, [{"role": "user", "content": doc + "third question"}]) == (300, 4)


def test_user_id_isolates_the_cache(ds: openai.OpenAI) -> None:
    hit_miss(ds, [A, user("b")], extra_body={"user_id": "u1"})
    assert hit_miss(ds, [A, user("b")], extra_body={"user_id": "u2"}) == (0, 1050)
    assert hit_miss(ds, [A, user("b")], extra_body={"user_id": "u1"}) == (1050, 0)
