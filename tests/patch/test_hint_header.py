"""How a call's hint reaches the request layer: a private header whose name carries the call's token.

anthropic's beta resources merge their headers (``merge_headers``) before the request options are
captured, which keeps every header name but turns an ``Omit`` value into the SDK's plain ``omit``.
With the token in the value, a ``telos_hint`` given to ``client.beta.messages.create`` was lost
(the call went out as if it had none) and its entry stayed in the table of pending hints; with the
token in the name, every entry point delivers it and leaves nothing behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, EmulatorTransport
from telos_wrap.patch import calls
from tests.sdk_http import sdk_http

MODEL = "claude-opus-4-8"
SYSTEM = "You answer questions about the shop's orders.\n" * 200
MESSAGES = [{"role": "user", "content": "Where is order 7?"}]


class Sent:
    """The emulator, behind a transport that keeps each request's headers and body."""

    def __init__(self) -> None:
        self.inner = EmulatorTransport(Emulator())
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append((dict(request.headers), json.loads(request.content)))
        return self.inner.handle_request(request)


@pytest.fixture
def sent() -> Iterator[tuple[anthropic.Anthropic, Sent]]:
    wire = Sent()
    telos_wrap.patch()
    calls._pending.clear()
    try:
        with anthropic.Anthropic(
            api_key="k", http_client=sdk_http.Client(transport=sdk_http.MockTransport(wire))
        ) as client:
            yield client, wire
    finally:
        telos_wrap.unpatch()


def _marked(body: dict[str, Any]) -> bool:
    return "cache_control" in json.dumps(body)


ENTRY_POINTS: dict[str, Callable[..., Any]] = {
    "messages": lambda client, **extra: client.messages.create(
        model=MODEL, max_tokens=8, system=SYSTEM, messages=MESSAGES, **extra
    ),
    "beta.messages": lambda client, **extra: client.beta.messages.create(
        model=MODEL, max_tokens=8, system=SYSTEM, messages=MESSAGES, **extra
    ),
    "beta.messages betas=": lambda client, **extra: client.beta.messages.create(
        model=MODEL,
        max_tokens=8,
        system=SYSTEM,
        messages=MESSAGES,
        betas=["context-management-2025-06-27"],
        **extra,
    ),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_hint_reaches_the_request_and_leaves_no_entry(
    sent: tuple[anthropic.Anthropic, Sent], entry: str
) -> None:
    client, wire = sent
    with telos_wrap.session("hinted"):
        ENTRY_POINTS[entry](client)  # telos marks the cached prefix
        ENTRY_POINTS[entry](client, telos_hint={"disable": True})  # the SDK's own body: unmarked
    assert [_marked(body) for _, body in wire.requests] == [True, False]
    assert not calls._pending
    assert all(not name.startswith(calls.HINT_HEADER) for headers, _ in wire.requests for name in headers)


def test_a_stream_manager_entered_after_unpatch_sends_no_hint_header(
    sent: tuple[anthropic.Anthropic, Sent],
) -> None:
    client, wire = sent
    with telos_wrap.session("late"):
        manager = client.beta.messages.stream(
            model=MODEL,
            max_tokens=8,
            system=SYSTEM,
            messages=MESSAGES,
            telos_hint={"disable": True},  # type: ignore[call-arg]
        )
    telos_wrap.unpatch()
    with manager as stream:
        for _ in stream:
            pass
    headers, _ = wire.requests[-1]
    assert headers and all(not name.startswith(calls.HINT_HEADER) for name in headers)
