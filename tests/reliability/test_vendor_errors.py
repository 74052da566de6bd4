"""Vendor and SDK exceptions reach the caller untouched: same type, status, body, message, request.

Each failure (4xx/5xx with a JSON body, a read timeout, a refused connection) is produced by the
transport under the real SDK; the same call is made unpatched and patched (fail-open and strict).
The exception the caller gets must be the SDK's own, with the same attributes, carrying the request
that actually went on the wire — and telos must count and log nothing: it is not telos' failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap import TelosError, pipeline
from tests.sdk_http import sdk_http

from .harness import Entry, Wire, client_for, entry, kwargs_for


def _status(status: int, body: dict[str, Any], **headers: str) -> Callable[[sdk_http.Request, int], Any]:
    return lambda request, attempt: sdk_http.Response(status, json=body, headers=headers)


def _raise(exc: Callable[..., Exception]) -> Callable[[sdk_http.Request, int], Any]:
    def fail(request: sdk_http.Request, attempt: int) -> Any:
        raise exc("transport failure", request=request)

    return fail


FAILURES: dict[str, Callable[[sdk_http.Request, int], Any]] = {
    "400": _status(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad field"}}
    ),
    "401": _status(401, {"type": "error", "error": {"type": "authentication_error", "message": "no key"}}),
    "429": _status(
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        **{"retry-after": "0"},
    ),
    "500": _status(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
    "529": _status(529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
    "timeout": _raise(sdk_http.ReadTimeout),
    "connection": _raise(sdk_http.ConnectError),
}
ENTRIES = [
    "anthropic-sync-create",
    "anthropic-async-create",
    "anthropic-sync-create_stream",
    "anthropic-async-stream_helper",
    "anthropic-sync-count_tokens",
    "openai-sync-create",
    "openai-async-create",
    "openai-sync-stream_helper",
    "openai-async-create_stream",
]


def _caught(e: Entry, wire: Wire) -> BaseException:
    with pytest.raises(Exception) as info:
        e.run(client_for(e.sdk, wire, is_async=e.is_async), kwargs_for(e.sdk))
    return info.value


def _attributes(exc: BaseException) -> dict[str, Any]:
    found: dict[str, Any] = {"type": type(exc), "message": getattr(exc, "message", str(exc))}
    for name in ("status_code", "body", "type", "code", "param", "request_id"):
        if hasattr(exc, name):
            found[name] = getattr(exc, name)
    response = getattr(exc, "response", None)
    if response is not None:
        found["response"] = (response.status_code, response.content, dict(response.headers))
    return found


def _telos_in_chain(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, TelosError):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


@pytest.mark.parametrize("strict", [False, True], ids=["fail-open", "strict"])
@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("entry_id", ENTRIES)
def test_vendor_errors_reach_the_caller_untouched(
    entry_id: str, failure: str, strict: bool, caplog: pytest.LogCaptureFixture
) -> None:
    e = entry(entry_id)
    unpatched = _caught(e, Wire(FAILURES[failure]))
    telos_wrap.patch(strict=strict)
    wire = Wire(FAILURES[failure])
    caplog.set_level(logging.DEBUG, logger="telos_wrap")
    patched = _caught(e, wire)

    assert _attributes(patched) == _attributes(unpatched)
    assert isinstance(patched, (anthropic.APIError, openai.APIError))
    assert not _telos_in_chain(patched), "a vendor error is never wrapped in (or chained to) a telos error"
    request = getattr(patched, "request", None)
    assert request is wire.requests[-1], "the exception carries the request that went on the wire"
    assert json.loads(request.content) == wire.bodies[-1]
    assert telos_wrap.failure_counts() == {}
    assert [
        r for r in caplog.records if r.name.startswith("telos_wrap") and r.levelno >= logging.WARNING
    ] == []


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_retries_resend_the_one_rewrite(sdk: str, is_async: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK retries inside ``request()``: telos rewrites once and every attempt sends the same bytes."""
    lifts: list[str] = []
    monkeypatch.setattr(
        pipeline, "_stage_hook", lambda stage: lifts.append(stage) if stage == "lift" else None
    )
    overloaded = FAILURES["529"] if sdk == "anthropic" else _status(503, {"error": {"message": "busy"}})
    wire = Wire(lambda request, attempt: overloaded(request, attempt) if attempt < 3 else None)
    monkeypatch.setattr(anthropic._base_client.BaseClient, "_calculate_retry_timeout", lambda *a, **k: 0.0)
    monkeypatch.setattr(openai._base_client.BaseClient, "_calculate_retry_timeout", lambda *a, **k: 0.0)
    telos_wrap.patch(strict=True)
    e = entry(f"{sdk}-{'async' if is_async else 'sync'}-create")
    outcome = e.run(client_for(sdk, wire, is_async=is_async, max_retries=2), kwargs_for(sdk))
    assert telos_wrap.usage_of(outcome.holder) is not None
    assert len(wire.sent) == 3 and lifts == ["lift"]
    assert wire.sent[0].raw == wire.sent[1].raw == wire.sent[2].raw
    assert [sent.headers["x-stainless-retry-count"] for sent in wire.sent] == ["0", "1", "2"]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_a_leniently_parsed_usage_is_read_without_a_warning(stream: bool) -> None:
    """A response whose token count is not a number (the SDK parses it as it is when strict
    response validation is off; the anthropic SDK's own suite sends one): telos reads it without
    pydantic's serializer warning (the suite runs with warnings as errors, so the warning was a
    failed 'usage' stage) and counts the unusable field as not reported."""
    message = {
        "id": "msg_lenient",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-5",
        "content": [{"type": "text", "text": "Hi there"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": "twelve", "output_tokens": 2},
    }

    def answer(request: sdk_http.Request) -> sdk_http.Response:
        if json.loads(request.content).get("stream"):
            events = [
                ("message_start", {"type": "message_start", "message": {**message, "content": []}}),
                ("message_stop", {"type": "message_stop"}),
            ]
            body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
            return sdk_http.Response(
                200, content=body.encode(), headers={"content-type": "text/event-stream"}
            )
        return sdk_http.Response(200, json=message)

    client = anthropic.Anthropic(
        api_key="k",
        http_client=sdk_http.Client(transport=sdk_http.MockTransport(answer)),
        _strict_response_validation=False,
    )
    telos_wrap.patch(strict=True)
    try:
        with telos_wrap.session("lenient") as s:
            kwargs: dict[str, Any] = {
                "model": "claude-opus-5",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "Hi"}],
            }
            if stream:  # read raw: the SDK's own stream helper warns on this usage itself
                for _ in client.messages.create(**kwargs, stream=True):
                    pass
            else:
                client.messages.create(**kwargs)
    finally:
        telos_wrap.unpatch()
    assert telos_wrap.failure_counts() == {}
    assert s.stats.requests == 1
    # An input count that is not a number: the response's usage is not reported, not a fallback.
    assert (s.stats.responses_with_usage, s.stats.unreported) == (0, 1)
