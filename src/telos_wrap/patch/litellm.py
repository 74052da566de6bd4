"""LiteLLM's own providers: ``litellm.completion`` / ``acompletion`` for ``anthropic/``, ``bedrock/``,
``vertex_ai/`` and ``gemini/`` models go through the same pipeline as an SDK call.

LiteLLM posts these requests with its own HTTP client, so the SDK patches never see them. It takes
OpenAI-format ``messages`` / ``tools`` with ``cache_control`` on content parts and translates them to
the provider (docs/integrations.md, *LiteLLM*), which is exactly what the ``litellm`` engine writes
(``engines.chat_breakpoints``). So the wrapper on ``completion`` lifts the call's OpenAI-format
``messages`` and ``tools``, runs the session's turn (lift → bridge → engine) and calls through with the
rewritten lists; every other argument is passed as it came.

Why ``completion`` only, and why wrapt: ``acompletion`` runs ``litellm.main.completion`` (the module
global) in an executor with ``acompletion=True``, so one wrapper covers sync, async and streaming
calls, and the rewrite happens exactly once. LiteLLM's documented hooks do not fit: a
``CustomLogger``'s pre-call hook may change the request only on the proxy, and a prompt-management
hook runs only when a prompt id or a matching integration is configured. ``litellm`` is never imported
here: ``patch()`` registers a post-import hook (``patch/__init__.py``), so this module stays inert when
LiteLLM is not installed.

Providers and what they get (docs/engines.md, *Routes*):

* ``anthropic``, and ``bedrock`` / ``vertex_ai`` with a Claude model: the ``litellm`` engine
  (breakpoints for Claude);
* ``gemini``, and ``vertex_ai`` with a Gemini model: the ``generic`` engine (implicit caching: canonical
  bytes, nothing added);
* every other provider: untouched here (``openai/``, ``azure/`` ... call the official ``openai`` client,
  which ``patch()`` already covers; the rest is not known to cache).

Fail open: any telos failure sends the call's own arguments (``strict=True`` raises). LiteLLM's
exceptions pass through untouched. Usage: the response is LiteLLM's ``ModelResponse``; its ``usage`` is
normalized into the session's stats and attached for ``usage_of()``. A stream is LiteLLM's
``CustomStreamWrapper``, returned inside a transparent proxy that reads each chunk as it passes and
records the usage chunk into the session's stats (``usage_of(stream)`` reports it once the stream is
read to its end). LiteLLM emits that chunk only when the caller sets ``stream_options={"include_usage":
True}`` (the OpenAI convention, docs/vendor-facts.md §2.5); without it a stream counts as a request
whose usage was not reported. telos does not set it for the caller here: on ``acompletion`` LiteLLM
decides which chunks to emit from the arguments it was called with, before this wrapper runs, so the
added usage chunk could not be kept from the caller the way the SDK patches do (docs/engines.md).
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

import wrapt

from telos_wrap.bridge import BridgeOptions
from telos_wrap.config import current_config, rewriting
from telos_wrap.engines.chat_breakpoints import caches_at_breakpoints
from telos_wrap.engines.registry import get_engine
from telos_wrap.errors import NotPlainJSON, TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.ir.hints import parse_hints
from telos_wrap.ir.model import Api
from telos_wrap.patch.once import inside, outermost
from telos_wrap.patch.turns import resolve_session
from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.identity import tenant_digest
from telos_wrap.sessions.runtime import SessionRuntime
from telos_wrap.usage import as_json, attach_usage

__all__ = ["completion_wrapper", "engine_for"]

_API: Api = "openai_chat"


def engine_for(model: str, provider: str | None) -> str | None:
    """The engine for a LiteLLM provider route, or ``None`` when telos leaves the call alone."""
    if provider is None:
        provider = model.split("/", 1)[0] if "/" in model else None
    if provider == "anthropic" or (provider in ("bedrock", "vertex_ai") and caches_at_breakpoints(model)):
        return "litellm"
    if provider == "gemini" or (provider == "vertex_ai" and "gemini" in model.lower()):
        return "generic"
    return None


def _provider(model: str, kwargs: Mapping[str, Any]) -> str | None:
    """LiteLLM's own answer (``get_llm_provider``) when it has one, else the model's prefix."""
    given = kwargs.get("custom_llm_provider")
    if isinstance(given, str):
        return given
    litellm = sys.modules.get("litellm")
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=model, api_base=kwargs.get("api_base"))  # type: ignore[union-attr]
    except Exception:  # an unknown model: LiteLLM raises its own error on the call itself
        return None
    return provider if isinstance(provider, str) else None


def completion_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt wrapper of ``litellm.completion`` (module docstring)."""
    hint = kwargs.pop("telos_hint", None)
    # LiteLLM's ``litellm.completion`` (1.110+) is a dispatcher that calls ``litellm.main.completion``,
    # and telos wraps both names: the outermost call rewrites, one made inside it passes through.
    if inside() or not rewriting() or not current_config().enabled:
        return wrapped(*args, **kwargs)
    hints = parse_hints(hint)  # bad input: a clear error before any I/O, as on the SDK entry points
    args, kwargs, finish = _rewrite(args, kwargs, hints)
    with outermost():
        result = wrapped(*args, **kwargs)
    if finish is None:
        return result
    if isinstance(result, Coroutine):  # acompletion=True: LiteLLM awaits what completion returns

        async def finished() -> Any:
            return finish(await result)

        return finished()
    return finish(result)


def _rewrite(
    args: tuple[Any, ...], kwargs: dict[str, Any], hints: Any
) -> tuple[tuple[Any, ...], dict[str, Any], Callable[[Any], Any] | None]:
    """The call's arguments with telos' messages and tools, and what to do with the response."""
    if len(args) > 2:  # completion(model, messages, timeout, ...): left exactly as called
        return args, kwargs, None
    call = dict(kwargs)
    if args:  # completion(model, messages): name them, so they can be replaced
        call.update(zip(("model", "messages"), args, strict=False))
        args = ()
    model, messages, tools = call.get("model"), call.get("messages"), call.get("tools")
    if not isinstance(model, str) or not isinstance(messages, list) or hints.disable:
        return args, call, None
    if tools is not None and not isinstance(tools, list):
        return args, call, None
    config = current_config()
    strict = config.strict
    session: SessionRuntime | None = None
    engine: str | None = None
    body: dict[str, Any] = {"model": model, "messages": messages}
    if tools is not None:
        body["tools"] = tools
    try:
        engine = hints.engine or engine_for(model, _provider(model, call))
        if engine is None:
            return args, call, None
        # The call's tenant signals (its key and base URL) keep implicit conversations of different
        # tenants or servers apart, as ``tenant_of`` does for an SDK client (docs/security.md, T1).
        called_by = tenant_digest(hints.isolation, call.get("api_key"), call.get("api_base"))
        session = runtime_of(resolve_session(_API, body, hints, None, tenant=called_by))
        hints = hints.merged_over(session.hints)
        strict = session.strict if session.strict is not None else config.strict
        options = PrepareOptions(
            engine=engine,
            hints=hints,
            session_id=session.id,
            bridge=BridgeOptions(keep_past_drop=config.keep_past_drop, output_filter=config.output_filter),
            refpool_threshold=config.refpool_threshold,
            only_what_pays=config.only_what_pays,
        )
        tenant = tenant_digest(hints.isolation, call.get("api_key"), call.get("api_base"))
        try:
            index, prepared = session.prepare_request(_API, body, options, strict=strict, tenant=tenant)
        except TelosStageError as error:
            if not isinstance(error.__cause__, NotPlainJSON):
                raise
            # LiteLLM's own ``Message`` objects, a str Enum role...: read as LiteLLM sends them, and
            # the call is made with that plain form (what it sends is the same; lift/plain.py).
            body = as_litellm_sends(body)
            call.update((key, body[key]) for key in ("messages", "tools") if key in body)
            index, prepared = session.prepare_request(_API, body, options, strict=strict, tenant=tenant)
    except TelosStageError as error:
        return args, call, _fell_back(session, engine, body, error, strict)
    except Exception as exc:  # a telos bug must never break the call
        return args, call, _fell_back(session, engine, body, TelosStageError("litellm", exc), strict)
    finish = _finisher(session, index, engine, strict)
    if prepared.untouched is not None:
        return args, call, finish
    rewritten = dict(call)
    # LiteLLM edits the lists it is given (it pops system messages); the session keeps its own.
    rewritten["messages"] = copy.deepcopy(prepared.body["messages"])
    if "tools" in prepared.body:
        rewritten["tools"] = copy.deepcopy(prepared.body["tools"])
    return args, rewritten, finish


def _fell_back(
    session: SessionRuntime | None,
    engine: str | None,
    body: Mapping[str, Any],
    error: TelosStageError,
    strict: bool,
) -> Callable[[Any], Any] | None:
    """A telos stage failed: report it (raises if strict) and, as on the SDK routes, count the call in
    its session as a fallback (``stats.fallbacks``, the loud warning of a conversation that keeps
    falling back) with its usage. Not recorded when the session's store itself failed (recording
    would wait on it a second time) or before the call's session was known."""
    report_failure(error, strict=strict)
    if session is None or engine is None or error.stage == "session.store":
        return None
    index = session.note_passthrough(_API, engine, body, failed=error)
    return _finisher(session, index, engine, strict)


def _litellm_value(value: Any) -> Any:
    """A value the JSON encoder cannot write, as LiteLLM reads it: its pydantic objects (``Message``,
    ``ChatCompletionMessageToolCall``) by their fields that are set to something, as LiteLLM's
    provider transformations read a message (a ``None`` field is never sent)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise TypeError(f"{type(value).__name__} is not something LiteLLM sends")


_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_litellm_value
)


def as_litellm_sends(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` in plain JSON: pydantic objects by their set fields, ``str`` Enums by their value,
    tuples as lists (``_litellm_value``). Raises ``TypeError`` for anything else."""
    plain = json.loads(_ENCODER.encode(dict(body)))
    return plain if isinstance(plain, dict) else {}


def _finisher(session: SessionRuntime, index: int, engine: str, strict: bool) -> Callable[[Any], Any]:
    """What to do with the call's result: record a response's usage, or wrap a stream."""

    def record(response: Any, usage: Any) -> None:
        try:
            report = get_engine(engine).parse_usage(as_json(usage))
            attach_usage(response, report)
            session.record_usage(index, report)
        except Exception as exc:
            report_failure(TelosStageError("usage", exc), strict=strict)

    def finish(response: Any) -> Any:
        usage = getattr(response, "usage", None)
        if usage is not None and hasattr(usage, "model_dump"):
            record(response, usage)
            return response
        if hasattr(response, "__next__") or hasattr(response, "__anext__"):
            return StreamUsage(response, record)
        return response

    return finish


if TYPE_CHECKING:
    _Proxy = wrapt.ObjectProxy[Any]
else:  # wrapt 2.0 (the floor) has no subscriptable ObjectProxy at run time
    _Proxy = wrapt.ObjectProxy


class StreamUsage(_Proxy):
    """LiteLLM's stream, chunk for chunk, with its usage chunk recorded into the session. Everything
    else — the chunks, attributes, ``isinstance`` — is the wrapped stream's."""

    def __init__(self, stream: Any, record: Callable[[Any, Any], None]) -> None:
        super().__init__(stream)
        self._self_record = record

    def __iter__(self) -> StreamUsage:
        return self

    def __next__(self) -> Any:
        return self._self_read(next(self.__wrapped__))

    def __aiter__(self) -> StreamUsage:
        return self

    async def __anext__(self) -> Any:
        return self._self_read(await self.__wrapped__.__anext__())

    def _self_read(self, chunk: Any) -> Any:
        usage = getattr(chunk, "usage", None)
        if usage is not None and hasattr(usage, "model_dump"):
            self._self_record(self, usage)
        return chunk
