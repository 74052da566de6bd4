"""Issue 42: what one conversation learns never moves a stable line of another.

The invariant: a system line that never changed within any conversation of its own assistant is
never moved out of the system prompt, on any request, whatever the other assistants of the tenant
(sharing a trailing policy) and whatever a misused session id taught. Checked on the two scenarios
of the issue, and as a property over generated multi-assistant workloads (several prompts per
assistant, some with live values, some without; Anthropic Messages, Chat Completions, Responses;
mixed orders), through ``SessionRuntime.prepare_request`` on one shared store with fleet learning on.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions import MemoryStore, Session
from telos_wrap.sessions.core import runtime_of

RULES = [
    f"Rule {chr(65 + n // 26)}{chr(65 + n % 26)}: follow the shared policy, section {chr(97 + n % 26)}."
    for n in range(40)
]
ENGINE = {"anthropic": "anthropic", "openai_chat": "openai", "openai_responses": "openai"}


def _body(api: str, system: str, turn: int) -> dict[str, Any]:
    # Each conversation's own questions (its user's line, else its assistant's opening line).
    who = next((line for line in system.split("\n") if "helping" in line), system.split("\n")[0])
    messages: list[dict[str, Any]] = []
    for t in range(turn + 1):
        messages.append({"role": "user", "content": f"Question number {t} ({who}): where is my order?"})
        if t < turn:
            messages.append({"role": "assistant", "content": f"Answer number {t}: on its way."})
    if api == "anthropic":
        return {"model": "claude-opus-4-8", "max_tokens": 16, "system": system, "messages": messages}
    if api == "openai_chat":
        return {"model": "gpt-5", "messages": [{"role": "system", "content": system}, *messages]}
    return {"model": "gpt-5", "instructions": system, "input": messages}


def _system_sent(api: str, body: dict[str, Any]) -> str:
    """The system prompt as sent (where the caller put it)."""
    if api == "anthropic":
        system = body.get("system")
        return system if isinstance(system, str) else "\n".join(b.get("text", "") for b in system or [])
    if api == "openai_chat":
        texts = []
        for message in body["messages"]:
            if message["role"] not in ("system", "developer"):
                break
            content = message["content"]
            texts.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content))
        return "\n".join(texts)
    return str(body.get("instructions", ""))


def _send(
    store: MemoryStore, sid: str, api: str, system: str, turn: int, session: Session | None = None
) -> str:
    sess = session or Session(sid, store=store)
    _, prepared = runtime_of(sess).prepare_request(
        api, _body(api, system, turn), PrepareOptions(engine=ENGINE[api]), tenant="t"
    )
    return _system_sent(api, prepared.body)


def _in_place(lines: list[str], sent: str) -> list[str]:
    """The lines of ``lines`` missing from the system prompt as sent."""
    kept = set(sent.split("\n"))
    return [line for line in lines if line.strip() and line not in kept]


def _config(n: int) -> str:
    return json.dumps({"last_sync": f"2026-11-23T10:0{n}:00Z", "region": "eu-west"}, indent=2)


def test_a_live_configuration_assistant_moves_nothing_of_a_stable_one() -> None:
    """Assistant A opens with a live configuration block; assistant B with three stable lines; both
    end with the same 40 rules and have no tools. After A's conversations, B's first request (and
    every later one) keeps all of B's lines in place, on each API."""
    for api in ENGINE:
        store = MemoryStore()
        for conv in range(2):
            session = Session(f"a-{conv}", store=store)
            for turn in range(3):
                system_a = "Live configuration:\n" + _config(turn) + "\n" + "\n".join(RULES)
                _send(store, "", api, system_a, turn, session)
        assert session.volatile_spans  # A learned its live block (and shared it)
        opening = [
            "You sell subscriptions. Be friendly and precise with every customer.",
            "Price list: Basic 9.99 EUR, Pro 29.99 EUR.",
            "Support hours: 08:00-18:00 CET.",
        ]
        system_b = "\n".join([*opening, *RULES])
        for conv in range(2):
            session = Session(f"b-{conv}", store=store)
            for turn in range(3):
                sent = _send(store, "", api, system_b, turn, session)
                assert _in_place(system_b.split("\n"), sent) == [], (api, conv, turn)
            assert session.volatile_spans == ()


def test_one_session_id_shared_by_two_customers_teaches_the_fleet_nothing() -> None:
    """A misuse: one session id for two customers' conversations, interleaved. Whatever that session
    learns for itself, a brand-new, correctly used session keeps its customer line in place."""
    for api in ENGINE:
        store = MemoryStore()

        def system(name: str, account: str) -> str:
            return "\n".join(
                [
                    "You are the support assistant of Example Corp.",
                    f"You are helping customer {name} (account {account}).",
                    *RULES,
                ]
            )

        shared = Session("shared-ticket", store=store)
        customers = [("Farid Haddad", "C105"), ("Ana Lopez", "C212")]
        for turn in range(6):
            name, account = customers[turn % 2]
            _send(store, "", api, system(name, account), turn // 2, shared)
        for conv, (name, account) in enumerate([("Chloe Okafor", "C301"), ("Farid Haddad", "C105")]):
            fresh = Session(f"new-{conv}", store=store)
            prompt = system(name, account)
            for turn in range(3):
                sent = _send(store, "", api, prompt, turn, fresh)
                assert _in_place(prompt.split("\n"), sent) == [], (api, conv, turn)
            assert all(span.origin == "" for span in fresh.volatile_spans)


# -- the property ------------------------------------------------------------------------------------

_OPENINGS = [
    "You are the billing assistant.",
    "You sell subscriptions.",
    "Live configuration:",
    "You review pull requests.",
]


@st.composite
def workloads(draw: st.DrawFn) -> list[tuple[int, int, int, str]]:
    """``(assistant, conversation, turn, api)`` requests in a mixed order."""
    assistants = draw(st.integers(2, 3))
    plan = []
    for assistant in range(assistants):
        apis = draw(
            st.lists(st.sampled_from(list(ENGINE)), min_size=1, max_size=2)
        )  # one or two per assistant
        for conv in range(draw(st.integers(1, 3))):
            api = apis[conv % len(apis)]
            plan.append([(assistant, conv, turn, api) for turn in range(draw(st.integers(1, 4)))])
    order: list[tuple[int, int, int, str]] = []
    while any(plan):
        pick = draw(st.sampled_from([n for n, items in enumerate(plan) if items]))
        order.append(plan[pick].pop(0))
    return order


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order=workloads(), live=st.lists(st.booleans(), min_size=3, max_size=3), users=st.booleans())
def test_a_line_that_never_changed_in_its_assistant_never_moves(
    order: list[tuple[int, int, int, str]], live: list[bool], users: bool
) -> None:
    store = MemoryStore()
    sessions: dict[tuple[int, int], Session] = {}

    def prompt(assistant: int, conv: int, turn: int) -> tuple[list[str], set[str]]:
        lines = [_OPENINGS[assistant]]
        volatile: set[str] = set()
        if users:
            lines.append(f"You are helping user {['Ana', 'Bruno', 'Chloe'][conv]} of team {assistant}.")
        if live[assistant]:
            value = f"Server clock: 2026-11-23 10:{turn:02d}:{conv:02d} (sync {7 * turn + conv} done)"
            lines.append(value)
            volatile.add(value)
        lines += RULES
        return lines, volatile

    for assistant, conv, turn, api in order:
        session = sessions.setdefault((assistant, conv), Session(f"s-{assistant}-{conv}-{api}", store=store))
        lines, volatile = prompt(assistant, conv, turn)
        sent = _send(store, "", api, "\n".join(lines), turn, session)
        stable = [line for line in lines if line not in volatile]
        assert _in_place(stable, sent) == [], (assistant, conv, turn, api)
    origins = {span.origin for session in sessions.values() for span in session.volatile_spans}
    event(f"spans learned here: {'' in origins}, adopted from the fleet: {'fleet' in origins}")
