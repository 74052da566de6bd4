"""Anthropic Messages conformance (docs/vendor-facts.md §1), driven through the real SDK."""

from __future__ import annotations

import inspect
from typing import Any

import anthropic
import pytest

from telos_wrap.emulator import REPLY_TEXT, Emulator, ManualClock, estimate_tokens

from .emu_helpers import block, text

MODEL = "claude-opus-4-8"  # minimum cacheable length 1024 (§1.3)
REPLY_TOKENS = estimate_tokens(REPLY_TEXT)


def usage_tuple(message: Any) -> tuple[int, int, int, int, int]:
    u = message.usage
    return (
        u.input_tokens,
        u.cache_read_input_tokens,
        u.cache_creation_input_tokens,
        u.cache_creation.ephemeral_5m_input_tokens,
        u.cache_creation.ephemeral_1h_input_tokens,
    )


def create(client: anthropic.Anthropic, **kwargs: Any) -> Any:
    kwargs.setdefault("model", MODEL)
    kwargs.setdefault("max_tokens", 64)
    return client.messages.create(**kwargs)


# --- usage numbers -----------------------------------------------------------------------------


def test_usage_exact_for_hand_computed_conversation(claude: anthropic.Anthropic) -> None:
    system = [block(2000, "s", ttl="1h")]
    turn1 = [{"role": "user", "content": [block(1000, "d", mark=True), {"type": "text", "text": "What?"}]}]
    first = create(claude, system=system, messages=turn1)
    # 2000 (1h) + 1000 (5m) written; "What?" is 5 bytes = 2 tokens after the last breakpoint.
    assert usage_tuple(first) == (2, 0, 3000, 1000, 2000)
    assert first.usage.output_tokens == REPLY_TOKENS
    assert first.id.startswith("msg_emu_")

    second = create(claude, system=system, messages=turn1)
    assert usage_tuple(second) == (2, 3000, 0, 0, 0)

    turn2 = [
        {"role": "user", "content": [block(1000, "d"), {"type": "text", "text": "What?"}]},
        {"role": "assistant", "content": REPLY_TEXT},
        {"role": "user", "content": [block(500, "e", mark=True), {"type": "text", "text": "ok"}]},
    ]
    third = create(claude, system=system, messages=turn2)
    # read the 3000-token entry via lookback; write What?(2) + reply + 500 at the 5m breakpoint.
    assert usage_tuple(third) == (1, 3000, 2 + REPLY_TOKENS + 500, 2 + REPLY_TOKENS + 500, 0)


def test_total_input_is_sum_of_the_three_counters(claude: anthropic.Anthropic) -> None:
    msgs = [{"role": "user", "content": [block(1500, mark=True), {"type": "text", "text": text(7, "q")}]}]
    count = claude.messages.count_tokens(model=MODEL, messages=msgs)
    assert count.input_tokens == 1507
    u = create(claude, messages=msgs).usage
    assert u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens == 1507
    assert (u.input_tokens, u.cache_creation_input_tokens) == (7, 1500)


def test_no_breakpoint_means_no_caching(claude: anthropic.Anthropic) -> None:
    msgs = [{"role": "user", "content": text(3000)}]
    for _ in range(2):
        assert usage_tuple(create(claude, messages=msgs)) == (3000, 0, 0, 0, 0)


def test_automatic_caching_marks_the_last_block(claude: anthropic.Anthropic) -> None:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": text(1200)}]
    auto = {"type": "ephemeral"}
    assert usage_tuple(create(claude, messages=msgs, cache_control=auto)) == (0, 0, 1200, 1200, 0)
    msgs += [{"role": "assistant", "content": REPLY_TEXT}, {"role": "user", "content": text(10, "n")}]
    # The marker moves to the new last block; lookback finds the 1200-token entry.
    assert usage_tuple(create(claude, messages=msgs, cache_control=auto)) == (
        0,
        1200,
        REPLY_TOKENS + 10,
        REPLY_TOKENS + 10,
        0,
    )


def test_prewarm_with_max_tokens_zero(claude: anthropic.Anthropic) -> None:
    system = [block(2000, mark=True)]
    msgs = [{"role": "user", "content": "hi"}]
    warm = create(claude, system=system, messages=msgs, max_tokens=0)
    assert warm.content == []
    assert warm.stop_reason == "max_tokens"
    assert (warm.usage.output_tokens, warm.usage.cache_creation_input_tokens) == (0, 2000)
    assert usage_tuple(create(claude, system=system, messages=msgs)) == (1, 2000, 0, 0, 0)


# --- lookback window ---------------------------------------------------------------------------


def _seed(claude: anthropic.Anthropic) -> None:
    first = create(claude, system=[block(2000, "s", mark=True)], messages=[{"role": "user", "content": "q0"}])
    assert first.usage.cache_creation_input_tokens == 2000


@pytest.mark.parametrize(("n_blocks", "expect_read"), [(19, 2000), (20, 0)])
def test_lookback_is_20_positions_counting_the_breakpoint(
    claude: anthropic.Anthropic, n_blocks: int, expect_read: int
) -> None:
    _seed(claude)
    content: list[dict[str, Any]] = [
        {"type": "text", "text": f"m{i:02d}"} for i in range(n_blocks)
    ]  # 1 token each
    content[-1]["cache_control"] = {"type": "ephemeral"}
    # positions: system (0), blocks 1..n; the breakpoint is n positions after the entry.
    msg = create(claude, system=[block(2000, "s")], messages=[{"role": "user", "content": content}])
    assert msg.usage.cache_read_input_tokens == expect_read
    assert msg.usage.cache_creation_input_tokens == 2000 + n_blocks - expect_read
    assert msg.usage.input_tokens == 0


def _tool_turns(n: int) -> list[dict[str, Any]]:
    uses = [{"type": "tool_use", "id": f"toolu_{i}", "name": "look", "input": {"i": i}} for i in range(n)]
    results = [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "ok"} for i in range(n)]
    tail = {"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": [*results, tail]},
    ]


def test_tool_use_and_tool_result_runs_count_as_one_position(claude: anthropic.Anthropic) -> None:
    _seed(claude)
    # 52 blocks between the entry and the breakpoint, but only 4 lookback positions.
    msg = create(claude, system=[block(2000, "s")], messages=_tool_turns(25))
    assert msg.usage.cache_read_input_tokens == 2000


def test_interleaved_tool_blocks_are_not_a_run(claude: anthropic.Anthropic) -> None:
    _seed(claude)
    content: list[dict[str, Any]] = []
    for i in range(12):  # tool_use, text, tool_use, text ... = 24 separate positions
        content.append({"type": "tool_use", "id": f"toolu_{i}", "name": "look", "input": {}})
        content.append({"type": "text", "text": f"t{i}"})
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": content},
        {
            "role": "user",
            "content": [{"type": "text", "text": "end", "cache_control": {"type": "ephemeral"}}],
        },
    ]
    assert create(claude, system=[block(2000, "s")], messages=msgs).usage.cache_read_input_tokens == 0


# --- breakpoint limit and validation -----------------------------------------------------------


def _blocks(n_marked: int) -> list[dict[str, Any]]:
    return [block(10, chr(ord("a") + i), mark=True) for i in range(n_marked)] + [block(1, "z")]


def test_five_breakpoints_are_rejected(claude: anthropic.Anthropic, emu: Emulator) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        create(claude, messages=[{"role": "user", "content": _blocks(5)}])
    assert info.value.status_code == 400
    assert info.value.body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        },
    }
    record = emu.requests[-1]
    assert (record.status, record.flavour, record.usage) == (400, "anthropic", None)
    assert record.error == info.value.body


def test_automatic_plus_four_explicit_is_rejected(claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="Found 5"):
        create(
            claude, messages=[{"role": "user", "content": _blocks(4)}], cache_control={"type": "ephemeral"}
        )
    ok = create(
        claude, messages=[{"role": "user", "content": _blocks(3)}], cache_control={"type": "ephemeral"}
    )
    assert ok.usage.input_tokens == 31  # all prefixes are below the 1024 minimum


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ([{"type": "text", "text": ""}], "text content blocks must be non-empty"),
        ([{"type": "text", "text": "  \n"}], "non-whitespace"),
        ([{"type": "text", "text": "", "cache_control": {"type": "ephemeral"}}], "empty text blocks"),
    ],
)
def test_empty_text_blocks_are_rejected(claude: anthropic.Anthropic, content: Any, message: str) -> None:
    with pytest.raises(anthropic.BadRequestError, match=message):
        create(claude, messages=[{"role": "user", "content": content}])


def test_cache_control_on_thinking_is_rejected(claude: anthropic.Anthropic) -> None:
    thinking = {
        "type": "thinking",
        "thinking": "hmm",
        "signature": "sig",
        "cache_control": {"type": "ephemeral"},
    }
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "a"}]},
        {"role": "user", "content": "q2"},
    ]
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0\.thinking\.cache_control"):
        create(claude, messages=msgs)


def test_longer_ttl_after_shorter_is_rejected(claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="ttl='1h'"):
        create(
            claude,
            system=[block(2000, ttl="5m")],
            messages=[{"role": "user", "content": [block(10, ttl="1h")]}],
        )


# --- minimum cacheable length ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tokens", "cached"),
    [
        ("claude-opus-5", 600, True),  # 512
        ("claude-haiku-4-5", 600, False),  # 4096
        ("claude-haiku-4-5-20251001", 4096, True),  # dated id -> same model
        ("claude-opus-4-8", 1023, False),  # 1024
        ("claude-opus-4-8", 1024, True),
        ("claude-opus-4-7", 2047, False),  # 2048
        ("claude-future-model", 1023, False),  # unknown -> default 1024
        ("claude-future-model", 1024, True),
    ],
)
def test_minimum_cacheable_length_per_model(
    claude: anthropic.Anthropic, model: str, tokens: int, cached: bool
) -> None:
    msgs = [{"role": "user", "content": [block(tokens, mark=True), {"type": "text", "text": "tail"}]}]
    first = create(claude, model=model, messages=msgs)
    second = create(claude, model=model, messages=msgs)
    if cached:
        assert usage_tuple(first) == (1, 0, tokens, tokens, 0)
        assert usage_tuple(second) == (1, tokens, 0, 0, 0)
    else:
        assert usage_tuple(first) == usage_tuple(second) == (tokens + 1, 0, 0, 0, 0)


def test_entries_are_per_model(claude: anthropic.Anthropic) -> None:
    msgs = [{"role": "user", "content": [block(2000, mark=True)]}]
    assert create(claude, messages=msgs).usage.cache_creation_input_tokens == 2000
    other = create(claude, model="claude-opus-5", messages=msgs)
    assert (other.usage.cache_read_input_tokens, other.usage.cache_creation_input_tokens) == (0, 2000)


# --- TTL ---------------------------------------------------------------------------------------


def test_five_minute_ttl_expires_and_is_refreshed_by_hits(
    claude: anthropic.Anthropic, clock: ManualClock
) -> None:
    msgs = [{"role": "user", "content": [block(2000, mark=True)]}]
    assert create(claude, messages=msgs).usage.cache_creation_input_tokens == 2000  # t=0
    clock.advance(299)
    assert create(claude, messages=msgs).usage.cache_read_input_tokens == 2000  # t=299, refreshed to 599
    clock.advance(299)
    assert create(claude, messages=msgs).usage.cache_read_input_tokens == 2000  # t=598, refreshed to 898
    clock.advance(300)
    expired = create(claude, messages=msgs)  # t=898: exactly 5 minutes after the last hit
    assert usage_tuple(expired) == (0, 0, 2000, 2000, 0)


def test_one_hour_ttl_outlives_five_minutes(claude: anthropic.Anthropic, clock: ManualClock) -> None:
    long_lived = [{"role": "user", "content": [block(2000, "l", ttl="1h")]}]
    short_lived = [{"role": "user", "content": [block(2000, "s", ttl="5m")]}]
    assert usage_tuple(create(claude, messages=long_lived)) == (0, 0, 2000, 0, 2000)
    assert usage_tuple(create(claude, messages=short_lived)) == (0, 0, 2000, 2000, 0)
    clock.advance(301)
    assert create(claude, messages=long_lived).usage.cache_read_input_tokens == 2000
    assert create(claude, messages=short_lived).usage.cache_read_input_tokens == 0
    clock.advance(3599)
    assert create(claude, messages=long_lived).usage.cache_read_input_tokens == 2000  # refreshed at 301
    clock.advance(3600)
    assert create(claude, messages=long_lived).usage.cache_read_input_tokens == 0


# --- streaming ---------------------------------------------------------------------------------


def test_stream_usage_matches_non_stream(claude: anthropic.Anthropic) -> None:
    system = [block(2000, "s", ttl="1h")]
    msgs = [{"role": "user", "content": [block(1000, mark=True), {"type": "text", "text": "What?"}]}]
    with claude.messages.stream(model=MODEL, max_tokens=64, system=system, messages=msgs) as stream:
        written = stream.get_final_message()
    assert usage_tuple(written) == (2, 0, 3000, 1000, 2000)
    assert written.content[0].type == "text" and written.content[0].text == REPLY_TEXT
    assert written.usage.output_tokens == REPLY_TOKENS
    with claude.messages.stream(model=MODEL, max_tokens=64, system=system, messages=msgs) as stream:
        read = stream.get_final_message()
    assert usage_tuple(read) == (2, 3000, 0, 0, 0)


def test_raw_stream_event_sequence(claude: anthropic.Anthropic) -> None:
    msgs = [{"role": "user", "content": [block(1500, mark=True)]}]
    events = list(create(claude, messages=msgs, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and "content_block_stop" in kinds
    start_usage = events[0].message.usage
    assert (
        start_usage.cache_creation_input_tokens,
        start_usage.cache_creation.ephemeral_5m_input_tokens,
    ) == (
        1500,
        1500,
    )
    assert events[-2].usage.output_tokens == REPLY_TOKENS
    assert events[-2].usage.cache_creation_input_tokens == 1500


# --- diagnostics -------------------------------------------------------------------------------


@pytest.mark.skipif(
    "diagnostics" not in inspect.signature(anthropic.resources.messages.Messages.create).parameters,
    reason="this anthropic SDK line has no diagnostics= parameter nor Message.diagnostics type",
)
def test_cache_diagnostics(claude: anthropic.Anthropic) -> None:
    base: dict[str, Any] = {
        "system": [block(2000, "s", mark=True)],
        "messages": [{"role": "user", "content": "q1"}],
    }
    first = create(claude, diagnostics={"previous_message_id": None}, **base)
    assert first.diagnostics is None
    appended = {
        **base,
        "messages": [
            *base["messages"],
            {"role": "assistant", "content": REPLY_TEXT},
            {"role": "user", "content": "q2"},
        ],
    }
    assert create(claude, diagnostics={"previous_message_id": first.id}, **appended).diagnostics is None
    changed = {**base, "system": [block(2000, "t", mark=True)]}
    diag = create(claude, diagnostics={"previous_message_id": first.id}, **changed).diagnostics
    assert diag is not None and diag.cache_miss_reason is not None
    assert diag.cache_miss_reason.type == "system_changed"
    assert diag.cache_miss_reason.cache_missed_input_tokens == 2001
    model = create(
        claude, model="claude-opus-5", diagnostics={"previous_message_id": first.id}, **base
    ).diagnostics
    assert model is not None and model.cache_miss_reason is not None
    assert model.cache_miss_reason.type == "model_changed"
    missing = create(claude, diagnostics={"previous_message_id": "msg_nope"}, **base).diagnostics
    assert missing is not None and missing.cache_miss_reason is not None
    assert missing.cache_miss_reason.type == "previous_message_not_found"
