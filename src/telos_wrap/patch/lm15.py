"""DSPy's built-in HTTP client: what ``dspy.LM`` (DSPy >= 3.4) sends without an SDK or LiteLLM goes
through the same pipeline as an SDK call.

``dspy.LM("anthropic/...", api_base=..., api_key=...)`` with the default ``engine="auto"`` sends a
model it knows through lm15, an HTTP client vendored inside DSPy (``dspy._vendor.lm15``; DSPy's
``clients/engines/lm15_engine.py`` routes to it). lm15's provider adapters turn DSPy's request into
the vendor's own JSON (Anthropic Messages, OpenAI Chat Completions or Responses), encode it with its
``providers.common.json_dumps`` and hand a ``TransportRequest`` (method, URL, headers, body bytes) to
one of two methods of their base classes: ``_send`` (a whole response) and ``_stream_raw`` (an SSE
stream), on ``BaseProviderLM`` (sync) and on ``AsyncBaseProviderLM`` (the async mirror, which builds
with an inner sync adapter and sends with its own transport). Every chat request of DSPy's native
route passes through exactly one of the four, once per HTTP request, so telos wraps them (lazily:
``patch()`` registers a post-import hook and never imports DSPy; ``unpatch()`` removes them).

What the hook does: reads the body lm15 built (plain JSON, by construction), routes it by the
adapter and the URL path (the Anthropic adapter's ``…/messages``: Messages, engine ``anthropic``; an
OpenAI adapter's ``…/chat/completions`` and ``…/responses``: the engine of its base URL, as for the
``openai`` client, ``patch/routing.py``), runs the session's turn (lift → bridge → engine) and sends
the prepared body encoded by lm15's own ``json_dumps``. A request telos leaves as it is keeps lm15's
``TransportRequest``, bytes and all. Left alone: anything else lm15 sends (files, batches, model
listings), and a request signed over its body (SigV4 on Bedrock: a new body would void the
signature).

Usage: a whole response's ``usage`` (the vendor's own JSON, from the body lm15 received) is parsed
by the engine and recorded in the session; a stream's comes from the frames lm15 hands on as its
end events' ``provider_data`` (Anthropic's cumulative ``message_delta``, docs/vendor-facts.md §1.5;
the Chat Completions usage chunk). A usage chunk telos asked for and lm15 did not is not passed on.

Each call is rewritten once (``patch/once.py``): a hook reached inside another hook's call passes
it through. Fail open: a telos failure sends lm15's own request and counts as a fallback in the
call's session (``stats.fallbacks``, the loud warning of a conversation that keeps falling back);
``strict=True`` raises. lm15's and the vendor's errors pass through untouched: ``wrapped(...)`` is
never inside a ``try`` that could catch them.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

from telos_wrap.bridge import BridgeOptions
from telos_wrap.config import current_config, rewriting
from telos_wrap.engines.registry import get_engine
from telos_wrap.errors import TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.ir.hints import TelosHints
from telos_wrap.patch.once import inside, outermost
from telos_wrap.patch.routing import Route, route_request
from telos_wrap.patch.turns import resolve_session
from telos_wrap.pipeline import Prepared, PrepareOptions, time_budget
from telos_wrap.private_api import lm15_inner_adapter
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.identity import tenant_digest
from telos_wrap.sessions.runtime import SessionRuntime
from telos_wrap.sessions.stores.budget import StoreTimeSpent
from telos_wrap.usage import json_mapping

__all__ = ["async_send_wrapper", "async_stream_wrapper", "send_wrapper", "stream_wrapper"]

_NO_HINTS = TelosHints()
#: Headers of a request signed over its body (AWS SigV4): telos leaves such a request alone.
_SIGNED = frozenset({"x-amz-date", "x-amz-content-sha256"})
#: lm15's adapter classes by the wire API they speak (their names in lm15 1.0).
_ANTHROPIC_ADAPTERS = frozenset({"AnthropicLM"})
_OPENAI_ADAPTERS = frozenset({"OpenAIChatLM", "OpenAILM"})


@dataclass(slots=True)
class _Call:
    """One request telos prepared: where its usage goes, and the request to send."""

    request: Any  # lm15's TransportRequest
    session: SessionRuntime
    index: int
    engine: str
    strict: bool
    #: The engine asked for a stream's usage chunk lm15 did not: that chunk is telos' to swallow.
    hide_usage_chunk: bool = False


def _adapter(instance: Any) -> Any:
    """The adapter that built the request: the async mirror's inner sync adapter, or itself."""
    inner = lm15_inner_adapter(instance)
    return inner if inner is not None else instance


def _route(instance: Any, request: Any) -> tuple[Route, str] | None:
    """The request's route and its base URL, or ``None`` when telos leaves it alone."""
    if str(getattr(request, "method", "")).upper() != "POST" or not getattr(request, "body", None):
        return None
    if any(name.lower() in _SIGNED for name, _ in request.headers):
        return None
    adapter = _adapter(instance)
    kinds = {cls.__name__ for cls in type(adapter).__mro__}
    base_url = str(getattr(adapter, "base_url", "") or "")
    path = urlsplit(str(request.url)).path.rstrip("/")
    if kinds & _ANTHROPIC_ADAPTERS:
        return (Route("anthropic", "anthropic"), base_url) if path.endswith("/messages") else None
    if kinds & _OPENAI_ADAPTERS:
        route = route_request("openai", "post", path, base_url, _NO_HINTS, current_config())
        # Turns only: a token count or a compaction (Responses) is not something DSPy's LM sends.
        if route is None or not route.turn or route.count_only:
            return None
        return route, base_url
    return None


def _credential(request: Any) -> str | None:
    """The API key the request carries (``x-api-key`` or a bearer token): whose traffic it is."""
    for name, value in request.headers:
        lowered = name.lower()
        if lowered == "x-api-key":
            return str(value)
        if lowered == "authorization" and str(value).lower().startswith("bearer "):
            return str(value)[7:]
    return None


@dataclass(frozen=True, slots=True)
class _Turn:
    """A request telos reads: everything before the session's I/O."""

    route: Route
    body: dict[str, Any]
    session: SessionRuntime
    options: PrepareOptions
    tenant: str


def _begin(instance: Any, request: Any) -> _Turn | None:
    """Route, body, session, options and tenant of ``request`` (``None``: not for telos)."""
    found = _route(instance, request)
    if found is None:
        return None
    route, base_url = found
    body = json.loads(request.body)
    if not isinstance(body, dict):
        return None
    config = current_config()
    key = _credential(request)
    client = SimpleNamespace(api_key=key, base_url=base_url)
    session = runtime_of(resolve_session(route.api, body, _NO_HINTS, None, None, client))
    hints = _NO_HINTS.merged_over(session.hints)
    options = PrepareOptions(
        engine=route.engine,
        hints=hints,
        session_id=session.id,
        bridge=BridgeOptions(keep_past_drop=config.keep_past_drop, output_filter=config.output_filter),
        refpool_threshold=config.refpool_threshold,
        only_what_pays=config.only_what_pays,
    )
    return _Turn(route, body, session, options, tenant_digest(hints.isolation, key, base_url))


def _strict(session: SessionRuntime | None) -> bool:
    if session is not None and session.strict is not None:
        return session.strict
    return current_config().strict


def _sent(instance: Any, request: Any, turn: _Turn, index: int, prepared: Prepared) -> _Call:
    """The call for a prepared request: lm15's own request when telos leaves it as it is, else the
    prepared body encoded by lm15's ``json_dumps`` (its own serializer, ``providers/common.py``)."""
    strict = _strict(turn.session)
    engine = turn.route.engine
    if prepared.untouched is not None:
        return _Call(request, turn.session, index, engine, strict)
    common = importlib.import_module(type(_adapter(instance)).__module__.rpartition(".")[0] + ".common")
    encoded = common.json_dumps(prepared.body)
    hide = _includes_usage(prepared.body) and not _includes_usage(turn.body)
    return _Call(dataclasses.replace(request, body=encoded), turn.session, index, engine, strict, hide)


def _includes_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return bool(body.get("stream")) and isinstance(options, Mapping) and bool(options.get("include_usage"))


def _prepare(instance: Any, request: Any) -> _Call | None:
    """Prepare ``request`` for sending (``None``: send it as lm15 built it, nothing to record)."""
    turn: _Turn | None = None
    try:
        turn = _begin(instance, request)
        if turn is None:
            return None
        with time_budget(current_config().time_budget):
            index, prepared = turn.session.prepare_request(
                turn.route.api, turn.body, turn.options, strict=_strict(turn.session), tenant=turn.tenant
            )
        return _sent(instance, request, turn, index, prepared)
    except Exception as exc:  # a telos stage failed, or a telos bug: never the call's end
        error = exc if isinstance(exc, TelosStageError) else TelosStageError("lm15", exc)
        call = _failed(request, turn, error)
        if call is not None and turn is not None:
            call.index = turn.session.note_passthrough(
                turn.route.api, turn.route.engine, turn.body, failed=error
            )
        return call


async def _aprepare(instance: Any, request: Any) -> _Call | None:
    """:func:`_prepare` for the async adapters (the session's store is awaited)."""
    turn: _Turn | None = None
    try:
        turn = _begin(instance, request)
        if turn is None:
            return None
        with time_budget(current_config().time_budget):
            index, prepared = await turn.session.prepare_request_async(
                turn.route.api, turn.body, turn.options, strict=_strict(turn.session), tenant=turn.tenant
            )
        return _sent(instance, request, turn, index, prepared)
    except Exception as exc:  # a telos stage failed, or a telos bug: never the call's end
        error = exc if isinstance(exc, TelosStageError) else TelosStageError("lm15", exc)
        call = _failed(request, turn, error)
        if call is not None and turn is not None:
            call.index = await turn.session.note_passthrough_async(
                turn.route.api, turn.route.engine, turn.body, failed=error
            )
        elif turn is not None and isinstance(error.__cause__, StoreTimeSpent):
            # No store time left for the session's plan: counted without the store (written later).
            index = turn.session.note_passthrough_deferred(
                turn.route.api, turn.route.engine, turn.body, failed=error
            )
            call = _Call(request, turn.session, index, turn.route.engine, _strict(turn.session))
        return call


def _failed(request: Any, turn: _Turn | None, error: TelosStageError) -> _Call | None:
    """Report a failure (raises if strict). lm15's own request goes out; as on the SDK routes it is
    counted in its session as a fallback, with its usage (the caller records it: ``_Call.index``).
    ``None`` when the session's store itself failed (recording would wait on it a second time) or
    before the call's session was known: the request then goes out unrecorded."""
    report_failure(error, strict=_strict(turn.session if turn is not None else None))
    if turn is None or error.stage == "session.store":
        return None
    return _Call(request, turn.session, -1, turn.route.engine, _strict(turn.session))


def _passes(args: tuple[Any, ...], kwargs: dict[str, Any], position: int, name: str) -> Any:
    """The call's ``TransportRequest`` argument, or ``None`` when telos has nothing to do."""
    if inside() or not rewriting() or not current_config().enabled:
        return None
    return args[position] if len(args) > position else kwargs.get(name)


def _with_request(
    args: tuple[Any, ...], kwargs: dict[str, Any], position: int, name: str, request: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if len(args) > position:
        return (*args[:position], request, *args[position + 1 :]), kwargs
    return args, {**kwargs, name: request}


def _record_response(call: _Call, response: Any) -> None:
    """A whole response's usage, read from the vendor's JSON lm15 received, into the session."""
    try:
        if getattr(response, "status", 500) >= 400:
            return  # an error: the vendor's, passed on as lm15 raises it; no usage
        data = json.loads(response.body)
        usage = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(usage, Mapping):
            call.session.record_usage(call.index, None)
            return
        # Anthropic ``diagnostics``; OpenAI Responses ``prompt_cache_diagnostics`` (docs/engines.md).
        diagnostics = json_mapping(data.get("diagnostics") or data.get("prompt_cache_diagnostics"))
        report = get_engine(call.engine).parse_usage(dict(usage), diagnostics=diagnostics)
        response_id = data.get("id")
        call.session.record_usage(
            call.index, report, response_id=response_id if isinstance(response_id, str) else None
        )
    except Exception as exc:
        report_failure(TelosStageError("usage", exc), strict=call.strict)


def send_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt wrapper of ``BaseProviderLM._send(request)``: one whole-response request."""
    request = _passes(args, kwargs, 0, "request")
    call = _prepare(instance, request) if request is not None else None
    if call is None:
        return wrapped(*args, **kwargs)
    args, kwargs = _with_request(args, kwargs, 0, "request", call.request)
    with outermost():
        response = wrapped(*args, **kwargs)
    _record_response(call, response)
    return response


async def async_send_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt wrapper of ``AsyncBaseProviderLM._send(request)``."""
    request = _passes(args, kwargs, 0, "request")
    call = await _aprepare(instance, request) if request is not None else None
    if call is None:
        return await wrapped(*args, **kwargs)
    args, kwargs = _with_request(args, kwargs, 0, "request", call.request)
    with outermost():
        response = await wrapped(*args, **kwargs)
    _record_response(call, response)
    return response


class _StreamUsage:
    """A stream's usage, fed from the end events' ``provider_data`` (the vendor's own frames)."""

    def __init__(self, call: _Call) -> None:
        self.call = call
        self.usage = get_engine(call.engine).stream_usage()
        self.failed = False

    def swallows(self, event: Any) -> bool:
        """Feed ``event``; True for a usage chunk telos asked for and lm15 did not (not passed on)."""
        data = getattr(event, "provider_data", None) if getattr(event, "type", None) == "end" else None
        if not isinstance(data, Mapping):
            return False
        if not self.failed:
            try:
                self.usage.feed(data)
            except Exception as exc:
                self.failed = True
                report_failure(TelosStageError("stream-usage", exc), strict=self.call.strict)
        return self.call.hide_usage_chunk and "usage" in data and not data.get("choices")

    def finish(self) -> None:
        try:
            if not self.failed:
                self.call.session.record_usage(self.call.index, self.usage.report())
        except Exception as exc:
            report_failure(TelosStageError("stream-usage", exc), strict=self.call.strict)


def stream_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt wrapper of ``BaseProviderLM._stream_raw(request, req)``: an SSE stream of lm15 events."""
    request = _passes(args, kwargs, 1, "req")
    if request is None:
        return wrapped(*args, **kwargs)
    return _stream(wrapped, instance, args, kwargs, request)


def _stream(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], request: Any
) -> Iterator[Any]:
    # Prepared at the first event asked for, as lm15's own generator does its I/O then.
    call = _prepare(instance, request)
    if call is None:
        yield from wrapped(*args, **kwargs)
        return
    args, kwargs = _with_request(args, kwargs, 1, "req", call.request)
    seen = _StreamUsage(call)
    events = wrapped(*args, **kwargs)
    try:
        for event in events:
            if not seen.swallows(event):
                yield event
    finally:
        events.close()
        seen.finish()


def async_stream_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt wrapper of ``AsyncBaseProviderLM._stream_raw(request, req)``."""
    request = _passes(args, kwargs, 1, "req")
    if request is None:
        return wrapped(*args, **kwargs)
    return _astream(wrapped, instance, args, kwargs, request)


async def _astream(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], request: Any
) -> AsyncIterator[Any]:
    call = await _aprepare(instance, request)
    if call is None:
        async for event in wrapped(*args, **kwargs):
            yield event
        return
    args, kwargs = _with_request(args, kwargs, 1, "req", call.request)
    seen = _StreamUsage(call)
    events = wrapped(*args, **kwargs)
    try:
        async for event in events:
            if not seen.swallows(event):
                yield event
    finally:
        await events.aclose()
        seen.finish()
