"""The ``telos_body`` vcrpy matcher: cassettes recorded with telos keep matching across runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from vcr.request import Request

from telos_wrap.testing.vcr_matcher import MATCH_ON, normalize_body, telos_body
from tests.plugin.project import make_project

pytest_plugins = ["pytester"]

URL = "http://127.0.0.1:9/v1/messages"


def _request(body: Any) -> Request:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Request("POST", URL, raw, {"content-type": "application/json"})


RECORDED = {
    "model": "claude-opus-5",
    "max_tokens": 32,
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral", "ttl": "5m"}},
                {"type": "text", "text": "Current time: 2026-11-21T10:00:00.123456"},
            ],
        }
    ],
}


def test_telos_plumbing_key_order_and_envelopes_are_ignored() -> None:
    replayed = {
        "messages": [
            {
                "content": [
                    {"text": "Hi", "type": "text"},  # marker moved away by a newer telos
                    {"text": "Current time: 2026-11-23T17:45:12.000001", "type": "text"},  # live clock
                ],
                "role": "user",
            }
        ],
        "system": "You are terse.",  # string ↔ one-text-block shape
        "max_tokens": 32,
        "model": "claude-opus-5",
        "diagnostics": {"previous_message_id": None},
    }
    telos_body(_request(RECORDED), _request(replayed))
    openai_a = {"model": "gpt-5.4", "messages": [], "prompt_cache_key": "telos-0123456789abcdef"}
    openai_b = {
        "model": "gpt-5.4",
        "messages": [],
        "prompt_cache_key": "telos-fedcba9876543210",
        "stream_options": {"include_usage": True},
    }
    telos_body(_request(openai_a), _request(openai_b))
    assert normalize_body(openai_b) == {"model": "gpt-5.4", "messages": []}


def test_a_real_change_still_fails_and_says_where() -> None:
    changed = json.loads(json.dumps(RECORDED))
    changed["messages"][0]["content"][0]["text"] = "Hello"
    with pytest.raises(AssertionError, match=r"body\.messages\[0\]\.content\[0\]\.text: \"Hi\" != \"Hello\""):
        telos_body(_request(RECORDED), _request(changed))
    # The caller's own prompt_cache_key is the application's, not telos' plumbing.
    own: list[dict[str, Any]] = [
        {"model": "m", "messages": [], "prompt_cache_key": key} for key in ("tenant-a", "tenant-b")
    ]
    with pytest.raises(AssertionError, match="prompt_cache_key"):
        telos_body(_request(own[0]), _request(own[1]))
    with pytest.raises(AssertionError, match="compared as bytes"):
        telos_body(_request(b"not json"), _request(b"not json either"))
    telos_body(_request(b"not json"), _request(b"not json"))


PYTEST_RECORDING = """\
import anthropic
import pytest

import agent


@pytest.mark.vcr
@pytest.mark.telos_cache(min_hit_ratio=0.7, max_breaks=0)
def test_tagged_clock(base_url):
    client = anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0)
    assert len(agent.run_anthropic(client, clock="tagged", questions=agent.QUESTIONS[:4])) == 4
"""


@pytest.mark.parametrize("matcher", ["telos_body", "raw_body"])
def test_a_cassette_recorded_with_telos_keeps_matching(pytester: pytest.Pytester, matcher: str) -> None:
    """Recorded with telos and a live tagged clock; replayed at another time, bodies matched."""
    make_project(pytester, PYTEST_RECORDING, match_on=("method", "path", matcher))
    pytester.runpytest_inprocess("--record-mode=once").assert_outcomes(passed=1)
    replayed = pytester.runpytest_inprocess("--record-mode=none")
    if matcher == "telos_body":
        replayed.assert_outcomes(passed=1)
    else:  # the clock telos moved to the end of the turn differs: byte matching cannot replay it
        replayed.assert_outcomes(failed=1)
        assert "CannotOverwriteExistingCassetteException" in replayed.stdout.str()


PLAIN_VCRPY = """\
import anthropic
import vcr

import agent
from telos_wrap.testing import vcr_matcher
from telos_wrap.emulator import Emulator, serve

# The emulator's port changes from run to run: match on method and path (plus the bodies).
RECORDER = vcr_matcher.register(
    vcr.VCR(match_on=["method", "path", vcr_matcher.NAME], filter_headers=["x-api-key"])
)


def test_plain_vcrpy(request, telos_cache):
    record = request.config.getoption("--record-mode") == "once"
    with RECORDER.use_cassette("plain.yaml", record_mode="once" if record else "none"):
        if record:
            with serve(Emulator()) as url:
                agent.run_anthropic(anthropic.Anthropic(api_key="k", base_url=url), clock="tagged",
                                    questions=agent.QUESTIONS[:3])
        else:
            agent.run_anthropic(anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9"),
                                clock="tagged", questions=agent.QUESTIONS[:3])
    report = telos_cache.check(min_hit_ratio=0.6, max_breaks=0)
    assert report.requests == 3 and telos_cache.stats.requests == 3
"""


def test_plain_vcrpy_with_the_documented_register_call(pytester: pytest.Pytester) -> None:
    assert "telos_body" in MATCH_ON
    make_project(pytester, PLAIN_VCRPY)
    pytester.runpytest_inprocess("--record-mode=once").assert_outcomes(passed=1)
    assert (pytester.path / "plain.yaml").read_text().count("- request:") == 3
    pytester.runpytest_inprocess("--record-mode=none").assert_outcomes(passed=1)
