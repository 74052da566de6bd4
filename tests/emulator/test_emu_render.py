"""Token estimate and rendering invariants (hashes ignore markers and str-vs-list content)."""

from __future__ import annotations

from telos_wrap.emulator import estimate_tokens, text_for_tokens
from telos_wrap.emulator.prefix_tree import PrefixTree
from telos_wrap.emulator.render import common_prefix_len, render_anthropic, render_chat


def test_token_estimate_is_four_bytes_per_token_rounded_up() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é") == 1  # 2 UTF-8 bytes
    assert estimate_tokens("日本語") == 3  # 9 UTF-8 bytes
    assert estimate_tokens(text_for_tokens(1024)) == 1024


def test_marker_and_string_form_do_not_change_the_hash() -> None:
    plain = render_anthropic({"system": "S" * 40, "messages": [{"role": "user", "content": "hello"}]})
    listed = render_anthropic(
        {
            "system": [{"type": "text", "text": "S" * 40, "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"text": "hello", "type": "text", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
                    ],
                }
            ],
        }
    )
    assert [p.hash for p in plain.positions] == [p.hash for p in listed.positions]
    assert plain.total_tokens == listed.total_tokens == 10 + 2
    assert [len(p.markers) for p in listed.positions] == [1, 1]


def test_nested_key_order_changes_the_hash_but_envelope_order_does_not() -> None:
    a = render_anthropic(
        {"tools": [{"name": "t", "input_schema": {"type": "object", "properties": {}}}], "messages": []}
    )
    b = render_anthropic(
        {"tools": [{"input_schema": {"type": "object", "properties": {}}, "name": "t"}], "messages": []}
    )
    c = render_anthropic(
        {"tools": [{"name": "t", "input_schema": {"properties": {}, "type": "object"}}], "messages": []}
    )
    assert a.positions[0].hash == b.positions[0].hash
    assert a.positions[0].hash != c.positions[0].hash


def test_role_and_message_boundaries_are_part_of_the_prefix() -> None:
    one = render_chat(
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
            ]
        }
    )
    two = render_chat({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})
    other_role = render_chat({"messages": [{"role": "system", "content": "a"}]})
    assert one.positions[0].hash == two.positions[0].hash
    assert one.positions[1].hash != two.positions[1].hash
    assert one.positions[0].hash != other_role.positions[0].hash


def test_partial_match_counts_whole_tokens_of_the_first_differing_block() -> None:
    tree = PrefixTree()
    first = render_chat(
        {"messages": [{"role": "system", "content": "s" * 40}, {"role": "user", "content": "q" * 401}]}
    )
    tree.insert(first.positions, now=0.0)
    second = render_chat(
        {"messages": [{"role": "system", "content": "s" * 40}, {"role": "user", "content": "q" * 403 + "z"}]}
    )
    match = tree.match(second.positions, now=0.0)
    assert (match.full_positions, match.partial_tokens, match.tokens) == (1, 100, 110)


def test_common_prefix_len() -> None:
    assert common_prefix_len(b"abcdef", b"abcxyz") == 3
    assert common_prefix_len(b"abc", b"abcdef") == 3
    assert common_prefix_len(b"", b"abc") == 0
    assert common_prefix_len(b"x" * 100_000 + b"a", b"x" * 100_000 + b"b") == 100_000
