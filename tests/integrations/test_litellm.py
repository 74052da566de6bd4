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

from .agent_kit import (
    ANTHROPIC_MODEL,
    CHAT_TOOLS,
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
    clock_prompt,
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
    assert f"conversation litellm-falls-{mode}" in loud[0] and "stage 'plan' failed: RuntimeError" in loud[0]


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
