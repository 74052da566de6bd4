"""``usage_of`` reads any response it is given, streams sent without ``patch()`` included: the report
of an unpatched stream equals the patched one's, so a before/after comparison of a streaming app
needs no chunk parsing of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import telos_wrap
from telos_wrap import usage_of

from .harness import Wire, client_for, kwargs_for


def _anthropic_raw(wire: Wire) -> Any:
    stream = client_for("anthropic", wire).messages.create(**kwargs_for("anthropic"), stream=True)
    assert usage_of(stream) is None, "nothing arrived yet"
    list(stream)
    return usage_of(stream)


def _anthropic_helper(wire: Wire) -> Any:
    with client_for("anthropic", wire).messages.stream(**kwargs_for("anthropic")) as stream:
        stream.until_done()
    return usage_of(stream)


def _anthropic_async_helper(wire: Wire) -> Any:
    async def run() -> Any:
        client = client_for("anthropic", wire, is_async=True)
        async with client.messages.stream(**kwargs_for("anthropic")) as stream:
            await stream.until_done()
        return usage_of(stream)

    return asyncio.run(run())


def _openai_raw(wire: Wire) -> Any:
    stream = client_for("openai", wire).chat.completions.create(
        **kwargs_for("openai"), stream=True, stream_options={"include_usage": True}
    )
    usage_of(stream)
    list(stream)
    return usage_of(stream)


def _openai_async_raw(wire: Wire) -> Any:
    async def run() -> Any:
        stream = await client_for("openai", wire, is_async=True).chat.completions.create(
            **kwargs_for("openai"), stream=True, stream_options={"include_usage": True}
        )
        usage_of(stream)
        async for _ in stream:
            pass
        return usage_of(stream)

    return asyncio.run(run())


def _openai_helper(wire: Wire) -> Any:
    with client_for("openai", wire).chat.completions.stream(
        **kwargs_for("openai"), stream_options={"include_usage": True}
    ) as stream:
        stream.until_done()
    return usage_of(stream)


def _responses_raw(wire: Wire) -> Any:
    stream = client_for("responses", wire).responses.create(**kwargs_for("responses"), stream=True)
    usage_of(stream)
    list(stream)
    return usage_of(stream)


STREAMS: dict[str, Callable[[Wire], Any]] = {
    "anthropic-raw": _anthropic_raw,
    "anthropic-helper": _anthropic_helper,
    "anthropic-async-helper": _anthropic_async_helper,
    "openai-raw": _openai_raw,
    "openai-async-raw": _openai_async_raw,
    "openai-helper": _openai_helper,
    "responses-raw": _responses_raw,
}


@pytest.mark.parametrize("kind", list(STREAMS))
def test_usage_of_an_unpatched_stream_equals_the_patched_ones(kind: str) -> None:
    unpatched = STREAMS[kind](Wire())
    telos_wrap.patch()
    patched = STREAMS[kind](Wire())
    assert patched is not None and patched.raw_input is not None
    assert unpatched == patched


def test_a_patched_stream_is_read_once_by_telos_not_twice() -> None:
    """``usage_of`` on a stream ``patch()`` observes does not add a reader of its own."""
    telos_wrap.patch()
    stream = client_for("anthropic", Wire()).messages.create(**kwargs_for("anthropic"), stream=True)
    usage_of(stream)
    assert not getattr(stream, "_telos_tapped", False)
    list(stream)
    assert usage_of(stream) is not None
