"""Fleet learning (sessions/learning/fleet.py): what one conversation of an application learned
about its system prompt's template serves the next conversations of that template.

Real SDK clients over real HTTP to the emulator (a fresh emulator per conversation: the second one
cannot read the first one's cache, only the facts); real Redis, single server and cluster.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap.failopen import failure_counts, reset_failures
from telos_wrap.sessions import MemoryStore, RedisStore
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.learning import fleet as fleet_module
from telos_wrap.sessions.learning.digests import SHARED_KEY, block_lines, token_print
from telos_wrap.sessions.learning.spans import locate
from telos_wrap.sessions.stores.breaker import breaker_of
from tests.over_http import emulator_over_http
from tests.stores import fleet_blobs

from .fleet_app import MODEL, app_system, converse, messages_for

TURNS = 5


def skeleton_regex(line: str) -> str:
    """A line's token print under the shared key (what a fact says of a line: digests, no text)."""
    return token_print(SHARED_KEY, line)


def _conversation(
    store: Any, conv: int, *, turns: int = TURNS, fleet: bool | None = None, **system: Any
) -> tuple[telos_wrap.Session, list[tuple[int, int]]]:
    with emulator_over_http() as wire:
        client = wire.anthropic()
        with telos_wrap.session(f"conv-{conv}", store=store, fleet_learning=fleet) as sess:
            usage = converse(client, conv, turns, **system)
        client.close()
    return sess, usage


def _no_break_after_first(usage: list[tuple[int, int]]) -> bool:
    """Every request reads at least everything the previous one read or wrote."""
    return all(usage[t][0] >= usage[t - 1][0] + usage[t - 1][1] for t in range(1, len(usage)))


def test_second_conversation_does_not_pay_the_first_change(patched: None) -> None:
    store = MemoryStore()
    first, usage1 = _conversation(store, 1)
    assert first.stats.cache_breaks == 1 and not _no_break_after_first(usage1)  # the first change
    second, usage2 = _conversation(store, 2)
    assert second.stats.cache_breaks == 0
    assert _no_break_after_first(usage2), usage2
    assert usage2[1][0] >= usage2[0][1] > 1000  # request 1 reads what request 0 wrote
    assert {span.origin for span in second.volatile_spans} == {"fleet"}
    # explain says where each fact came from: another conversation, at its request 1.
    explained = second.explain(0)
    assert "learned by another conversation of this application" in explained
    assert "at its request 1" in explained
    assert "adopted from the fleet" in explained
    assert "learned by this conversation" in first.explain(1)
    # Control: without fleet learning the same second conversation pays the break.
    third, usage3 = _conversation(store, 3, fleet=False)
    assert third.stats.cache_breaks == 1 and not _no_break_after_first(usage3)


def test_patch_option_and_session_option(patched: None) -> None:
    store = MemoryStore()
    _conversation(store, 1)
    telos_wrap.patch(fleet_learning=False)
    off, _ = _conversation(store, 2)
    assert off.stats.cache_breaks == 1
    on, _ = _conversation(store, 3, fleet=True)  # the session's own option wins
    assert on.stats.cache_breaks == 0
    with pytest.raises(telos_wrap.TelosOptionError, match="fleet_learning"):
        telos_wrap.patch(fleet_learning="yes")
    with pytest.raises(telos_wrap.TelosHintError, match="fleet_learning"):
        telos_wrap.session("x", fleet_learning=1)


def test_a_one_off_edit_is_never_offered(patched: None) -> None:
    store = MemoryStore()
    # Conversation 1 edits its tone line once (turn 2 on): a suspect, never learned, never published.
    first, _ = _conversation(store, 1, edit=lambda turn: turn >= 2)
    assert all(span.kind in ("value", "list") for span in first.volatile_spans)
    text = next(iter(fleet_blobs(store).values()))
    facts = fleet_module.decode(text)
    assert facts and "formal" not in text and all(fact.kind in ("value", "list") for fact in facts)
    # Conversation 2 makes the same edit: it pays its own break there (nothing moves it in advance).
    second, usage = _conversation(store, 2, edit=lambda turn: turn >= 2)
    assert second.stats.cache_breaks == 1
    assert usage[2][0] < usage[1][0] + usage[1][1]
    tone = app_system(2, 2, edit=True).split("\n").index("Tone: formal and brief, no small talk.")
    assert not any(span.line <= tone < span.line + span.lines for span in second.volatile_spans)


def test_what_moves_is_a_whole_unit_seen_to_change(patched: None) -> None:
    store = MemoryStore()
    first, _ = _conversation(store, 1)
    with emulator_over_http() as wire:
        client = wire.anthropic()
        with telos_wrap.session("conv-2", store=store) as second:
            client.messages.create(
                model=MODEL, max_tokens=16, system=app_system(2, 0), messages=messages_for(0)
            )
        sent = json.loads(wire.bodies[0])
        client.close()
    learned = {(s.block, s.kind, s.line) for s in first.volatile_spans}
    assert {(s.block, s.kind, s.line) for s in second.volatile_spans} == learned
    # On the wire: the system prompt minus exactly the lines conversation 1 saw change (the clock
    # line; the environment's UPTIME and JOB lines between its stable HOME and LANG lines).
    system = "".join(block["text"] for block in sent["system"])
    prompt = app_system(2, 0).split("\n")
    moved = [line for line in prompt if line.startswith(("Server clock:", "UPTIME=", "JOB_"))]
    assert system.split("\n") == [line for line in prompt if line not in moved]
    tail = json.dumps(sent["messages"][-1])
    assert all(json.dumps(line)[1:-1] in tail for line in moved)


def test_poisoned_entries_are_ignored(patched: None) -> None:
    store = MemoryStore()
    first, _ = _conversation(store, 1)
    key = runtime_of(first)._key  # the tenant's digest key (the emulator client's credentials and base URL)
    [entry] = fleet_blobs(store)
    good = fleet_module.decode(fleet_blobs(store)[entry])
    assert {fact.kind for fact in good} == {"value", "list"}

    def fact(**changes: Any) -> dict[str, Any]:
        return {**good[0].to_json(), **changes}

    hostile = [
        fact(own=["(a+)+$"]),  # not a token print: never read
        fact(before=r"(?<=x)\d+"),  # not a token print
        fact(own=["*.*.*"]),  # nothing but holes
        fact(own=[skeleton_regex("x"), skeleton_regex("y")]),  # not its line count
        fact(by=["Ana Lopez"]),  # a contributor that is not a digest
        fact(kind="present"),  # learned on sight: never shared
        fact(block=-1),
        fact(lines=10_000),
        fact(own=[skeleton_regex("You are somebody else")]),  # another prompt's line (a wrong template)
        fact(kind="list", lines=1, own=[skeleton_regex("HOME=/home/agent")],
             before=skeleton_regex("HOME=/home/agent"), after=skeleton_regex("HOME=/home/agent")),  # no place
    ]  # fmt: skip
    entries = [
        "not json",
        json.dumps({"v": 1, "facts": [{"kind": 3}, "x", None, {}]}),
        json.dumps({"v": 1, "facts": hostile}),
        json.dumps({"v": 1, "facts": hostile}) + " " * 70_000,
        json.dumps({"v": 2, "facts": [good[0].to_json()]}),
    ]
    entry_key = entry
    for n, text in enumerate(entries):
        store.put_blob(entry_key, fleet_module.FACTS, text)
        reset_failures()
        started = time.perf_counter()
        sess, _ = _conversation(store, 10 + n)
        assert time.perf_counter() - started < 20
        assert failure_counts() == {}
        assert sess.stats.cache_breaks == 1  # as a conversation without facts: learned at first change
        assert all(span.origin == "" for span in sess.volatile_spans)
    # Read back: only the records made of line skeletons with no value in them; those two are then
    # refused by the check on the prompt (the line is not there; no single place fits).
    kept = fleet_module.decode(json.dumps({"v": 1, "facts": hostile}))
    assert [f.to_json() for f in kept] == hostile[-2:]
    view = (app_system(30, 0),)
    assert fleet_module.adopt(view, kept, key) == ()
    assert len(fleet_module.adopt(view, good, key)) == len(good)
    # A prompt that opens with another line (another assistant) is another application (issue 42):
    # it is offered none of these facts and learns its own at its first change.
    store.put_blob(entry_key, fleet_module.FACTS, fleet_module.encode(good))
    other, _ = _conversation(store, 20, app="Another Corp")
    assert other.stats.cache_breaks == 1 and all(span.origin == "" for span in other.volatile_spans)
    # A prompt where the units are not where the facts say is offered nothing that moves.
    assert fleet_module.adopt(("You are somebody else.\nBe concise.",), good, key) == ()


def test_a_failing_store_never_breaks_the_call(patched_lenient: None) -> None:
    class Failing(MemoryStore):
        def get_blob(self, session_id: str, key: str) -> str | None:
            if session_id.startswith(fleet_module.FLEET_PREFIX):
                raise ConnectionError("down")
            return super().get_blob(session_id, key)

        def put_blob(self, session_id: str, key: str, text: str) -> None:
            if session_id.startswith(fleet_module.FLEET_PREFIX):
                raise ConnectionError("down")
            super().put_blob(session_id, key, text)

    store = Failing()
    reset_failures()
    _first, usage = _conversation(store, 1)
    # Every call answered and rewritten; the fleet read's failure went to the store's breaker (the
    # session then goes on with this process's state, as for any store failure: docs/sessions.md).
    assert len(usage) == TURNS and usage[-1][0] > 1000
    assert set(failure_counts()) == {"session.store"}
    assert breaker_of(store).is_open  # counted by the store's breaker (one warning per window)


def test_async_conversations_share_facts(patched: None) -> None:
    store = MemoryStore()
    _conversation(store, 1)

    async def second() -> tuple[telos_wrap.Session, list[int]]:
        with emulator_over_http() as wire:
            http = wire.async_anthropic()  # the same key and base URL as the first: one tenant
            reads = []
            async with telos_wrap.session("conv-async", store=store) as sess:
                for turn in range(3):
                    reply = await http.messages.create(
                        model=MODEL, max_tokens=16, system=app_system(7, turn), messages=messages_for(turn)
                    )
                    reads.append(reply.usage.cache_read_input_tokens or 0)
            await http.close()
        return sess, reads

    sess, reads = asyncio.run(second())
    assert sess.stats.cache_breaks == 0 and reads[1] > 1000


@pytest.mark.redis
def test_fleet_on_redis(patched: None, store_url: str, redis_prefix: str) -> None:
    store = RedisStore(store_url, prefix=redis_prefix, ttl=300)
    first, _ = _conversation(store, 1)
    assert first.stats.cache_breaks == 1
    second, usage = _conversation(store, 2)
    assert second.stats.cache_breaks == 0 and _no_break_after_first(usage)
    keys = [k.decode() for k in store.redis.scan_iter(match=f"{redis_prefix}*", count=1000)]
    [fleet_key] = [k for k in keys if fleet_module.FLEET_PREFIX in k]
    pattern = r"\{telos-fleet:[0-9a-f]{32}:[0-9a-f]{32}\}:blobs"  # namespace: the tenant's digest
    assert re.fullmatch(re.escape(redis_prefix) + pattern, fleet_key)
    assert 0 < store.redis.ttl(fleet_key) <= 300
    store.close()


def test_template_key() -> None:
    body = {"system": app_system(1, 0), "messages": []}
    key = fleet_module.template_key("anthropic", body)
    assert key is not None
    assert fleet_module.template_key("anthropic", {"system": app_system(2, 5)}) == key  # values only
    assert fleet_module.template_key("anthropic", {"system": app_system(1, 0, edit=True)}) != key
    assert fleet_module.template_key("anthropic", {"system": app_system(1, 0, app="Other Inc")}) != key
    assert fleet_module.template_key("anthropic", {"system": "Today 10:00\nBe brief."}) is None  # too little
    chat = {"messages": [{"role": "system", "content": app_system(1, 0)}, {"role": "user", "content": "hi"}]}
    assert fleet_module.template_key("openai_chat", chat) == key
    assert fleet_module.template_key("openai_responses", {"instructions": app_system(3, 1)}) == key


def test_openai_chat_conversations_share_facts(patched: None) -> None:
    store = MemoryStore()
    breaks = []
    for conv in (1, 2):
        with emulator_over_http() as wire:
            client = wire.openai()
            with telos_wrap.session(f"chat-{conv}", store=store) as sess:
                for turn in range(3):
                    client.chat.completions.create(
                        model="gpt-5",
                        messages=[{"role": "system", "content": app_system(conv, turn)}, *messages_for(turn)],
                    )
            client.close()
        breaks.append(sess.stats.cache_breaks)
    assert breaks == [1, 0]
    assert {span.origin for span in sess.volatile_spans} == {"fleet"}


_PIECES = [*"ab1 .*^$-\n", "0123ab", "(?<=", "\\S+"]
#: Real line skeletons of the prompt (so some facts place), and hostile text.
_LINES = app_system(0, 0).split("\n")
_REAL = [skeleton_regex(line) for line in _LINES[:6] + _LINES[-6:]]
_TEXT = st.one_of(st.sampled_from(_REAL), st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
_RECORD = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["value", "list", "lines", "region", "present", 3, None]),
        "block": st.one_of(st.integers(-2, 3), st.text(max_size=2)),
        "lines": st.integers(-1, 12),
        "learned_at": st.integers(-1, 5),
        "before": st.one_of(st.none(), _TEXT),
        "after": st.one_of(st.none(), _TEXT),
        "own": st.one_of(st.none(), _TEXT, st.lists(_TEXT, max_size=3)),
        "by": st.one_of(st.none(), st.lists(st.sampled_from(["0123456789ab", "x", ""]), max_size=3)),
    },
)


_ENV = _LINES.index("HOME=/home/agent")
#: Facts a conversation of this prompt learns (the clock line; the environment's live lines).
_GOOD = [
    {"kind": "value", "block": 0, "lines": 1, "learned_at": 1,
     "before": _REAL[0], "after": _REAL[2], "own": [_REAL[1]]},
    {"kind": "list", "block": 0, "lines": 2, "learned_at": 1, "before": skeleton_regex(_LINES[_ENV]),
     "after": skeleton_regex(_LINES[-2]),
     "own": [skeleton_regex(_LINES[_ENV + 1]), skeleton_regex(_LINES[_ENV + 2])]},
]  # fmt: skip
_MUTATED = st.tuples(st.sampled_from(_GOOD), _RECORD).map(lambda pair: {**pair[0], **pair[1]})


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(
        st.one_of(_RECORD, st.sampled_from(_GOOD), _MUTATED, st.integers(), st.text(max_size=5)), max_size=12
    )
)
def test_any_stored_facts_are_read_safely(records: list[Any]) -> None:
    """Whatever a store holds: reading never raises, keeps only line skeletons without values, and
    every span adopted from it is one whole unit of the prompt, cut exactly once."""
    facts = fleet_module.decode(json.dumps({"v": 1, "facts": records}))
    assert len(facts) <= fleet_module.MAX_FACTS
    view = (app_system(3, 1),)
    lines = view[0].split("\n")
    adopted = fleet_module.adopt(view, facts)
    event(f"adopted {min(len(adopted), 2)}")
    for span in adopted:
        assert span.origin == "fleet" and span.kind in ("value", "list", "lines", "region")
        # Learned on this prompt's own text as the learner would have: whole lines, found once (the
        # first layer; later layers are checked on the text the earlier ones left).
        if span.learned_at == min(f.learned_at for f in facts):
            found = locate(span, block_lines(SHARED_KEY, view[0]))
            assert found == (span.line, span.line + span.lines - 1)
            assert span.line >= 0 and span.line + span.lines <= len(lines)


def test_application_key_tells_assistants_apart_and_pools_one_assistants_users() -> None:
    """Issue 42: the pool is the API, the number of system blocks, the tool names and the opening
    line (values masked): two assistants that share a policy but not their opening are two
    applications; one assistant's prompts that name their user after the opening line are one."""
    tools = [{"name": "refund", "input_schema": {"type": "object"}}]
    key = fleet_module.application_key("anthropic", {"system": app_system(1, 0), "tools": tools})
    assert key is not None
    user = app_system(2, 3).replace("\n", "\nYou are helping Ana Lopez (account 1000).\n", 1)
    assert fleet_module.application_key("anthropic", {"system": user, "tools": tools}) == key
    other = app_system(1, 0, app="Other Inc")  # another opening line: another assistant
    assert fleet_module.application_key("anthropic", {"system": other, "tools": tools}) != key
    named = "You are helping Ana Lopez.\n" + app_system(1, 0)
    assert fleet_module.application_key("anthropic", {"system": named, "tools": tools}) != key
    assert fleet_module.application_key("anthropic", {"system": app_system(1, 0)}) != key  # no tool
    two = [{"type": "text", "text": app_system(1, 0)}, {"type": "text", "text": "Be kind."}]
    assert fleet_module.application_key("anthropic", {"system": two, "tools": tools}) != key
    assert fleet_module.application_key("anthropic", {"system": "Today 10:00\nBe brief."}) is None
    # The API it is sent on: block numbering differs between system, system messages, instructions.
    chat = {"messages": [{"role": "system", "content": app_system(1, 0)}], "tools": tools}
    assert fleet_module.application_key("openai_chat", chat) not in (key, None)
    # Another tenant's namespace: another key for the same prompt.
    assert (
        fleet_module.application_key("anthropic", {"system": app_system(1, 0), "tools": tools}, (), "t2")
        != key
    )


def _fact(**fields: Any) -> fleet_module.Fact:
    base: dict[str, Any] = {"kind": "list", "block": 0, "lines": 2, "learned_at": 1}
    base.update(fields)
    return fleet_module.Fact(**base)


_JOBS = (skeleton_regex("JOB_1=up (pid 4121)"), skeleton_regex("JOB_2=up (pid 4122)"))


def test_facts_of_one_place_in_two_users_prompts_merge_into_one() -> None:
    """What two conversations' prompts differ in becomes a hole of a token print; the merged fact
    fits a third user's prompt, and only where its own lines and size are the unit's."""
    ana = _fact(
        before=skeleton_regex("You are helping Ana Lopez."), after=skeleton_regex("Rules:"), own=_JOBS
    )
    bruno = _fact(
        before=skeleton_regex("You are helping Bruno Novak."), after=skeleton_regex("Rules:"), own=_JOBS
    )
    [merged] = fleet_module.merged([ana], [bruno])
    assert merged.before.split(".")[3:] == ["*", "*"] and merged.after == ana.after
    view = (
        "Intro line.\nYou are helping Chloe Okafor.\nJOB_1=up (pid 4121)\nJOB_2=up (pid 4122)\n"
        "Rules:\nBe kind.",
    )
    assert fleet_module.adopt(view, [ana]) == ()  # Ana's neighbour is not in Chloe's prompt
    [span] = fleet_module.adopt(view, [merged])
    assert (span.line, span.lines, span.origin) == (2, 2, "fleet")
    # Its own lines must be the unit's: the same anchors around other lines fit nothing.
    other_unit = (
        "Intro line.\nYou are helping Chloe Okafor.\nBe polite to everyone.\nAnswer in English.\n"
        "Rules:\nBe kind.",
    )
    assert fleet_module.adopt(other_unit, [merged]) == ()
    # A value whose own line holds the name: own line and neighbour generalized together.
    one = _fact(
        kind="value",
        lines=1,
        before="^",
        own=(skeleton_regex("Hi Ana, it is 10:02 now."),),
        after=skeleton_regex("Address her as Ana."),
    )
    two = _fact(
        kind="value",
        lines=1,
        before="^",
        own=(skeleton_regex("Hi Bruno, it is 10:07 now."),),
        after=skeleton_regex("Address him as Bruno."),
    )
    [joined] = fleet_module.merged([one], [two])
    assert joined.own[0].split(".")[1] == "*" and joined.after.split(".")[1] == "*"
    # Not merged: another unit (every line differs), a different number of words, another block,
    # or an own line that would keep less than half of its words.
    other = _fact(before=skeleton_regex("Tools:"), after=skeleton_regex("Be brief."), own=_JOBS[::-1])
    assert len(fleet_module.merged([ana], [other])) == 2
    longer = _fact(before=skeleton_regex("You are helping Ana Maria Lopez."), after=ana.after, own=_JOBS)
    assert len(fleet_module.merged([ana], [longer])) == 2
    assert len(fleet_module.merged([ana], [replace(bruno, block=1)])) == 2
    thin = _fact(kind="value", lines=1, before="^", own=(skeleton_regex("Ana Lopez here"),), after=one.after)
    thin2 = _fact(
        kind="value", lines=1, before="^", own=(skeleton_regex("Bruno Novak here"),), after=one.after
    )
    assert len(fleet_module.merged([thin], [thin2])) == 2
    # A merged record is read back as well-formed (the format that guards the store).
    assert fleet_module.decode(fleet_module.encode([merged, joined])) == (merged, joined)


def test_a_fact_whose_holes_fit_many_places_fits_none() -> None:
    """An anchor with holes that fits two lines of the prompt places nothing (issue 42)."""
    fact = _fact(
        kind="value", lines=1, own=(skeleton_regex("Balance: 12 EUR"),),
        before=fleet_module.merged(
            [_fact(kind="value", lines=1, own=(skeleton_regex("Balance: 12 EUR"),),
                   before=skeleton_regex("Customer Ana"), after="$")],
            [_fact(kind="value", lines=1, own=(skeleton_regex("Balance: 12 EUR"),),
                   before=skeleton_regex("Customer Bruno"), after="$")],
        )[0].before,
        after="$",
    )  # fmt: skip
    assert fact.before.endswith(".*")
    once = ("Customer Chloe\nBalance: 3 EUR",)
    assert len(fleet_module.adopt(once, [fact])) == 1
    twice = ("Customer Chloe\nCustomer Dana\nBalance: 3 EUR",)
    assert fleet_module.adopt(twice, [fact]) == ()


def test_explain_says_what_early_per_user_text_costs_the_application(patched: None) -> None:
    """Issue 34: a user's name early in the system prompt makes every conversation write the shared
    text after it again; ``explain`` says so at a later conversation's first request, and how to fix
    it. A prompt the same for everybody gets no such note."""
    store = MemoryStore()
    rules = "".join(f"Rule: answer precisely and politely, citing policy section {n}.\n" for n in range(120))

    def converse(name: str) -> telos_wrap.Session:
        system = f"You are the support assistant of Example Corp.\nYou are helping {name}.\n{rules}Be brief."
        with emulator_over_http() as wire:
            client = wire.anthropic()
            with telos_wrap.session(f"user-{name}", store=store) as sess:
                for turn in range(2):
                    client.messages.create(
                        model=MODEL, max_tokens=16, system=system, messages=messages_for(turn)
                    )
            client.close()
        return sess

    first = converse("Ana Lopez")
    assert "application:" not in first.explain(0)  # nothing to compare with yet
    second = converse("Bruno Novak")
    explained = second.explain(0)
    assert "application: system block 0 line 1 is text of this conversation" in explained
    assert "telos does not move stable caller text on its own" in explained
    assert "application:" not in second.explain(1)  # said once, at the conversation's first request
    assert "Bruno" not in "".join(fleet_blobs(store).values())  # the shape is digests, never text
    same = MemoryStore()
    for _ in range(2):
        with emulator_over_http() as wire:
            client = wire.anthropic()
            with telos_wrap.session(store=same) as sess:
                client.messages.create(model=MODEL, max_tokens=16, system=rules, messages=messages_for(0))
            client.close()
        assert "application:" not in sess.explain(0)
