"""A telos bug never breaks the call.

Every stage fails open (original request, one warning), or raises in strict mode.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import telos_wrap
from telos_wrap import pipeline
from telos_wrap.errors import TelosStageError
from telos_wrap.failopen import failure_counts, reset_failures

from .capture import Capture

STAGES = [
    "engine",
    "lift",
    "session.before",
    "bridge.canonicalize",
    "bridge.relocate",
    "bridge.refpool",
    "bridge.invariants",
    "plan",
    "emit",
]
KWARGS = {
    "model": "claude-opus-5",
    "max_tokens": 64,
    "system": "You are terse.\nCurrent time: 2026-11-21T10:00:00",
    "tools": [
        {"name": "b", "input_schema": {"type": "object"}},
        {"name": "a", "input_schema": {"type": "object"}},
    ],
    "messages": [{"role": "user", "content": "hello"}],
}


@contextmanager
def fault_in(stage: str) -> Iterator[None]:
    def hook(name: str) -> None:
        if name == stage:
            raise RuntimeError(f"injected fault in {name}")

    pipeline._stage_hook = hook
    try:
        yield
    finally:
        pipeline._stage_hook = None


def unpatched_body() -> dict[str, object]:
    capture = Capture()
    capture.client().messages.create(**KWARGS)
    return capture.bodies[0]


@pytest.mark.parametrize("stage", STAGES)
def test_fault_sends_the_original_request_and_warns_once(
    stage: str, caplog: pytest.LogCaptureFixture
) -> None:
    original = unpatched_body()
    telos_wrap.patch()
    reset_failures()
    try:
        capture = Capture()
        client = capture.client()
        with fault_in(stage), caplog.at_level(logging.WARNING, logger="telos_wrap"):
            for _ in range(3):
                message = client.messages.create(**KWARGS)
    finally:
        telos_wrap.unpatch()
    assert all(body == original for body in capture.bodies)
    assert all(not name.startswith("x-telos-hint") for headers in capture.headers for name in headers)
    fell_back = [r for r in caplog.records if r.levelno == logging.WARNING and stage in r.getMessage()]
    # The call site's warning once (a conversation that keeps falling back is said apart, once:
    # tests/plugin/test_fallbacks.py).
    warnings = [r for r in fell_back if "keep falling back" not in r.getMessage()]
    assert len(warnings) == 1, "one warning per call site, not per call"
    # The call site is the caller's own line (the frames of telos, the SDK and wrapt are skipped).
    assert re.search(rf"at {re.escape(__file__)}:\d+", warnings[0].getMessage())
    assert failure_counts() == {stage: 3}
    assert message.content[0].text == "ok"
    assert telos_wrap.usage_of(message) is not None


@pytest.mark.parametrize("stage", STAGES)
def test_strict_mode_raises_naming_the_stage(stage: str) -> None:
    telos_wrap.patch(strict=True)
    try:
        client = Capture().client()
        with fault_in(stage), pytest.raises(TelosStageError) as info:
            client.messages.create(**KWARGS)
    finally:
        telos_wrap.unpatch()
    assert info.value.stage == stage
    assert isinstance(info.value.__cause__, RuntimeError)


def test_vendor_errors_pass_through_untouched() -> None:
    import anthropic

    from tests.sdk_http import sdk_http

    def reject(request: sdk_http.Request) -> sdk_http.Response:
        return sdk_http.Response(
            429,
            json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
            headers={"retry-after": "0"},
        )

    telos_wrap.patch()
    try:
        client = anthropic.Anthropic(
            api_key="k", max_retries=0, http_client=sdk_http.Client(transport=sdk_http.MockTransport(reject))
        )
        with pytest.raises(anthropic.RateLimitError) as info:
            client.messages.create(**KWARGS)
    finally:
        telos_wrap.unpatch()
    assert info.value.status_code == 429
    assert info.value.body == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
