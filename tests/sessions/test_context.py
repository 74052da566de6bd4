"""The session context: sync/async, nesting, task propagation, implicit and hint-named sessions."""

from __future__ import annotations

import asyncio

import anthropic
import pytest

import telos_wrap
from telos_wrap import TelosHintError
from telos_wrap.sessions import current_session, implicit_session, named_session

from .convo import MODEL, messages_for


def implicittenant_of(client: anthropic.Anthropic) -> str:
    """The tenant digest the patch layer derives from ``client`` (no isolation hint)."""
    from telos_wrap.ir.hints import TelosHints
    from telos_wrap.patch.turns import tenant_of

    return tenant_of(client, TelosHints())


def test_nested_sessions_restore_the_outer_one() -> None:
    outer, inner = telos_wrap.session("outer"), telos_wrap.session("inner")
    assert current_session() is None
    with outer:
        assert current_session() is outer
        with inner:
            assert current_session() is inner
            with outer:  # re-entering is allowed
                assert current_session() is outer
            assert current_session() is inner
        assert current_session() is outer
    assert current_session() is None


def test_out_of_order_exit_is_refused() -> None:
    a, b = telos_wrap.session(), telos_wrap.session()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="out of order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    assert current_session() is None


def test_async_with_flows_into_tasks_and_stays_isolated() -> None:
    async def child(expected: telos_wrap.Session) -> str:
        await asyncio.sleep(0)
        found = current_session()
        assert found is expected
        return found.id

    async def main() -> None:
        async with telos_wrap.session("parent") as parent:
            assert await asyncio.create_task(child(parent)) == "parent"

            async def own(n: int) -> str:
                async with telos_wrap.session(f"own-{n}") as mine:
                    return await child(mine)

            assert await asyncio.gather(*(own(n) for n in range(5))) == [f"own-{n}" for n in range(5)]
            assert current_session() is parent
        assert current_session() is None

    asyncio.run(main())


def test_generated_ids_and_options() -> None:
    a, b = telos_wrap.session(), telos_wrap.session()
    assert a.id != b.id and a.id.startswith("s-")
    sess = telos_wrap.session(engine="anthropic", ttl="1h", strict=True)
    assert (sess.hints.engine, sess.hints.ttl, sess.strict) == ("anthropic", "1h", True)
    with pytest.raises(TelosHintError, match="valid values"):
        telos_wrap.session(ttl="3d")
    with pytest.raises(TelosHintError, match="valid keys"):
        telos_wrap.session(hints={"bogus": 1})


def test_calls_outside_a_session_share_a_stable_implicit_session(claude: anthropic.Anthropic) -> None:
    for turn in range(3):
        claude.messages.create(model=MODEL, max_tokens=8, messages=messages_for(turn))
    body = {"model": MODEL, "messages": messages_for(2)}
    implicit = implicit_session("anthropic", body, tenant=implicittenant_of(claude))
    assert implicit.implicit and implicit.id.startswith("implicit-")
    assert implicit.stats.requests == 3
    assert implicit.stats.cache_breaks == 0


def test_telos_hint_session_names_the_live_session(claude: anthropic.Anthropic) -> None:
    live = telos_wrap.session("by-name")
    assert named_session("by-name") is live
    claude.messages.create(
        model=MODEL,
        max_tokens=8,
        messages=messages_for(0),
        telos_hint={"session": "by-name"},
    )
    assert live.stats.requests == 1
    fresh = named_session("never-seen")
    assert fresh.id == "never-seen" and named_session("never-seen") is fresh
