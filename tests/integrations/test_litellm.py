"""LiteLLM's SDK path, with and without ``patch()``: an OpenAI-compatible provider (``openai/<model>``) and
its own Anthropic provider (``anthropic/<model>``).

For ``openai/`` LiteLLM calls the official ``openai`` client, so ``patch()`` sees the request there; for
``anthropic/`` it posts with its own HTTP client, and telos rewrites the call in ``litellm.completion``
(``patch/litellm.py``). Either way it returns its own ``ModelResponse``; ``usage_of()`` normalizes
that object's own ``usage`` field (docs/integrations.md).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

# LiteLLM's own bundled model table instead of fetching it on import (no network; its documented
# switch): the suite runs offline and does not wait on retries.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("litellm", reason="install the extra: pip install 'telos-wrap[integrations]'")

import litellm

import telos_wrap
from telos_wrap.sessions.hashed import session_hash

from .agent_kit import (
    _POLICY,
    ANTHROPIC_MODEL,
    CHAT_TOOLS,
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
    clock_prompt,
    parameters_of,
    run_both,
)

#: Tool schemas built from a dict, the way LiteLLM users write them.
TOOLS = CHAT_TOOLS


def _kwargs(
    url: str, messages: list[dict[str, Any]], stream: bool, provider: str = "openai"
) -> dict[str, Any]:
    cloud: dict[str, Any] = {}
    if provider == "anthropic":  # LiteLLM's own client, to the emulator's /v1/messages
        model, api_base = f"anthropic/{ANTHROPIC_MODEL}", url
    elif provider == "bedrock":  # Bedrock's Anthropic (invoke) route, SigV4-signed with dummy keys
        model, api_base = "bedrock/invoke/us.anthropic.claude-sonnet-4-5-20250929-v1:0", url
        cloud = {"aws_access_key_id": "x", "aws_secret_access_key": "y", "aws_region_name": "us-east-1"}
    else:
        model, api_base = f"openai/{OPENAI_MODEL}", f"{url}/openai/v1"
    return {
        "model": model,
        "api_base": api_base,
        "api_key": "x",
        "messages": messages,
        "tools": TOOLS,
        "stream": stream,
        "max_retries": 0,
        **cloud,
    }


def _step(messages: list[dict[str, Any]], message: Any) -> bool:
    """Append the assistant turn and the tool results; False when the agent is done."""
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.function.name, "arguments": c.function.arguments},
        }
        for c in (message.tool_calls or [])
    ]
    messages.append(
        {"role": "assistant", "content": message.content, **({"tool_calls": calls} if calls else {})}
    )
    for c in calls:
        result = TOOL_FUNCTIONS[c["function"]["name"]](**json.loads(c["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": str(result)})
    return bool(calls)


def _step_objects(messages: list[Any], message: Any) -> bool:
    """LiteLLM's function-calling docs, as written: the response's ``Message`` object appended."""
    messages.append(message)
    for c in message.tool_calls or []:
        result = TOOL_FUNCTIONS[c.function.name](**json.loads(c.function.arguments))
        messages.append({"role": "tool", "tool_call_id": c.id, "content": str(result)})
    return bool(message.tool_calls)


def agent(mode: str, clock: bool, provider: str = "openai", objects: bool = False) -> Any:
    step = _step_objects if objects else _step

    def run(url: str) -> Any:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": ""},
            {"role": "user", "content": QUESTION},
        ]

        def system() -> None:
            messages[0] = {"role": "system", "content": clock_prompt() if clock else SYSTEM_PROMPT}

        if mode == "async":

            async def main() -> Any:
                while True:
                    system()
                    response = await litellm.acompletion(**_kwargs(url, messages, False, provider))
                    if not step(messages, response.choices[0].message):
                        return _plain(messages[1:])

            return asyncio.run(main())
        while True:
            system()
            if mode == "stream":
                chunks = list(litellm.completion(**_kwargs(url, messages, True, provider)))
                response = litellm.stream_chunk_builder(chunks, messages=messages)
            else:
                response = litellm.completion(**_kwargs(url, messages, False, provider))
                # LiteLLM's own object, not the SDK's: usage_of() normalizes its usage field.
                report = telos_wrap.usage_of(response)
                usage = response.usage
                cached = usage.prompt_tokens_details.cached_tokens or 0
                assert report is not None and report.cache_read == cached
                if provider != "openai":  # exact figures: Anthropic's disjoint counters, added up
                    assert report.cache_write == usage.cache_creation_input_tokens
                    assert report.raw_input is not None
                    assert report.raw_input + report.cache_read + report.cache_write == usage.prompt_tokens
            if not step(messages, response.choices[0].message):
                return _plain(messages[1:])

    return run


@pytest.mark.parametrize("clock", [False, True], ids=["stable", "clock"])
@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_litellm_openai_compatible_agent(mode: str, clock: bool, before_after: Any) -> None:
    name = f"litellm-openai-{mode}-{'clock' if clock else 'stable'}"
    before_after(name, agent(mode, clock), openai_engine=True)


@pytest.mark.parametrize(
    ("provider", "mode", "clock"),
    [
        *(("anthropic", mode, clock) for mode in ("sync", "async", "stream") for clock in (False, True)),
        ("bedrock", "sync", True),
    ],
)
def test_litellm_anthropic_provider_agent(provider: str, mode: str, clock: bool, before_after: Any) -> None:
    """LiteLLM's native Claude routes: 0 reads unpatched (LiteLLM adds no breakpoint)."""
    name = f"litellm-{provider}-{mode}-{'clock' if clock else 'stable'}"
    plain, patched = before_after(name, agent(mode, clock, provider))
    assert all(r.flavour == "anthropic" for r in patched.emulator.requests)
    assert plain.cache_read() == 0


def _plain(messages: list[Any]) -> list[Any]:
    """The transcript as plain data, so runs compare by value whatever the loop appended."""
    return [m.model_dump(exclude_none=True) if hasattr(m, "model_dump") else m for m in messages]


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_litellm_loop_with_message_objects(mode: str, before_after: Any) -> None:
    """LiteLLM's function-calling docs append ``response.choices[0].message`` (a ``Message`` object)
    to ``messages``: read as LiteLLM sends it, no fallback, >= 0.95 of the bound (issue 32)."""
    _, patched = before_after(
        f"litellm-anthropic-{mode}-message-objects", agent(mode, False, "anthropic", objects=True)
    )
    # The same conversation written as dicts sends the same bytes.
    _, as_dicts = run_both(agent(mode, False, "anthropic"))
    assert [r.body for r in patched.emulator.requests] == [r.body for r in as_dicts.emulator.requests]


_ONCE = """
import json, os, sys
import telos_wrap
from telos_wrap.patch import litellm as hook

telos_wrap.patch()  # before LiteLLM is imported: its dispatcher then holds the wrapped main.completion
import litellm

rewrites = []
original = hook._rewrite
hook._rewrite = lambda *args: rewrites.append(1) or original(*args)
url = os.environ["EMULATOR_URL"]
messages = [{"role": "system", "content": "You are terse.\\n" * 400}, {"role": "user", "content": "hi"}]
kwargs = dict(model="anthropic/claude-sonnet-4-5", api_base=url, api_key="x", max_retries=0)
with telos_wrap.session("once") as s:
    litellm.completion(messages=messages, **kwargs)
    litellm.completion(messages=messages + [{"role": "assistant", "content": "ok"},
                                            {"role": "user", "content": "again"}], **kwargs)
print(json.dumps({"rewrites": len(rewrites), "requests": s.stats.requests,
                  "breaks": s.stats.cache_breaks, "failures": telos_wrap.failure_counts()}))
"""


def test_each_litellm_call_is_rewritten_once() -> None:
    """telos wraps ``litellm.completion`` and ``litellm.main.completion``; LiteLLM's dispatcher
    (``litellm.completion`` in 1.110+) calls the second, holding it from import time, so an
    application that patches before importing LiteLLM goes through both wrappers. Only the outermost
    call rewrites: two calls, two rewrites, no cache break (a re-entrancy guard, patch/litellm.py)."""
    import subprocess
    import sys

    from .agent_kit import served

    with served() as (emulator, url):
        env = {**os.environ, "EMULATOR_URL": url, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        done = subprocess.run(
            [sys.executable, "-c", _ONCE], env=env, capture_output=True, text=True, timeout=300, check=False
        )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(emulator.requests) == 2
    assert seen == {"rewrites": 2, "requests": 2, "breaks": 0, "failures": {}}, seen


def _messages() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": QUESTION}]


def _one_call(url: str) -> Any:
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": QUESTION}]
    return litellm.completion(**_kwargs(url, messages, False, "anthropic"))


@pytest.mark.parametrize("strict", [False, True], ids=["fail-open", "strict"])
def test_litellm_native_route_fails_open(strict: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A telos failure sends the caller's own request (``strict=True`` raises instead)."""
    from telos_wrap import pipeline
    from telos_wrap.errors import TelosStageError
    from telos_wrap.failopen import reset_failures

    from .agent_kit import served

    reset_failures()
    with served() as (emulator, url):
        telos_wrap.patch(strict=strict)

        def broken(stage: str) -> None:
            if stage == "plan":
                raise RuntimeError("injected")

        monkeypatch.setattr(pipeline, "_stage_hook", broken)
        if strict:
            with pytest.raises(TelosStageError):
                _one_call(url)
            assert emulator.requests == []
            return
        response = _one_call(url)
    assert response.choices[0].message is not None
    assert telos_wrap.failure_counts() == {"plan": 1}
    (sent,) = emulator.requests
    assert sent.status == 200
    assert "cache_control" not in json.dumps(sent.body), "the caller's request, as LiteLLM built it"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_litellm_fallbacks_count_in_the_session_and_are_said_loudly(
    mode: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fallback on LiteLLM's own route counts and logs as on the SDK routes: ``s.stats.fallbacks``
    counts each request sent as LiteLLM built it, the conversation that keeps falling back is said
    once at WARNING, and each response's usage is still recorded (issue 32)."""
    import logging

    from telos_wrap import pipeline
    from telos_wrap.failopen import reset_failures

    from .agent_kit import served

    def broken(stage: str) -> None:
        if stage == "plan":
            raise RuntimeError("injected")

    reset_failures()
    monkeypatch.setattr(pipeline, "_stage_hook", broken)
    messages = _messages()
    kwargs = {"model": f"anthropic/{ANTHROPIC_MODEL}", "api_key": "x", "max_retries": 0}
    with served() as (emulator, url):
        telos_wrap.patch()
        with (
            caplog.at_level(logging.WARNING, logger="telos_wrap"),
            telos_wrap.session(f"litellm-falls-{mode}") as s,
        ):
            for n in range(4):
                if mode == "async":
                    response = asyncio.run(litellm.acompletion(messages=messages, api_base=url, **kwargs))
                else:
                    response = litellm.completion(messages=messages, api_base=url, **kwargs)
                assert telos_wrap.usage_of(response) is not None
                messages += [
                    {"role": "assistant", "content": "Looking."},
                    {"role": "user", "content": f"and {n}?"},
                ]
            stats = s.stats
    failures = telos_wrap.failure_counts()
    reset_failures()  # the tests after this one count their own
    assert len(emulator.requests) == 4
    assert all("cache_control" not in json.dumps(r.body) for r in emulator.requests)
    assert failures == {"plan": 4}
    assert stats.fallbacks == 4 and stats.requests == 4
    assert stats.responses_with_usage == 4  # recorded for the requests that fell back too
    loud = [r.getMessage() for r in caplog.records if "keep falling back" in r.getMessage()]
    assert len(loud) == 1, [r.getMessage() for r in caplog.records]
    # Logs name a session by its hash, never its id (docs/observability.md).
    named = f"conversation {session_hash(f'litellm-falls-{mode}')}"
    assert named in loud[0] and "stage 'plan' failed: RuntimeError" in loud[0]
    assert f"litellm-falls-{mode}" not in loud[0]


def test_litellm_routes_per_provider() -> None:
    from telos_wrap.patch.litellm import engine_for

    assert engine_for("anthropic/claude-sonnet-4-5", None) == "litellm"
    assert engine_for("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock") == "litellm"
    assert engine_for("vertex_ai/claude-sonnet-4-5@20250929", "vertex_ai") == "litellm"
    assert engine_for("vertex_ai/gemini-2.5-pro", "vertex_ai") == "generic"
    assert engine_for("gemini/gemini-2.5-flash", None) == "generic"
    assert engine_for("bedrock/meta.llama3-70b", "bedrock") is None  # not known to cache
    assert engine_for("openai/gpt-4.1", None) is None  # the openai SDK patch covers it
    assert engine_for("groq/llama-3.3-70b", "groq") is None


def test_litellm_positional_model_and_messages_are_rewritten() -> None:
    from .agent_kit import served

    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": QUESTION}]
    with served() as (emulator, url):
        telos_wrap.patch()
        litellm.completion(f"anthropic/{ANTHROPIC_MODEL}", messages, api_base=url, api_key="x", max_retries=0)
        litellm.completion(
            f"anthropic/{ANTHROPIC_MODEL}", messages, 30.0, api_base=url, api_key="x", max_retries=0
        )
    first, third_positional = emulator.requests
    assert "cache_control" in json.dumps(first.body)
    assert "cache_control" not in json.dumps(third_positional.body)  # an unusual call: left as made
    assert telos_wrap.failure_counts() == {}


def _stream_twice(url: str, asked: bool, mode: str, patched: bool) -> tuple[list[list[Any]], Any]:
    """Two turns of one question as streams, in a session: the chunks each turn delivered."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": QUESTION}]
    extra = {"stream_options": {"include_usage": True}} if asked else {}
    session = telos_wrap.session()

    async def read_async() -> list[Any]:
        stream = await litellm.acompletion(**{**_kwargs(url, messages, True, "anthropic"), **extra})
        return [chunk async for chunk in stream]

    delivered = []
    with session:
        for _ in range(2):
            if mode == "async":
                chunks = asyncio.run(read_async())
            else:
                stream = litellm.completion(**{**_kwargs(url, messages, True, "anthropic"), **extra})
                chunks = list(stream)
                if patched and asked:  # reported once read to its end
                    assert telos_wrap.usage_of(stream) is not None
            delivered.append(chunks)
    return delivered, session


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("asked", [False, True], ids=["usage-not-asked", "usage-asked"])
def test_litellm_streams_count_in_the_session_stats(mode: str, asked: bool) -> None:
    """A LiteLLM stream's usage reaches the session's stats when the caller asks LiteLLM for it
    (``stream_options.include_usage``); without it the stream counts as a request whose usage was not
    reported. Either way the caller gets exactly the chunks it gets unpatched."""
    from .agent_kit import served

    with served() as (_, url):
        plain, _ = _stream_twice(url, asked, mode, patched=False)
        telos_wrap.patch()
        patched, session = _stream_twice(url, asked, mode, patched=True)
    usage_only = [[c for c in chunks if not c.choices] for chunks in patched]
    assert [len(u) for u in usage_only] == [len([c for c in chunks if not c.choices]) for chunks in plain]
    assert [len(u) for u in usage_only] == ([1, 1] if asked else [0, 0])
    assert [len(c) for c in patched] == [len(c) for c in plain]
    stats = session.stats
    if asked:
        assert (stats.requests, stats.responses_with_usage) == (2, 2)  # each stream counted once
        assert stats.cache_read > 0  # the second turn read what the first wrote
    else:
        assert (stats.requests, stats.responses_with_usage, stats.cache_read) == (2, 0, 0)
    assert telos_wrap.failure_counts() == {}


# -- issue 42: LiteLLM's anthropic/ route against the anthropic SDK on a live clock ---------------------

#: 90 stable policy lines below a line that states the present, rebuilt on every call.
_POLICY_LINES = "\n".join(f"Policy {n + 1}: {rule}" for n, rule in enumerate(_POLICY * 12) if n < 90)


def _find_customer(email: str) -> str:
    """Find a customer's account by e-mail address."""
    return f"{email}: account C105"


#: The suite's three tools and a fourth.
_FOUR = {**TOOL_FUNCTIONS, "find_customer": _find_customer}


def _clock(first_second: int) -> Any:
    """``Current date and time: 2026-11-23 10:00:SS``, one second later on every call."""
    seconds = iter(range(first_second, 60))
    return lambda: f"Current date and time: 2026-11-23 10:00:{next(seconds):02d}"


def _sdk_agent(stream: bool, first_second: int, clocks: list[str]) -> Any:
    """The agent on the anthropic SDK: system prompt, tools and tool results in Anthropic's shapes."""
    import anthropic

    tools = [
        {"name": n, "description": f.__doc__, "input_schema": parameters_of(f)} for n, f in _FOUR.items()
    ]
    clock = _clock(first_second)

    def run(url: str) -> Any:
        client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        while True:
            clocks.append(clock())
            kwargs = {
                "model": ANTHROPIC_MODEL,
                "max_tokens": 512,
                "system": f"{clocks[-1]}\n{_POLICY_LINES}",
                "messages": messages,
                "tools": tools,
            }
            if stream:
                with client.messages.stream(**kwargs) as events:
                    response = events.get_final_message()
            else:
                response = client.messages.create(**kwargs)
            messages.append(
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]}
            )
            uses = [b for b in response.content if b.type == "tool_use"]
            if not uses:
                return _plain(messages[1:])[-1]["content"][-1]["text"]
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": b.id, "content": str(_FOUR[b.name](**b.input))}
                        for b in uses
                    ],
                }
            )

    return run


def _litellm_agent(stream: bool, first_second: int, clocks: list[str]) -> Any:
    """The same agent on LiteLLM's ``anthropic/`` route, in OpenAI's shapes."""
    tools = [
        {
            "type": "function",
            "function": {"name": n, "description": f.__doc__, "parameters": parameters_of(f)},
        }
        for n, f in _FOUR.items()
    ]
    clock = _clock(first_second)

    def run(url: str) -> Any:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": ""},
            {"role": "user", "content": QUESTION},
        ]
        while True:
            clocks.append(clock())
            messages[0] = {"role": "system", "content": f"{clocks[-1]}\n{_POLICY_LINES}"}
            kwargs = {**_kwargs(url, messages, stream, "anthropic"), "tools": tools}
            if stream:
                response = litellm.stream_chunk_builder(list(litellm.completion(**kwargs)), messages=messages)
            else:
                response = litellm.completion(**kwargs)
            message = response.choices[0].message
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in (message.tool_calls or [])
            ]
            messages.append(
                {"role": "assistant", "content": message.content, **({"tool_calls": calls} if calls else {})}
            )
            for c in calls:
                result = _FOUR[c["function"]["name"]](**json.loads(c["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": str(result)})
            if not calls:
                return message.content

    return run


def _clock_run(agent: Any) -> tuple[int, int, list[Any]]:
    """``agent`` patched against a fresh emulator: its cache reads, the oracle bound of what it sent
    (the clock line declared volatile, benchmarks/_bench_bound.py), and the emulator's records."""
    from benchmarks._bench_bound import SessionBound

    from telos_wrap.failopen import reset_failures

    from .agent_kit import _read, served

    reset_failures()
    clocks: list[str] = []
    with served() as (emulator, url):
        telos_wrap.patch()
        try:
            agent(clocks)(url)
        finally:
            telos_wrap.unpatch()
    assert telos_wrap.failure_counts() == {}
    records = [r for r in emulator.requests if r.status == 200 and r.usage is not None]
    assert len(records) == len(emulator.requests) == len(clocks) == 9
    bound = SessionBound()
    total = sum(bound.add("anthropic", r.body, [clock]) for r, clock in zip(records, clocks, strict=True))
    reads = 0
    for r in records:
        reads += _read(r.usage)
    return reads, total, records


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "stream"])
def test_litellm_anthropic_route_reads_what_the_sdk_reads_on_a_live_clock(
    stream: bool, record_property: Any
) -> None:
    """Issue 42: an agent whose system prompt opens with ``Current date and time: …`` (rebuilt on every
    call, one second later each time) above 90 policy lines, with 4 tools, in a 9-request tool loop.
    Through the anthropic SDK and through LiteLLM's own ``anthropic/`` route telos reads >= 0.97 of
    the bound, sync and streamed (the issue measured 0.782 on LiteLLM's route against 0.988)."""
    for make in (_sdk_agent, _litellm_agent):
        read, bound, records = _clock_run(lambda clocks, make=make: make(stream, 1, clocks))
        route = "anthropic-sdk" if make is _sdk_agent else "litellm-anthropic"
        mode = "stream" if stream else "sync"
        record_property(
            "summary", f"{route}-{mode}-present-first: efficiency {read / bound:.1%} (bound {bound:,})"
        )
        assert all(r.flavour == "anthropic" for r in records)
        assert bound > 9_000, bound
        assert read >= 0.97 * bound, (make.__name__, read, bound, [_read_of(r) for r in records])


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "stream"])
def test_litellm_anthropic_route_pays_what_the_sdk_pays_for_a_first_change(
    stream: bool, record_property: Any
) -> None:
    """The same agent whose clock starts on the hour (``10:00:00``: a time that may be a fixed schedule,
    not learned on sight): its first change at request 1 costs one cache break on either route, the
    same on LiteLLM's as on the SDK's (within the 1% their different bytes make), and every request
    after it reads the whole system prompt again."""
    (sdk_read, sdk_bound, _), (route_read, route_bound, records) = (
        _clock_run(lambda clocks: _sdk_agent(stream, 0, clocks)),
        _clock_run(lambda clocks: _litellm_agent(stream, 0, clocks)),
    )
    mode = "stream" if stream else "sync"
    record_property("summary", f"anthropic-sdk-{mode}-first-change: efficiency {sdk_read / sdk_bound:.1%}")
    record_property(
        "summary", f"litellm-anthropic-{mode}-first-change: efficiency {route_read / route_bound:.1%}"
    )
    reads = [_read_of(r) for r in records]
    assert reads[1] < reads[2], reads  # the break: the system prompt is written again once
    assert all(later >= reads[2] for later in reads[3:]), reads
    assert route_read / route_bound >= sdk_read / sdk_bound - 0.01, (
        route_read,
        route_bound,
        sdk_read,
        sdk_bound,
    )


def _read_of(record: Any) -> int:
    from .agent_kit import _read

    return _read(record.usage)


@pytest.mark.parametrize("signal", ["api_key", "api_base"])
def test_litellm_tenants_have_implicit_sessions_of_their_own(signal: str) -> None:
    """Promise T1 on LiteLLM's own route: two callers whose conversations open alike, with their own
    ``api_key`` (or ``api_base``), get implicit sessions of their own, as two SDK clients do
    (``tenant_of``). Before issue 42 the route named the implicit session without them: both callers'
    turns went into one session, which counted the second caller's first request as a rewrite of
    the first caller's history."""
    from telos_wrap.sessions import registry as session_registry

    from .agent_kit import served

    session_registry._implicit.clear()
    with served() as (_, url), served() as (_, other_url):
        telos_wrap.patch()
        callers = (
            [("key-of-a", url), ("key-of-b", url)] if signal == "api_key" else [("x", url), ("x", other_url)]
        )
        for key, base in callers:
            messages = _messages()
            for turn in range(2):
                litellm.completion(
                    model=f"anthropic/{ANTHROPIC_MODEL}",
                    api_base=base,
                    api_key=key,
                    messages=messages,
                    max_retries=0,
                )
                messages += [
                    {"role": "assistant", "content": f"answer {turn}"},
                    {"role": "user", "content": "and?"},
                ]
    sessions = list(session_registry._implicit.values())
    session_registry._implicit.clear()
    assert len(sessions) == 2, [s.id for s in sessions]
    assert all(s.stats.requests == 2 and s.stats.cache_breaks == 0 for s in sessions)
    assert all("key-of-" not in s.id for s in sessions)
    assert telos_wrap.failure_counts() == {}
