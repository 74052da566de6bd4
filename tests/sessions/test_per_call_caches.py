"""The per-call fast paths give what the slow paths give (benchmarks/overhead.py measures their cost).

A memo hit takes no lock and shares nothing, a print knows the sum of its sizes from the memo's
totals, the split patterns hash once: each is checked here against the value it stands for.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import anthropic

import telos_wrap
from telos_wrap.ir.shared import BoundedMemo, SharedTexts, shared_texts
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, SplitPatterns
from telos_wrap.sessions.learning import digests, volatility
from tests.canned import anthropic_message, json_response
from tests.sdk_http import sdk_http

MODEL = "claude-opus-5"
PROMPT = "".join(f"Rule {i}: answer from the order record only, class {i % 7}.\n" for i in range(60))
REPLY = json.dumps(
    anthropic_message({"input_tokens": 10, "output_tokens": 1}, id="msg_fast", model=MODEL)
).encode()


def test_a_memo_holds_the_kept_key_and_a_hit_keeps_nothing() -> None:
    kept: list[str] = []

    def keep(key: str) -> str:
        kept.append(key)
        return key.lower()  # stands for ``share``: the table holds what ``keep`` returns

    memo: BoundedMemo[str, str] = BoundedMemo(str.upper, max_entries=10, max_bytes=10_000, keep=keep)
    assert memo("ab") == "AB" and kept == ["ab"]
    assert list(memo._table) == ["ab"]
    assert memo("ab") == "AB" and kept == ["ab"]  # a hit: neither ``keep`` nor the function again
    assert memo("CD") == "CD" and kept == ["ab", "CD"] and list(memo._table) == ["ab", "cd"]
    memo("ab")  # a hit moves the entry to the most recent end
    assert list(memo._table) == ["cd", "ab"]


def test_a_memo_hit_without_the_lock_stays_right_under_threads() -> None:
    memo: BoundedMemo[int, int] = BoundedMemo(lambda n: n * n, max_entries=8, max_bytes=1 << 20)
    wrong: list[int] = []

    def work(offset: int) -> None:
        for n in range(3_000):
            key = (n + offset) % 20
            if memo(key) != key * key:
                wrong.append(key)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == [] and len(memo) <= 8


def test_shared_texts_answer_a_hit_with_the_held_copy() -> None:
    table = SharedTexts(max_bytes=100_000, min_chars=10)
    first = "z" * 1_000
    again = "".join(["z"] * 1_000)
    assert table.share(first) is first and table.share(again) is first
    assert table.holds(first) and not table.holds(again) and not table.holds("z")


def test_a_block_print_memo_holds_the_one_shared_copy_of_its_text() -> None:
    digests._block_prints.cache_clear()
    text = "".join(list(PROMPT))  # a copy of its own, equal to PROMPT
    other = "".join(list(PROMPT))
    assert other is not text
    first = volatility.fingerprint([text])
    assert volatility.fingerprint([other]) == first == volatility.fingerprint([PROMPT])
    (key,) = digests._block_prints._table
    assert key[1] is shared_texts.share(other)
    assert volatility.present_spans([text], 0) == volatility.present_spans([other], 0)


def test_split_patterns_hash_once_and_as_their_value() -> None:
    one = DEFAULT_PATTERNS.extended(drop=[r"^Now: .*$"])
    two = DEFAULT_PATTERNS.extended(drop=[r"^Now: .*$"])
    assert one == two and one is not two and hash(one) == hash(two)
    assert hash(one) == hash(one) and one != DEFAULT_PATTERNS
    assert {one: 1}[two] == 1
    fresh = SplitPatterns(drop=one.drop, fold=one.fold)
    assert fresh == one and hash(fresh) == hash(one)


def test_a_prints_total_is_the_sum_of_its_sizes_turn_after_turn() -> None:
    def answer(request: Any) -> Any:
        return json_response(REPLY)

    telos_wrap.patch(strict=True)
    try:
        client = anthropic.Anthropic(
            api_key="test", http_client=sdk_http.Client(transport=sdk_http.MockTransport(answer))
        )
        history: list[dict[str, Any]] = [{"role": "user", "content": "Where is order 7?"}]
        with telos_wrap.session("fast-total") as session:
            for turn in range(6):
                client.messages.create(model=MODEL, max_tokens=8, system=PROMPT, messages=history)
                last = session.state.last
                assert last is not None
                assert last._total == sum(last.sizes)  # given by prompt_print, not summed on asking
                assert last.total_size() == sum(last.sizes)
                history = [
                    *history,
                    {"role": "assistant", "content": f"reply {turn}"},
                    {"role": "user", "content": f"and item {turn}? " * (turn + 1)},
                ]
            history[1] = {"role": "assistant", "content": "an edited reply"}  # the memo starts over
            client.messages.create(model=MODEL, max_tokens=8, system=PROMPT, messages=history)
            last = session.state.last
            assert last is not None and last.total_size() == sum(last.sizes)
    finally:
        telos_wrap.unpatch()
