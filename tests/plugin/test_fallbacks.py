"""A ``telos_cache``-marked test whose requests fell back fails, saying so (issue 32): a request sent
without telos got no saving, whatever a replay of it would say. Also the loud warning and
``stats.fallbacks`` of a conversation that keeps falling back."""

from __future__ import annotations

import logging

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, serve
from telos_wrap.failopen import reset_failures
from telos_wrap.sessions.hashed import session_hash
from tests.plugin.project import make_project

pytest_plugins = ["pytester"]

TEST = """\
import anthropic
import pytest

import agent
from telos_wrap import pipeline


@pytest.mark.telos_cache(min_hit_ratio=0.0)
def test_support_conversation(base_url, monkeypatch):
    if {broken}:
        def broken(stage):
            if stage == "plan":
                raise RuntimeError("injected")

        monkeypatch.setattr(pipeline, "_stage_hook", broken)
    client = anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0)
    assert len(agent.run_anthropic(client, clock="tagged", questions=agent.QUESTIONS[:3])) == 3
"""


@pytest.mark.parametrize("broken", [True, False], ids=["fell-back", "rewritten"])
def test_a_marked_test_whose_requests_fell_back_fails(pytester: pytest.Pytester, broken: bool) -> None:
    make_project(pytester, TEST.format(broken=broken))
    result = pytester.runpytest_inprocess("--record-mode=all")
    if not broken:
        result.assert_outcomes(passed=1)
        return
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "telos fell back to the original request during this test ('plan' x3)" in out, out


def test_a_conversation_that_keeps_falling_back_is_said_once_loudly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from telos_wrap import pipeline

    def broken(stage: str) -> None:
        if stage == "plan":
            raise RuntimeError("injected")

    monkeypatch.setattr(pipeline, "_stage_hook", broken)
    system = "You are terse.\n" * 600
    with serve(Emulator()) as url:
        telos_wrap.patch()
        reset_failures()
        try:
            client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
            messages: list[dict[str, str]] = []
            with caplog.at_level(logging.WARNING, logger="telos_wrap"), telos_wrap.session("falls") as s:
                for n in range(4):
                    messages.append({"role": "user", "content": f"question {n}"})
                    client.messages.create(
                        model="claude-sonnet-4-5", max_tokens=64, system=system, messages=messages
                    )
                    messages.append({"role": "assistant", "content": "answer"})
                stats = s.stats
        finally:
            telos_wrap.unpatch()
    loud = [r for r in caplog.records if "keep falling back" in r.getMessage()]
    assert len(loud) == 1, [r.getMessage() for r in caplog.records]
    message = loud[0].getMessage()
    assert loud[0].levelno == logging.WARNING
    # The session named by its hash, as spans name it (sessions/hashed.py), never by its id.
    assert f"conversation {session_hash('falls')} keep" in message
    assert "stage 'plan' failed: RuntimeError" in message
    assert "patch(strict=True)" in message
    assert stats.fallbacks == 4 and stats.requests == 4
    assert telos_wrap.failure_counts() == {"plan": 4}


def test_the_fixture_sees_sdk_objects_as_the_sdk_sends_them() -> None:
    """Anthropic's tool-use loop (``response.content`` appended) in a ``telos_cache`` fixture: no
    fallback, and the captured requests are plain JSON (the replay reads them)."""
    from telos_wrap.emulator import ToolCall, tool_loop
    from telos_wrap.testing.pytest_plugin import TelosCache

    telos_wrap.unpatch()
    tools = [{"name": "lookup", "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}]
    script = [ToolCall("lookup", {"id": "1"}), ToolCall("lookup", {"id": "2"})]
    with serve(Emulator(replier=tool_loop(script, "done"))) as url, TelosCache("t-objects") as cache:
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        messages: list[dict[str, object]] = [{"role": "user", "content": "find them"}]
        while True:
            response = client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=64,
                system="You are terse.\n" * 600,
                tools=tools,
                messages=messages,
            )
            messages.append({"role": "assistant", "content": response.content})
            if response.stop_reason != "tool_use":
                break
            results = [
                {"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
                for b in response.content
                if b.type == "tool_use"
            ]
            messages.append({"role": "user", "content": results})
        assert cache.fallbacks == {}
        assert cache.stats.requests == 3 and cache.stats.fallbacks == 0
        assert len(cache.requests) == 3
        assert cache.requests[-1].kwargs["messages"][1]["content"][0]["type"] == "tool_use"
        assert cache.report().requests == 3
