"""DSPy's ``ReAct`` agent through DSPy's built-in HTTP client and over LiteLLM, with and without
``patch()``.

``dspy.LM`` (DSPy >= 3.4) has two engines. The default, ``engine="auto"``, sends a model it knows
through DSPy's own built-in HTTP client (its vendored ``lm15``, neither SDK nor LiteLLM): telos hooks
that client (``patch/lm15.py``), sync, async and streamed. ``engine="litellm"`` calls
``litellm.completion``: telos rewrites the ``anthropic/`` route there (``patch/litellm.py``) and the
``openai/`` route in the ``openai`` client LiteLLM calls.

ReAct does not use the API's tool calling: the model answers in DSPy's field format
(``[[ ## next_tool_name ## ]]`` ...), so the emulator's replier writes that text.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any

import pytest

# LiteLLM's bundled model table instead of fetching it on import (test_litellm.py).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("dspy", reason="install the extra: pip install 'telos-wrap[integrations-dspy]'")

import dspy

import telos_wrap
from telos_wrap.emulator import Reply
from telos_wrap.failopen import reset_failures
from telos_wrap.sessions.hashed import session_hash

from .agent_kit import (
    ANTHROPIC_MODEL,
    FEW_CALLS,
    FINAL_TEXT,
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
    Run,
    run_both,
)

#: ReAct's trajectory, one ``observation_<i>`` field per tool result, in the prompt it sends.
_OBSERVATION = "[[ ## observation_"


def _texts(body: Mapping[str, Any]) -> str:
    parts: list[Any] = [body.get("system")]
    for message in body.get("messages", []):
        parts.append(message.get("content"))
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, list):
            out.extend(block.get("text", "") for block in part if isinstance(block, Mapping))
    return "\n".join(out)


def react_replier(api: str, body: Mapping[str, Any]) -> Reply:
    """The model's side of ReAct: a tool per step from :data:`FEW_CALLS`, then ``finish``; then the
    answer when DSPy asks its extraction step (the one whose fields are ``reasoning`` / ``answer``)."""
    text = _texts(body)
    if "next_tool_name" not in text:
        return Reply(
            text=f"[[ ## reasoning ## ]]\nDone.\n\n[[ ## answer ## ]]\n{FINAL_TEXT}\n\n[[ ## completed ## ]]"
        )
    done = text.count(_OBSERVATION)
    name, args = (
        (FEW_CALLS[done].name, dict(FEW_CALLS[done].arguments)) if done < len(FEW_CALLS) else ("finish", {})
    )
    return Reply(
        text=f"[[ ## next_thought ## ]]\nStep {done + 1}.\n\n[[ ## next_tool_name ## ]]\n{name}\n\n"
        f"[[ ## next_tool_args ## ]]\n{json.dumps(args)}\n\n[[ ## completed ## ]]"
    )


#: The tool steps, ``finish``, and the extraction step.
REQUESTS = len(FEW_CALLS) + 2


def _lm(vendor: str, url: str, engine: str | None) -> Any:
    """``dspy.LM`` as DSPy's docs write it: the model, ``api_base`` and ``api_key`` (the engine only
    where a test names one)."""
    if vendor == "anthropic":
        model, api_base = f"anthropic/{ANTHROPIC_MODEL}", url
    else:
        model, api_base = f"openai/{OPENAI_MODEL}", f"{url}/openai/v1"
    chosen = {} if engine is None else {"engine": engine}
    # cache=False: DSPy's own response cache would answer the second run without a request.
    return dspy.LM(model, api_base=api_base, api_key="x", cache=False, num_retries=0, **chosen)


def _react() -> Any:
    signature = dspy.Signature("question -> answer", instructions=SYSTEM_PROMPT)
    return dspy.ReAct(signature, tools=list(TOOL_FUNCTIONS.values()), max_iters=6)


async def _streamed(react: Any) -> Any:
    """``dspy.streamify``: the LM streams each request; the program's prediction comes last."""
    final = None
    async for value in dspy.streamify(react)(question=QUESTION):
        if isinstance(value, dspy.Prediction):
            final = value
    return final


def _agent(vendor: str, engine: str | None = None, mode: str = "sync") -> Any:
    def run(url: str) -> Any:
        lm = _lm(vendor, url, engine)
        react = _react()
        with dspy.context(lm=lm):
            if mode == "async":
                return asyncio.run(react.acall(question=QUESTION)).answer
            if mode == "stream":
                return asyncio.run(_streamed(react)).answer
            return react(question=QUESTION).answer

    return run


def _native(vendor: str) -> bool:
    """Whether DSPy sends this LM through its built-in client (not LiteLLM)."""
    from dspy.clients.backend_selection import select_backend

    return bool(select_backend(_lm(vendor, "http://127.0.0.1:9", None)).native)


def _cache_fields(vendor: str, run: Any) -> list[bool]:
    """Per request: whether it carries the vendor's cache field."""
    if vendor == "anthropic":
        return ["cache_control" in json.dumps(r.body) for r in run.emulator.requests]
    return ["prompt_cache_key" in r.body for r in run.emulator.requests]


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_dspy_react_native_client(vendor: str, mode: str, before_after: Any) -> None:
    """DSPy's default engine, as its docs write the LM: telos sees its built-in client's traffic."""
    assert _native(vendor), "DSPy sends this LM through its built-in client"
    plain, patched = before_after(
        f"dspy-react-native-{vendor}-{mode}-stable",
        _agent(vendor, mode=mode),
        openai_engine=vendor == "openai",
        replier=react_replier,
        requests=REQUESTS,
    )
    assert patched.result == FINAL_TEXT
    assert all(_cache_fields(vendor, patched)[1:]), _cache_fields(vendor, patched)
    if mode == "stream":
        assert all(r.body.get("stream") is True for r in patched.emulator.requests)
    if vendor == "anthropic":
        assert plain.cache_read() == 0  # DSPy's client marks no breakpoint
        assert not any(_cache_fields(vendor, plain))


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_dspy_react_over_litellm(vendor: str, before_after: Any) -> None:
    plain, patched = before_after(
        f"dspy-react-litellm-{vendor}-stable",
        _agent(vendor, "litellm"),
        openai_engine=vendor == "openai",
        replier=react_replier,
        requests=REQUESTS,
    )
    assert patched.result == FINAL_TEXT
    if vendor == "anthropic":
        assert plain.cache_read() == 0  # neither DSPy nor LiteLLM marks a breakpoint


@pytest.mark.parametrize(
    ("mode", "hook"), [("sync", "_prepare"), ("async", "_aprepare"), ("stream", "_prepare")]
)
def test_each_native_call_is_rewritten_once_and_its_usage_recorded(
    mode: str, hook: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rewrite per HTTP request DSPy's client sends (sync: ``_send``; async: the async mirror's
    ``_send``; streamed: ``_stream_raw``), each counted in the caller's session with the usage the
    vendor reported."""
    from telos_wrap.patch import lm15

    from .agent_kit import served

    rewrites: list[str] = []
    original = getattr(lm15, hook)

    def counted(*args: Any) -> Any:
        rewrites.append(hook)
        return original(*args)

    monkeypatch.setattr(lm15, hook, counted)
    reset_failures()
    with served(react_replier) as (emulator, url):
        telos_wrap.patch()
        with telos_wrap.session(f"dspy-once-{mode}") as s:
            assert _agent("anthropic", mode=mode)(url) == FINAL_TEXT
            stats = s.stats
    usage = [r.usage for r in emulator.requests]
    assert len(emulator.requests) == REQUESTS
    assert rewrites == [hook] * REQUESTS
    assert telos_wrap.failure_counts() == {}
    assert (stats.requests, stats.fallbacks, stats.responses_with_usage) == (REQUESTS, 0, REQUESTS)
    assert stats.cache_read == sum(u["cache_read_input_tokens"] for u in usage) > 0
    assert stats.cache_write == sum(u["cache_creation_input_tokens"] for u in usage) > 0
    assert stats.output == sum(u["output_tokens"] for u in usage)


def test_a_native_call_inside_another_hooks_call_is_not_rewritten_again() -> None:
    """The once-only mark (``patch/once.py``) LiteLLM's hook sets around its call: DSPy's client
    reached inside it passes its request through as it built it."""
    from telos_wrap.patch.once import outermost

    agent = _agent("anthropic")

    def inside_another_hook(url: str) -> Any:
        with outermost():
            return agent(url)

    plain, patched = run_both(inside_another_hook, replier=react_replier)
    assert patched.result == plain.result == FINAL_TEXT
    assert [r.body for r in patched.emulator.requests] == [r.body for r in plain.emulator.requests]
    assert not any(_cache_fields("anthropic", patched))


@pytest.mark.parametrize("strict", [False, True], ids=["fail-open", "strict"])
def test_native_route_fails_open_and_says_so(
    strict: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A telos failure sends DSPy's own request, counted as a fallback in the session and said loudly
    at the third; ``strict=True`` raises before anything is sent."""
    import logging

    from telos_wrap import pipeline
    from telos_wrap.errors import TelosStageError

    from .agent_kit import served

    def broken(stage: str) -> None:
        if stage == "plan":
            raise RuntimeError("injected")

    reset_failures()
    monkeypatch.setattr(pipeline, "_stage_hook", broken)
    with served(react_replier) as (emulator, url):
        telos_wrap.patch(strict=strict)
        with (
            caplog.at_level(logging.WARNING, logger="telos_wrap"),
            telos_wrap.session("dspy-falls") as s,
        ):
            if strict:
                with pytest.raises(Exception) as raised:
                    _agent("anthropic")(url)
                chain: list[BaseException] = []
                error: BaseException | None = raised.value
                while error is not None:
                    chain.append(error)
                    error = error.__cause__ or error.__context__
                assert any(isinstance(e, TelosStageError) for e in chain), chain
                assert emulator.requests == []
                reset_failures()
                return
            assert _agent("anthropic")(url) == FINAL_TEXT
            stats = s.stats
    failures = telos_wrap.failure_counts()
    reset_failures()
    assert failures == {"plan": REQUESTS}
    assert (stats.requests, stats.fallbacks, stats.responses_with_usage) == (REQUESTS, REQUESTS, REQUESTS)
    assert not any(_cache_fields("anthropic", Run(None, emulator, {})))
    loud = [r.getMessage() for r in caplog.records if "keep falling back" in r.getMessage()]
    assert len(loud) == 1, [r.getMessage() for r in caplog.records]
    # Logs name a session by its hash, never its id (docs/observability.md).
    named = f"conversation {session_hash('dspy-falls')}"
    assert named in loud[0] and "stage 'plan' failed: RuntimeError" in loud[0]
    assert "dspy-falls" not in loud[0]


_LAZY = """
import json, sys
import wrapt
import telos_wrap

telos_wrap.patch()
before = sorted(m for m in sys.modules if m == "dspy" or m.startswith("dspy."))
import dspy
from dspy._vendor.lm15.providers.async_base import AsyncBaseProviderLM
from dspy._vendor.lm15.providers.base import BaseProviderLM

names = [k for k in telos_wrap.coverage() if k.startswith("dspy.")]
hooked = [telos_wrap.coverage()[k] for k in names]
telos_wrap.unpatch()
left = [telos_wrap.coverage()[k] for k in names]
wrapped = [isinstance(vars(cls)[name], wrapt.FunctionWrapper)
           for cls in (BaseProviderLM, AsyncBaseProviderLM) for name in ("_send", "_stream_raw")]
print(json.dumps({"before": before, "names": len(names), "hooked": hooked, "left": left, "wrapped": wrapped}))
"""


def test_patch_hooks_dspy_when_it_is_imported_and_unpatch_removes_it() -> None:
    """``patch()`` does not import DSPy; its client is hooked when DSPy is imported, and
    ``unpatch()`` puts back lm15's own methods."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _LAZY],
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "before": [],
        "names": 4,
        "hooked": [True] * 4,
        "left": [False] * 4,
        "wrapped": [False] * 4,
    }


def test_below_the_cacheable_minimum_the_native_bytes_are_dspys_own() -> None:
    """A short prompt cannot be cached: telos sends lm15's own request (same keys, same order)."""

    def ask(url: str) -> Any:
        with dspy.context(lm=_lm("anthropic", url, None)):
            return dspy.Predict("question -> answer")(question="Where is order 42?").answer

    def replier(api: str, body: Mapping[str, Any]) -> Reply:
        return Reply(text=f"[[ ## answer ## ]]\n{FINAL_TEXT}\n\n[[ ## completed ## ]]")

    plain, patched = run_both(ask, replier=replier)
    assert patched.result == plain.result == FINAL_TEXT
    assert patched.failures == {}
    sent = [json.dumps(r.body) for r in patched.emulator.requests]
    assert sent == [json.dumps(r.body) for r in plain.emulator.requests] and len(sent) == 1
    assert "cache_control" not in sent[0]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_native_responses_route(mode: str) -> None:
    """``model_type="responses"``: DSPy's client sends OpenAI Responses requests, routed as the
    ``openai`` client's are; each carries ``prompt_cache_key`` and its usage is in the session."""
    from dspy.lm15 import Message, Request

    from .agent_kit import served

    reset_failures()
    with served() as (emulator, url):
        telos_wrap.patch(engines={f"{url}/openai/v1": "openai"})
        lm = dspy.LM(
            f"openai/{OPENAI_MODEL}",
            model_type="responses",
            api_base=f"{url}/openai/v1",
            api_key="x",
            cache=False,
            num_retries=0,
        )

        def ask(messages: tuple[Any, ...]) -> Any:
            request = Request(model=lm.model, system=SYSTEM_PROMPT, messages=messages)
            return asyncio.run(lm.acall(request)) if mode == "async" else lm(request)

        with telos_wrap.session(f"dspy-responses-{mode}") as s:
            turns: tuple[Any, ...] = (Message.user(QUESTION),)
            first = ask(turns)
            ask((*turns, Message.assistant(first.text), Message.user("And order 43?")))
            stats = s.stats
    read = [r.usage["input_tokens_details"]["cached_tokens"] for r in emulator.requests]
    assert [r.path for r in emulator.requests] == ["/v1/responses"] * 2
    assert all(r.status == 200 and "prompt_cache_key" in r.body for r in emulator.requests)
    assert telos_wrap.failure_counts() == {}
    assert (stats.requests, stats.fallbacks, stats.responses_with_usage) == (2, 0, 2)
    assert stats.cache_read == sum(read) > 0
