"""Spans: telos' attributes and events on exactly one span per call, whoever traces it.

Under the anthropic SDK's own tracing (``anthropic.messages.create``), under OpenLLMetry's
instrumentors in both patch orders, and with no instrumentation (telos' own ``chat`` span); a cache
break is an event with its reason, a fallback an event with its stage; no attribute or event holds
prompt text (the canary).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap.engines.anthropic import AnthropicEngine
from tests.sdk_methods import sdk_methods_restored

from .conftest import CANARY, SYSTEM, Otel, assert_no_canary, run_session, telos_view

CACHE_KEYS = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens")


def _check_calls(spans: list[Any], calls: int) -> list[Any]:
    """The spans carrying telos' attributes: exactly one per call, each with the cache attributes."""
    ours = [span for span in spans if "telos.engine" in (span.attributes or {})]
    assert len(ours) == calls, [span.name for span in spans]
    for span in ours:
        attributes = span.attributes
        assert attributes["telos.outcome"] in ("rewritten", "untouched", "fell_back")
        assert len(attributes["telos.session"]) == 16
        for key in CACHE_KEYS:
            assert isinstance(attributes.get(key), int), (span.name, key)
    return ours


def _break_events(spans: list[Any]) -> list[dict[str, Any]]:
    return [
        dict(event.attributes) for span in spans for event in span.events if event.name == "telos.cache_break"
    ]


def _canary(spans: list[Any], *, all_attributes: bool) -> None:
    for span in spans:
        attributes = span.attributes if all_attributes else telos_view(span)
        assert_no_canary(dict(attributes))
        assert_no_canary([(e.name, dict(e.attributes)) for e in span.events if e.name.startswith("telos.")])


def test_sdk_native_span_gets_telos_attributes(otel: Otel, emulator: str, track: Any) -> None:
    client = track(
        anthropic.Anthropic(
            api_key="sk-secret-key",
            base_url=emulator,
            open_telemetry={"tracer_provider": otel.tracer_provider},
        )
    )
    s = run_session(client, "native-1")
    spans = otel.spans()
    assert [span.name for span in spans] == ["anthropic.messages.create"] * 3  # no span of telos' own
    ours = _check_calls(spans, 3)
    assert [span.attributes["telos.request.index"] for span in ours] == [0, 1, 2]
    assert all(span.attributes["telos.rewritten"] for span in ours)
    assert all(span.attributes["telos.breakpoints"] >= 1 for span in ours)
    # The streamed turn read what the first two wrote (the cache attributes are telos' on a stream
    # whose span the SDK ends before the last event).
    assert ours[2].attributes["gen_ai.usage.cache_read.input_tokens"] > 0
    events = _break_events(spans)
    assert [event["telos.break.reason"] for event in events] == ["system_changed"]
    assert events[0]["telos.break.location"] == "system[0]"
    assert events[0]["telos.break.tokens_at_risk"] > 0
    assert s.stats.cache_breaks == 1
    assert ours[1].attributes["telos.cache_break"] == "system_changed"
    _canary(spans, all_attributes=True)  # the SDK records no content by default either
    assert "sk-secret-key" not in repr([dict(span.attributes) for span in spans])
    assert s.id not in repr([dict(span.attributes) for span in spans])


def test_no_instrumentation_gives_one_span_of_telos_own(otel: Otel, emulator: str, track: Any) -> None:
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    run_session(client, "own-1")
    spans = otel.spans()
    assert [span.name for span in spans] == ["chat claude-opus-5"] * 3
    assert {span.instrumentation_scope.name for span in spans} == {"telos_wrap"}
    assert all(span.kind.name == "CLIENT" for span in spans)
    _check_calls(spans, 3)
    assert [event["telos.break.reason"] for event in _break_events(spans)] == ["system_changed"]
    _canary(spans, all_attributes=True)


def test_own_span_parent_is_the_callers_span(otel: Otel, emulator: str, track: Any) -> None:
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("agent-turn") as parent:
        client.messages.create(
            model="claude-opus-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    spans = {span.name: span for span in otel.spans()}
    child = spans["chat claude-opus-5"]
    assert child.parent.span_id == parent.get_span_context().span_id
    assert "telos.engine" not in spans["agent-turn"].attributes  # the caller's span is left alone


def test_fallback_is_an_event_with_its_stage(
    otel: Otel, emulator: str, track: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"boom {CANARY}")

    monkeypatch.setattr(AnthropicEngine, "emit", broken)
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    with telos_wrap.session("fallback-1"):
        client.messages.create(
            model="claude-opus-5", max_tokens=8, system=SYSTEM, messages=[{"role": "user", "content": "hi"}]
        )
    (span,) = otel.spans()
    assert span.attributes["telos.outcome"] == "fell_back"
    assert span.attributes["telos.rewritten"] is False
    stages = [e.attributes["telos.fallback.stage"] for e in span.events if e.name == "telos.fallback"]
    assert stages == ["emit"]
    assert otel.total("telos.requests", {"telos.outcome": "fell_back"}) == 1
    assert otel.total("telos.fallbacks") == 1
    _canary([span], all_attributes=True)


def test_untouched_request_says_why(otel: Otel, emulator: str, track: Any) -> None:
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    client.messages.create(
        model="claude-opus-5", max_tokens=8, messages=[{"role": "user", "content": "short"}]
    )
    (span,) = otel.spans()
    assert span.attributes["telos.outcome"] == "untouched"
    assert span.attributes["telos.untouched.reason"] == "below_minimum"
    assert "telos.breakpoints" not in span.attributes


# -- OpenLLMetry ------------------------------------------------------------------------------------

_NEEDED = ("opentelemetry.instrumentation.anthropic", "opentelemetry.instrumentation.openai")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture
def openllmetry(otel: Otel) -> Iterator[list[Any]]:
    """OpenLLMetry's instrumentors on the test's provider; every SDK method put back afterwards (its
    ``OpenAIInstrumentor.uninstrument()`` leaves a wrapper behind: tests/reliability/test_coexistence.py)."""
    if not all(_installed(name) for name in _NEEDED):
        pytest.skip("needs opentelemetry-instrumentation-anthropic and -openai (the test extra)")
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    with sdk_methods_restored():
        instrumentors: list[Any] = [AnthropicInstrumentor(), OpenAIInstrumentor()]
        try:
            yield instrumentors
        finally:
            for instrumentor in instrumentors:
                if instrumentor.is_instrumented_by_opentelemetry:
                    instrumentor.uninstrument()
            telos_wrap.unpatch()


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
@pytest.mark.parametrize(
    "telos_first", [True, False], ids=["telos-then-openllmetry", "openllmetry-then-telos"]
)
def test_openllmetry_span_gets_telos_attributes(
    otel: Otel, emulator: str, track: Any, openllmetry: list[Any], telos_first: bool
) -> None:
    telos_wrap.unpatch()
    if telos_first:
        telos_wrap.patch()
    for instrumentor in openllmetry:
        instrumentor.instrument(tracer_provider=otel.tracer_provider)
    if not telos_first:
        telos_wrap.patch()
    # The SDK's own tracing off: OpenLLMetry's span is the only one, and telos still finds it.
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator, open_telemetry=False))
    run_session(client, f"llm-{telos_first}", stream_last=False)
    with telos_wrap.session(f"llm-stream-{telos_first}"):
        stream = client.messages.create(
            model="claude-opus-5",
            max_tokens=8,
            system=SYSTEM,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        for _ in stream:
            pass
    chat = track(openai.OpenAI(api_key="k", base_url=f"{emulator}/v1"))
    chat.chat.completions.create(
        model="gpt-5.5", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    )
    spans = otel.spans()
    assert {span.instrumentation_scope.name for span in spans} <= {
        "opentelemetry.instrumentation.anthropic",
        "opentelemetry.instrumentation.openai.v1",
    }, "telos added a call span of its own"
    assert [span.name for span in spans] == ["anthropic.chat"] * 4 + ["openai.chat"]
    _check_calls(spans, 5)
    assert [event["telos.break.reason"] for event in _break_events(spans)] == ["system_changed"]
    _canary(spans, all_attributes=False)  # OpenLLMetry records prompts itself; telos' own never


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
def test_openllmetry_and_the_sdks_tracing_together(
    otel: Otel, emulator: str, track: Any, openllmetry: list[Any]
) -> None:
    """Two spans per call (OpenLLMetry's around the SDK's): telos' attributes on one, the outer one."""
    for instrumentor in openllmetry:
        instrumentor.instrument(tracer_provider=otel.tracer_provider)
    client = track(
        anthropic.Anthropic(
            api_key="k", base_url=emulator, open_telemetry={"tracer_provider": otel.tracer_provider}
        )
    )
    run_session(client, "both-1", stream_last=False)
    spans = otel.spans()
    assert sorted(span.name for span in spans) == ["anthropic.chat"] * 3 + ["anthropic.messages.create"] * 3
    ours = _check_calls(spans, 3)
    assert {span.name for span in ours} == {"anthropic.chat"}
    assert [event["telos.break.reason"] for event in _break_events(spans)] == ["system_changed"]


def test_token_count_is_no_turn(otel: Otel, emulator: str, track: Any) -> None:
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    client.messages.count_tokens(
        model="claude-opus-5", system=SYSTEM, messages=[{"role": "user", "content": "hi"}]
    )
    (span,) = otel.spans()
    assert span.attributes["telos.turn"] is False and "telos.outcome" not in span.attributes
    assert otel.total("telos.requests") == 0


def test_a_telemetry_bug_never_breaks_the_call(
    otel: Otel, emulator: str, track: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from telos_wrap.telemetry import call, facts

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("telemetry bug")

    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    before = telos_wrap.failure_counts()
    monkeypatch.setattr(facts, "request_attributes", broken)
    reply = client.messages.create(
        model="claude-opus-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
    )
    assert telos_wrap.usage_of(reply) is not None
    monkeypatch.undo()
    monkeypatch.setattr(call.CallTelemetry, "usage", broken)
    monkeypatch.setattr(call.CallTelemetry, "returned", broken)
    with client.messages.stream(
        model="claude-opus-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        assert stream.get_final_text()
    assert telos_wrap.failure_counts() == before  # telos' stages all ran: nothing fell back


# -- the client's own opt-out ------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["option", "copy", "environment"])
def test_a_client_that_turned_tracing_off_gets_no_span_but_is_counted(
    otel: Otel, emulator: str, track: Any, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """anthropic >= 2: ``open_telemetry=False`` (or ANTHROPIC_OPEN_TELEMETRY=false when the client is
    made, or a copy of such a client) asks for no span; telos adds none of its own, calls nothing of
    ``opentelemetry.trace`` for the call, and still counts it in its metrics. Recording every call
    into ``opentelemetry.trace`` made from telos' modules, the check fails before the change (telos
    looked up the current span and started its own)."""
    from opentelemetry import trace

    if how == "environment":
        monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY", "false")
        client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
        monkeypatch.delenv("ANTHROPIC_OPEN_TELEMETRY")  # read when the client was made, not later
    else:
        client = track(anthropic.Anthropic(api_key="k", base_url=emulator, open_telemetry=False))
        if how == "copy":
            client = client.with_options(max_retries=0)
    called: list[str] = []

    def recording(name: str, real: Any) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            # telos' calls only: the metrics SDK's exemplar filter reads the current span itself.
            if sys._getframe(1).f_globals.get("__name__", "").startswith("telos_wrap"):
                called.append(name)
            return real(*args, **kwargs)

        return record

    for name in ("get_tracer_provider", "get_tracer", "get_current_span", "use_span", "set_span_in_context"):
        monkeypatch.setattr(trace, name, recording(name, getattr(trace, name)))
    s = run_session(client, f"quiet-{how}")
    monkeypatch.undo()
    assert otel.spans() == []
    assert called == []
    assert s.stats.requests == 3
    assert otel.total("telos.requests") == 3
    assert otel.total("telos.token.usage", {"telos.token.type": "cache_read"}) == s.stats.cache_read > 0
    assert otel.total("telos.cache.breaks", {"telos.break.reason": "system_changed"}) == 1
    # The same process, a client that did not opt out: telos' own span again.
    other = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    other.messages.create(model="claude-opus-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert [span.name for span in otel.spans()] == ["chat claude-opus-5"]
