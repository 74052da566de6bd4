"""OpenAI Chat Completions conformance (docs/vendor-facts.md §2), driven through the real SDK."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import openai
import pytest

from telos_wrap.emulator import ManualClock

from .emu_helpers import part, text

OLD = "gpt-4.1"  # before GPT-5.6: automatic caching
NEW = "gpt-5.6"  # GPT-5.6+: breakpoints


def cached(response: Any) -> tuple[int, int, int]:
    u = response.usage
    d = u.prompt_tokens_details
    return u.prompt_tokens, d.cached_tokens, d.cache_write_tokens


@pytest.fixture
def oai(make_openai: Callable[..., openai.OpenAI]) -> openai.OpenAI:
    return make_openai()


_SDK_PARAMS = inspect.signature(openai.resources.chat.completions.Completions.create).parameters


def chat(client: openai.OpenAI, messages: list[dict[str, Any]], model: str = OLD, **kwargs: Any) -> Any:
    # Fields an older SDK line does not declare yet go out through extra_body, as a user would send them.
    extra = {key: kwargs.pop(key) for key in list(kwargs) if key not in _SDK_PARAMS}
    if extra:
        kwargs["extra_body"] = extra
    return client.chat.completions.create(model=model, messages=messages, **kwargs)


# --- before GPT-5.6 ----------------------------------------------------------------------------


def test_prompts_below_1024_tokens_are_never_cached(oai: openai.OpenAI) -> None:
    msgs = [{"role": "system", "content": text(1000)}, {"role": "user", "content": text(23, "q")}]  # 1023
    assert cached(chat(oai, msgs)) == (1023, 0, 0)
    assert cached(chat(oai, msgs)) == (1023, 0, 0)


def test_hits_come_in_128_token_increments(oai: openai.OpenAI) -> None:
    system = {"role": "system", "content": text(1500)}
    assert cached(chat(oai, [system, {"role": "user", "content": "aaaa"}])) == (1501, 0, 0)
    # shared prefix = 1500 tokens -> 1408 = 11 * 128
    assert cached(chat(oai, [system, {"role": "user", "content": "bbbb"}])) == (1501, 1408, 0)
    # identical 1501-token prompt -> 1408 again (1501 rounds down to 1408)
    assert cached(chat(oai, [system, {"role": "user", "content": "bbbb"}])) == (1501, 1408, 0)


def test_partial_block_match_counts_toward_the_shared_prefix(oai: openai.OpenAI) -> None:
    system = {"role": "system", "content": text(1000)}
    chat(oai, [system, {"role": "user", "content": text(100, "y") + "A"}])
    # shared: 1000 + 100 tokens of the user text = 1100 -> 1024
    assert cached(chat(oai, [system, {"role": "user", "content": text(100, "y") + "B"}])) == (1101, 1024, 0)


def test_prompt_cache_key_partitions_the_cache(oai: openai.OpenAI) -> None:
    msgs = [{"role": "system", "content": text(2048)}, {"role": "user", "content": "hi"}]
    assert cached(chat(oai, msgs, prompt_cache_key="a"))[1] == 0
    assert cached(chat(oai, msgs, prompt_cache_key="b"))[1] == 0
    assert cached(chat(oai, msgs, prompt_cache_key="a"))[1] == 2048
    assert cached(chat(oai, msgs, model="gpt-4o", prompt_cache_key="a"))[1] == 0  # per model


def test_in_memory_retention_expires(oai: openai.OpenAI, clock: ManualClock) -> None:
    msgs = [{"role": "system", "content": text(2048)}, {"role": "user", "content": "hi"}]
    chat(oai, msgs, prompt_cache_retention="in_memory")
    clock.advance(599)
    assert cached(chat(oai, msgs, prompt_cache_retention="in_memory"))[1] == 2048
    clock.advance(600)
    assert cached(chat(oai, msgs, prompt_cache_retention="in_memory"))[1] == 0


# --- request validation ------------------------------------------------------------------------


def test_unknown_top_level_field_is_rejected(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(oai, [{"role": "user", "content": "hi"}], extra_body={"cache_salt": "s"})
    assert info.value.status_code == 400
    assert info.value.body == {
        "message": "Unrecognized request argument supplied: cache_salt",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


def test_known_fields_from_the_sdk_params_are_accepted(oai: openai.OpenAI) -> None:
    r = chat(
        oai,
        [{"role": "user", "content": "hi"}],
        temperature=0.2,
        user="u",
        seed=1,
        metadata={"k": "v"},
        safety_identifier="s",
        max_completion_tokens=3,
    )
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 3


def test_cache_options_and_breakpoints_are_rejected_before_gpt_5_6(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="prompt_cache_options is only supported"):
        chat(oai, [{"role": "user", "content": "hi"}], prompt_cache_options={"mode": "explicit"})
    with pytest.raises(openai.BadRequestError, match="prompt_cache_breakpoint is only supported") as info:
        chat(oai, [{"role": "user", "content": [part(10, breakpoint="")]}])
    assert info.value.body["param"] == "messages.0.content.0.prompt_cache_breakpoint"


def test_retention_and_options_ttl_together_are_rejected(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="cannot both be set"):
        chat(
            oai,
            [{"role": "user", "content": "hi"}],
            model=NEW,
            prompt_cache_retention="24h",
            prompt_cache_options={"ttl": "30m"},
        )


# --- GPT-5.6 and later -------------------------------------------------------------------------


def test_explicit_breakpoint_matches_exactly_and_bills_writes(oai: openai.OpenAI) -> None:
    system = {"role": "system", "content": [part(3000, breakpoint="")]}
    opts = {"mode": "explicit"}
    first = chat(oai, [system, {"role": "user", "content": "q1"}], model=NEW, prompt_cache_options=opts)
    assert cached(first) == (3001, 0, 3000)
    second = chat(oai, [system, {"role": "user", "content": "q2"}], model=NEW, prompt_cache_options=opts)
    assert cached(second) == (3001, 3000, 0)  # 3000 exactly, not rounded to 128


def test_explicit_mode_without_breakpoints_does_not_cache(oai: openai.OpenAI) -> None:
    msgs = [{"role": "system", "content": text(3000)}, {"role": "user", "content": "q"}]
    for _ in range(2):
        assert cached(chat(oai, msgs, model="gpt-5.7-mini", prompt_cache_options={"mode": "explicit"})) == (
            3001,
            0,
            0,
        )


def test_implicit_breakpoint_sits_at_the_newest_user_message(oai: openai.OpenAI) -> None:
    system = {"role": "system", "content": text(3000)}
    assert cached(chat(oai, [system, {"role": "user", "content": "q1"}], model=NEW)) == (3001, 0, 3001)
    assert cached(chat(oai, [system, {"role": "user", "content": "q1"}], model=NEW)) == (3001, 3001, 0)
    # a changed suffix misses entirely: no 128-token fallback on 5.6+
    assert cached(chat(oai, [system, {"role": "user", "content": "q2"}], model=NEW)) == (3001, 0, 3001)
    # an explicit breakpoint at the stable boundary fixes it
    marked = {"role": "system", "content": [part(3000, breakpoint="")]}
    assert cached(chat(oai, [marked, {"role": "user", "content": "q3"}], model=NEW)) == (3001, 0, 3001)
    assert cached(chat(oai, [marked, {"role": "user", "content": "q4"}], model=NEW)) == (3001, 3000, 1)
    assert cached(chat(oai, [marked, {"role": "user", "content": "q4"}], model=NEW)) == (3001, 3001, 0)
    # caches are per model (gpt-6 is also a breakpoint-era model)
    assert cached(chat(oai, [marked, {"role": "user", "content": "q4"}], model="gpt-6")) == (3001, 0, 3001)


def test_implicit_mode_writes_only_the_latest_three_explicit_breakpoints(oai: openai.OpenAI) -> None:
    parts = [part(1000, fill, breakpoint="") for fill in "abcd"]
    for mode, expected in (("implicit", 0), ("explicit", 1000)):
        system = {"role": "system", "content": parts}
        key = f"k-{mode}"
        chat(
            oai,
            [system, {"role": "user", "content": "q"}],
            model=NEW,
            prompt_cache_key=key,
            prompt_cache_options={"mode": mode},
        )
        changed = {"role": "system", "content": [parts[0], part(1000, "z", breakpoint="")]}
        again = chat(
            oai,
            [changed, {"role": "user", "content": "q"}],
            model=NEW,
            prompt_cache_key=key,
            prompt_cache_options={"mode": mode},
        )
        assert cached(again)[1] == expected, mode


def test_prompt_cache_key_partitions_gpt_5_6(oai: openai.OpenAI) -> None:
    msgs = [{"role": "system", "content": [part(3000, breakpoint="")]}, {"role": "user", "content": "q"}]
    assert cached(chat(oai, msgs, model=NEW, prompt_cache_key="tenant-a"))[2] == 3001
    assert cached(chat(oai, msgs, model=NEW, prompt_cache_key="tenant-b")) == (3001, 0, 3001)
    assert cached(chat(oai, msgs, model=NEW, prompt_cache_key="tenant-a")) == (3001, 3001, 0)


def test_breakpoint_ttl_30m_and_12h(oai: openai.OpenAI, clock: ManualClock) -> None:
    short = [
        {"role": "system", "content": [part(2000, "s", breakpoint="30m")]},
        {"role": "user", "content": "q"},
    ]
    long = [
        {"role": "system", "content": [part(2000, "l", breakpoint="12h")]},
        {"role": "user", "content": "q"},
    ]
    opts = {"mode": "explicit"}
    chat(oai, short, model=NEW, prompt_cache_options=opts)
    chat(oai, long, model=NEW, prompt_cache_options=opts)
    clock.advance(1800)
    assert cached(chat(oai, short, model=NEW, prompt_cache_options=opts))[1] == 0
    assert cached(chat(oai, long, model=NEW, prompt_cache_options=opts))[1] == 2000


# --- streaming ---------------------------------------------------------------------------------


@pytest.mark.parametrize("include_usage", [True, False])
def test_stream_usage_chunk_only_with_include_usage(oai: openai.OpenAI, include_usage: bool) -> None:
    msgs = [{"role": "system", "content": text(2048)}, {"role": "user", "content": "hi"}]
    chat(oai, msgs)
    options = {"include_usage": True} if include_usage else None
    chunks = list(chat(oai, msgs, stream=True, stream_options=options))
    usage_chunks = [c for c in chunks if c.usage is not None]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).startswith("This is")
    if include_usage:
        assert len(usage_chunks) == 1 and chunks[-1] is usage_chunks[0]
        assert chunks[-1].choices == []
        assert chunks[-1].usage.prompt_tokens_details.cached_tokens == 2048
    else:
        assert usage_chunks == []
    assert chunks[-1 - int(include_usage)].choices[0].finish_reason == "stop"
