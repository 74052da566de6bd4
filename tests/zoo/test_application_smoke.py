"""Small run of ``benchmarks/application.py``: the per-user support application (tau-bench, each
conversation's system prompt naming its user, a clock line first), four interleaved three-request
conversations on one organisation's cache, both vendors, through the real SDKs and the emulator.
The full run and its table: BENCHMARKS.md, "Applications"."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
sys.path.insert(0, str(BENCHMARKS))

import application  # noqa: E402

from telos_wrap.replay.runner import patched  # noqa: E402


@pytest.mark.skipif(not (TRACES / "tau-bench.jsonl.xz").exists(), reason="needs ../shared/traces")
def test_per_user_application_both_vendors() -> None:
    apps = {"support/per-user": application.QUICK_APPS["support/per-user"]}
    with patched():
        rows = list(application.run(("anthropic", "openai"), apps, TRACES, 4, 3, rate=4.0, workers=2))
    assert [row.vendor for row in rows] == ["anthropic", "openai"]
    for row in rows:
        assert row.conversations == 4 and row.requests == 12
        telos, native = row.ratio(application.TELOS), row.ratio(application.NATIVE)
        assert telos <= native and telos <= 1.0, (row.vendor, telos, native)
        # Conversations after the first start with what the first one learned although each prompt
        # names its own user: the application pays less with fleet learning than without.
        assert row.later[application.TELOS].cost < row.later[application.TELOS_OFF].cost
        assert all("FAIL" not in check for check in row.checks())
    # The clock line breaks the prefix of every request as sent: Anthropic's automatic caching
    # writes and never reads (125%).
    assert rows[0].ratio(application.NATIVE) > 1.2


def test_demo_application_without_traces() -> None:
    apps = {"demo": application.APPS["demo"]}
    with patched():
        [row] = application.run(("anthropic",), apps, TRACES, 3, 3, rate=4.0, workers=2)
    assert row.ratio(application.TELOS) < row.ratio(application.NATIVE)
    assert row.ratio(application.IDEAL) <= row.ratio(application.TELOS)


@pytest.mark.skipif(not (TRACES / "tau-bench.jsonl.xz").exists(), reason="needs ../shared/traces")
def test_openai_key_granularities() -> None:
    """Issue 42: OpenAI's ``prompt_cache_key`` per application (telos' own) against one per
    conversation: with per-conversation keys no conversation reads what another wrote (the key is part
    of the cache identity), so the application pays more. Shards: as many keys as keep each under the
    overflow rate, every conversation always on the same one."""
    sessions = application.sessions_for(TRACES, "tau-bench", "openai")
    conversations = application.conversations_of(sessions, "one-prompt", "clock-first", 4, 3)
    assert application.shards(conversations, 4.0) == 1  # 12 requests a minute: one key
    assert application.shards(conversations, 20.0) == 4  # 60 a minute: 15 each
    keys = {application.cache_key(application.SHARDED, n, 4) for n in range(40)}
    assert len(keys) == 4 and application.cache_key(application.SHARDED, 7, 4) == application.cache_key(
        application.SHARDED, 7, 4
    )
    assert application.cache_key(application.TELOS, 7, 4) is None  # telos' own key
    apps = {"support": application.QUICK_APPS["support"]}
    with patched():
        [row] = application.run(("openai",), apps, TRACES, 4, 3, rate=4.0, workers=2, keys=("conversation",))
    per_app, per_conversation = row.ratio(application.TELOS), row.ratio(application.PER_CONVERSATION)
    assert per_app < per_conversation, (per_app, per_conversation)
    assert application.key_table([row], 4.0)[2].startswith("| support | clock-first | 4 / 12 | 4/min | 1 |")


def test_profile_accounts_for_the_whole_gap() -> None:
    """``--profile`` (issue 42): the per-request gaps add up to telos' cost minus the ideal's on the
    same requests, and on the demo application with a clock line first the first conversation, which
    alone must learn the line at its first change, pays most of it."""
    sessions = application.sessions_for(TRACES, "demo", "anthropic")
    conversations = application.conversations_of(sessions, "one-prompt", "clock-first", 4, 3)
    log: list[tuple[int, int, int]] = []
    with patched():
        cost, _ = application.run_app("anthropic", conversations, application.TELOS, 2, 4.0, "demo", log)
    assert len(log) == cost.requests == sum(len(c.requests) for c in conversations)
    inputs = sum(raw + read + write for raw, read, write in log)
    lines = application.profile("anthropic", conversations, 4.0, log)
    gap = float(lines[0].split("gap to the ideal: ")[1].split(" token")[0].replace(",", ""))
    first = float(lines[0].split("the first conversation's: ")[1].replace(",", ""))
    ideal = application.ideal("anthropic", conversations, 4.0, inputs)
    assert gap == pytest.approx(cost.cost - ideal, abs=1.0)
    assert gap > 0 and first > 0.5 * gap, lines
    assert len(lines) == 1 + max(len(c.requests) for c in conversations)
