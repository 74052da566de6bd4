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
normalized into the session's stats and attached for ``usage_of()`` (streams: ``usage_of`` on the
response ``litellm.stream_chunk_builder`` makes).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from telos_wrap.bridge import BridgeOptions
from telos_wrap.config import current_config
from telos_wrap.engines.chat_breakpoints import caches_at_breakpoints
from telos_wrap.engines.registry import get_engine
from telos_wrap.errors import TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.ir.hints import parse_hints
from telos_wrap.ir.model import Api
from telos_wrap.patch.mode import rewriting
from telos_wrap.patch.wrappers import _resolve_session
from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions import Session
from telos_wrap.usage import attach_usage

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
    if not rewriting() or not current_config().enabled:
        return wrapped(*args, **kwargs)
    hints = parse_hints(hint)  # bad input: a clear error before any I/O, as on the SDK entry points
    args, kwargs, finish = _rewrite(args, kwargs, hints)
    result = wrapped(*args, **kwargs)
    if finish is None:
        return result
    if isinstance(result, Coroutine):  # acompletion=True: LiteLLM awaits what completion returns

        async def finished() -> Any:
            response = await result
            finish(response)
            return response

        return finished()
    finish(result)
    return result


def _rewrite(
    args: tuple[Any, ...], kwargs: dict[str, Any], hints: Any
) -> tuple[tuple[Any, ...], dict[str, Any], Callable[[Any], None] | None]:
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
    try:
        engine = hints.engine or engine_for(model, _provider(model, call))
        if engine is None:
            return args, call, None
        body: dict[str, Any] = {"model": model, "messages": messages}
        if tools is not None:
            body["tools"] = tools
        session = _resolve_session(_API, body, hints, None)
        hints = hints.merged_over(session.hints)
        strict = session.strict if session.strict is not None else config.strict
        options = PrepareOptions(
            engine=engine,
            hints=hints,
            session_id=session.id,
            bridge=BridgeOptions(keep_past_drop=config.keep_past_drop),
            refpool_threshold=config.refpool_threshold,
            only_what_pays=config.only_what_pays,
        )
        index, prepared = session.prepare_request(_API, body, options, strict=strict)
    except TelosStageError as error:
        report_failure(error, strict=strict)
        return args, call, None
    except Exception as exc:  # a telos bug must never break the call
        report_failure(TelosStageError("litellm", exc), strict=strict)
        return args, call, None
    finish = _finisher(session, index, engine, strict)
    if prepared.untouched is not None:
        return args, call, finish
    rewritten = dict(call)
    # LiteLLM edits the lists it is given (it pops system messages); the session keeps its own.
    rewritten["messages"] = copy.deepcopy(prepared.body["messages"])
    if "tools" in prepared.body:
        rewritten["tools"] = copy.deepcopy(prepared.body["tools"])
    return args, rewritten, finish


def _finisher(session: Session, index: int, engine: str, strict: bool) -> Callable[[Any], None]:
    def finish(response: Any) -> None:
        usage = getattr(response, "usage", None)
        if usage is None or not hasattr(usage, "model_dump"):
            return  # a stream: its usage arrives with its last chunk
        try:
            report = get_engine(engine).parse_usage(usage.model_dump(mode="json"))
            attach_usage(response, report)
            session.record_usage(index, report)
        except Exception as exc:
            report_failure(TelosStageError("usage", exc), strict=strict)

    return finish
