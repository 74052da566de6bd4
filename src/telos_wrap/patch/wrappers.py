"""The wrapt wrappers: entry points, the request layer, and response parsing.

* **Entry points** (``create``/``stream``/``parse``/``count_tokens``/``tool_runner``): take
  ``telos_hint=`` out of the call (validated before any I/O) and nothing else.
* **``request()``** of the SDKs' base clients — the one method every Messages / Chat Completions call
  passes through exactly once per logical call (retries happen inside it): lift → bridge → emit the
  body, once. A failure there sends the original body (fail open).
* **``APIResponse.parse()``** — where every response object is made, raw or not: attach the
  ``UsageReport`` to what it returns, or hook the stream it returns.

Vendor exceptions are never caught here: ``wrapped(...)`` is always called outside any ``try`` that
could swallow or alter its errors.

Why one module of ~720 lines: the three wrapper kinds share one contract, the ``CallContext`` that
the request layer attaches and ``parse()`` reads back, and one rule, no ``try`` around
``wrapped(...)``; reading them side by side is how that rule is kept. Most of the length is the
request layer's routing (session, tenant, hint and header resolution, reading a body that is not
plain JSON as the SDK serializes it) that every SDK call passes through once; the SDK's serializer
itself, streams, observers, routing tables and the LiteLLM hook are already modules of their
own (``sdk_json``, ``streams``, ``observers``, ``routing``, ``litellm``).
"""

from __future__ import annotations

import contextvars
import importlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from telos_wrap.bridge import BridgeOptions
from telos_wrap.config import current_config
from telos_wrap.engines.registry import get_engine
from telos_wrap.errors import NotPlainJSON, TelosHintError, TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api
from telos_wrap.lift.plain import require_plain
from telos_wrap.patch.calls import (
    BUILT_OUTSIDE,
    HINT_HEADER,
    CallContext,
    current_call,
    hint_headers,
    hint_token,
    read_hint_header,
)
from telos_wrap.patch.mode import rewriting
from telos_wrap.patch.observers import OBSERVERS, notify_request, notify_usage
from telos_wrap.patch.routing import Route, route_request
from telos_wrap.patch.sdk_json import files_read, sdk_plain, with_file_inputs
from telos_wrap.patch.streams import hook_stream, is_stream
from telos_wrap.pipeline import Prepared, PrepareOptions, prepare, time_budget
from telos_wrap.sessions import Session, current_session, default_store, implicit_session, named_session
from telos_wrap.sessions.identity import tenant_digest
from telos_wrap.telemetry import begin as telemetry_begin
from telos_wrap.usage import attach_usage, json_mapping

__all__ = [
    "async_parse_wrapper",
    "entry_wrapper",
    "make_async_request_wrapper",
    "make_request_wrapper",
    "parse_wrapper",
]

logger = logging.getLogger("telos_wrap")

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def entry_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Public entry point: move ``telos_hint`` into a private header; forward everything else.

    An invalid hint raises ``TelosHintError`` (the call is written wrong); any other failure here is
    telos' own and fails open: the call goes on without the hint.
    """
    try:
        hint_headers(kwargs)
    except TelosHintError:
        raise
    except Exception as exc:
        kwargs.pop("telos_hint", None)
        report_failure(TelosStageError("hint", exc))
    return wrapped(*args, **kwargs)


# -- the request layer -----------------------------------------------------------------------------


#: Types of plain JSON values: never an SDK sentinel (checked first, it is most of a body's fields).
_PLAIN = frozenset({str, int, float, bool, type(None), list, dict})


class _SentinelKinds(dict[type, bool]):
    """``kinds[type(value)]``: whether ``value`` is an SDK sentinel (``Omit`` / ``NotGiven``). Plain
    types and the sentinel types seen are held (a hit is a look-up, no call: a body has a dozen
    sentinel fields); any other type is answered without being kept."""

    def __missing__(self, kind: type) -> bool:
        sdk = kind.__module__.split(".")[0]
        found = kind.__name__ in ("Omit", "NotGiven") and sdk in ("anthropic", "openai")
        if found:
            self[kind] = True
        return found


_SENTINEL_KIND = _SentinelKinds.fromkeys(_PLAIN, False)


def _is_sentinel(value: Any) -> bool:
    return _SENTINEL_KIND[type(value)]


def _merged_body(options: Any) -> dict[str, Any] | None:
    """``json_data`` merged with ``extra_json``, top-level sentinels removed (as the SDK merges them)."""
    data = options.json_data
    if not isinstance(data, Mapping):
        return None
    body = {key: value for key, value in data.items() if not _SENTINEL_KIND[type(value)]}
    extra = options.extra_json
    if isinstance(extra, Mapping):
        # Like the SDK's _merge_mappings: extra_body wins, an Omit removes the key.
        for key, value in extra.items():
            if _is_sentinel(value):
                body.pop(key, None)
            else:
                body[key] = value
    return body


def _plain_body(options: Any) -> dict[str, Any] | None:
    """The body the SDK would send: ``json_data`` merged with ``extra_json``, sentinels removed."""
    body = _merged_body(options)
    return None if body is None else _well_formed(body, options.url)


def _well_formed(body: dict[str, Any], url: Any, *, checked: bool = False) -> dict[str, Any] | None:
    """``body`` if it has the message list (or Responses input items) of its endpoint, else ``None``.

    ``checked``: ``_top_plain`` already found every message a dict with a ``str`` role.
    """
    if checked and not _is_responses_url(url):
        return body if type(body.get("messages")) is list else None
    if _is_responses_url(url):
        items = body.get("input")
        if isinstance(items, list) and not all(isinstance(item, Mapping) for item in items):
            return None  # malformed: let the SDK / API produce its own error
        return body
    messages = body.get("messages")
    if not isinstance(messages, list) or not _all_messages(messages):
        return None  # malformed: let the SDK / API produce its own error
    return body


_RESPONSES_PATHS = ("/responses", "/responses/input_tokens", "/responses/compact")


def _trace_api(sdk: str, options: Any) -> str:
    """The API of a request in the vocabulary of trace files: anthropic, openai (chat) or responses."""
    if sdk == "anthropic":
        return "anthropic"
    return "responses" if _is_responses_url(getattr(options, "url", None)) else "openai"


def _is_responses_url(url: Any) -> bool:
    """Whether the request goes to an OpenAI Responses endpoint (``input`` items, no ``messages``)."""
    return isinstance(url, str) and url.split("?", 1)[0].rstrip("/").endswith(_RESPONSES_PATHS)


_ROLE_KEYS = repeat("role")  # an endless "role", "role", ... for map(dict.get, ...)


def _top_plain(body: dict[str, Any]) -> bool:
    """Whether ``body`` is plain JSON at the top, in its message (or input item) list and roles, in
    its first message and tools (which name an implicit session): C-level passes in the common case.
    Deeper values are checked by the pipeline (``lift/plain.py``), past what a session has settled."""
    if not set(map(type, body.values())) <= _PLAIN:
        return False
    for key in ("messages", "input"):
        items = body.get(key)
        if type(items) is list and items:
            if not set(map(type, items)) <= {dict}:
                return False
            if key == "messages" and not set(map(type, map(dict.get, items, _ROLE_KEYS))) <= {str}:
                return False
            try:
                require_plain({"first": items[0]})
            except NotPlainJSON:
                return False
    tools = body.get("tools")
    return type(tools) is not list or set(map(type, tools)) <= {dict}


def _readable(sdk: str, options: Any) -> tuple[Any, dict[str, Any] | None]:
    """The options to send and the plain body telos reads from them (``None``: not for telos).

    A body that is plain JSON at the top is read as it is; any other is read as the SDK serializes
    it (``_as_sdk_sends``).
    """
    body = _merged_body(options)
    if body is None:
        return options, None
    if _top_plain(body):
        return options, _well_formed(body, options.url, checked=True)
    return _as_sdk_sends(sdk, options, body)


#: Set while an async client's call is routed: a body with file inputs is then not read here (that
#: would read the files on the event loop's thread) but raises ``_FilesToRead``, and the async path
#: reads them in a worker thread as the SDK does (``sdk_json.files_read``) and routes the call again.
_async_route: contextvars.ContextVar[bool] = contextvars.ContextVar("telos_wrap_async_route", default=False)


class _FilesToRead(Exception):
    """An async call's body has file inputs to read before it can be serialized (``_async_route``).

    ``body``: the body as the SDK copies it (``with_file_inputs``); a generator in the caller's body
    was read once, into it, so the files are read from this copy, never from the caller's body."""

    def __init__(self, body: Any) -> None:
        super().__init__("file inputs to read")
        self.body = body


def _as_sdk_sends(sdk: str, options: Any, body: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """``body`` as the SDK serializes it (``patch/sdk_json.py``), and options that send exactly that.

    If the SDK's serializer rejects a value, the request goes out as built (the SDK then raises its
    own error), with a log line saying so; nothing is guessed.
    """
    if _async_route.get():
        copied, files = with_file_inputs(sdk, body)
        if files:
            raise _FilesToRead(copied)
        body = copied
    try:
        plain = sdk_plain(sdk, body)
    except Exception as exc:
        logger.warning(
            "telos_wrap: the %s SDK cannot serialize this request's body (%s); telos leaves it as "
            "built and the SDK reports the error",
            sdk,
            type(exc).__name__,
        )
        return options, None
    return options.model_copy(update={"json_data": plain, "extra_json": None}), _well_formed(
        plain, options.url
    )


def _observed_body(sdk: str, options: Any) -> dict[str, Any] | None:
    """The body observers (``record()``, the pytest plugin) see: what the caller sent, as the SDK
    serializes it when it is not plain JSON (only while someone observes: it walks the whole body)."""
    body = _plain_body(options)
    try:
        if body is not None:
            require_plain(body)
        return body
    except NotPlainJSON:
        pass
    merged = _merged_body(options)
    try:
        return None if merged is None else _well_formed(sdk_plain(sdk, merged), options.url)
    except Exception:
        return body


def _all_messages(messages: list[Any]) -> bool:
    """Whether every item is a mapping with a string ``role``."""
    # The common case (plain dicts, str roles) in C-level passes: this runs on every call over the
    # whole conversation, and a Python-level loop costs ~0.1 ms at 1,000 messages.
    if set(map(type, messages)) <= {dict} and set(map(type, map(dict.get, messages, _ROLE_KEYS))) <= {str}:
        return True
    return all(isinstance(m, Mapping) and isinstance(m.get("role"), str) for m in messages)


def _materialize(options: Any) -> Any:
    """Options whose ``messages`` / ``tools`` are lists, if the caller passed other iterables.

    The anthropic SDK leaves a generator or tuple as it came; it can be read only once, so it is
    turned into a list here and that list is what goes out — rewritten, or as is if telos fails.
    """
    data = options.json_data
    if not isinstance(data, Mapping):
        return options
    changed = {
        key: list(value)
        for key in ("messages", "tools", "input")
        if (value := data.get(key)) is not None
        and type(value) is not list  # the usual case, before the ABC checks
        and not isinstance(value, (list, str, bytes, Mapping))
        and not _is_sentinel(value)
        and hasattr(value, "__iter__")
    }
    return options.model_copy(update={"json_data": {**data, **changed}}) if changed else options


def _strip_hint_header(options: Any) -> tuple[Any, str | None]:
    headers = options.headers
    if not isinstance(headers, Mapping) or HINT_HEADER not in headers:
        return options, None
    value = headers[HINT_HEADER]
    kept = {key: item for key, item in headers.items() if key != HINT_HEADER}
    return options.model_copy(update={"headers": kept}), hint_token(value)


#: A caller's name for the conversation (docs/sessions.md), per call (``extra_headers``) or per client
#: (``default_headers``); telos reads it and removes it from the request that goes out.
SESSION_HEADER = "x-telos-session"


def _strip_session_header(sdk: str, client: Any, options: Any) -> tuple[Any, str | None]:
    headers = options.headers if isinstance(options.headers, Mapping) else {}
    own = [key for key in headers if isinstance(key, str) and key.lower() == SESSION_HEADER]
    # The caller's own client headers (``default_headers=``) are the SDKs' ``_custom_headers``; the
    # ``default_headers`` property builds a new dict with the SDK's own headers on every read.
    defaults = getattr(client, "_custom_headers", None)
    if not isinstance(defaults, Mapping):
        defaults = getattr(client, "default_headers", None)
    default = [
        key for key in (defaults if isinstance(defaults, Mapping) else {}) if key.lower() == SESSION_HEADER
    ]
    if not own and not default:
        return options, None
    value = headers[own[-1]] if own else defaults[default[-1]]  # type: ignore[index]
    kept = {key: item for key, item in headers.items() if key not in own}
    if default:  # set on the client: the SDK's Omit removes it from this request's headers
        omit = importlib.import_module(f"{sdk}._types").Omit()
        # Under the client's own spelling of the name too: openai 2.x / anthropic 0.x merge default
        # and per-request headers as plain dicts, so only an Omit under the same key removes it.
        for key in {SESSION_HEADER, *default}:
            kept[key] = omit
    name = value.strip() if isinstance(value, str) else ""
    return options.model_copy(update={"headers": kept}), name or None


def _tenant(client: Any, hints: TelosHints) -> str:
    """The call's tenant signals outside its body, hashed (``identity.tenant_digest``): the
    ``isolation`` hint and the client's credentials and base URL."""
    # Every call reads these: a plain str or unset setting costs no call beyond its ``getattr``.
    key = getattr(client, "api_key", None)
    token = getattr(client, "auth_token", None)
    organization = getattr(client, "organization", None)
    project = getattr(client, "project", None)
    url = getattr(client, "base_url", None)
    return tenant_digest(
        hints.isolation,
        key if key is None or type(key) is str else _only_str(key),
        token if token is None or type(token) is str else _only_str(token),
        organization if organization is None or type(organization) is str else _only_str(organization),
        project if project is None or type(project) is str else _only_str(project),
        None if url is None else str(url),
    )


#: The client attributes that name whose traffic it is (only string values count: ``organization`` is
#: also the name of an Anthropic resource), read in this order by ``_tenant``.
_CLIENT_SETTINGS = ("api_key", "auth_token", "organization", "project", "base_url")


def _only_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _resolve_session(
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    carried: Session | str | None,
    named: str | None = None,
    client: Any = None,
    *,
    tenant: str | None = None,
) -> Session:
    """The call's session. ``tenant``: ``_tenant(client, hints)`` when the caller has it already."""
    # The session the call was built in (carried with the request; BUILT_OUTSIDE: none, whatever
    # is active now), else - a request without telos' token - the one active now.
    own = carried if isinstance(carried, Session) else None if carried == BUILT_OUTSIDE else current_session()
    if hints.session is not None or named is not None:
        # A session named by id resolves within the caller's own store: the store of the session
        # the call was built in, else the configured default — never another tenant's store.
        store = own.store if own is not None else default_store()
        return named_session(hints.session if hints.session is not None else str(named), store=store)
    if own is not None:
        return own
    # The conversation is named by its first message as the caller wrote it: drop_patterns strip it
    # only where they apply to messages (drop_scope="all").
    scoped = hints.drop_patterns if hints.drop_scope == "all" else ()
    return implicit_session(
        api, body, drop_patterns=scoped, tenant=_tenant(client, hints) if tenant is None else tenant
    )


@dataclass(frozen=True, slots=True)
class _Turn:
    """A call that needs its session: what ``_route`` decided, for the sync or async finish."""

    options: Any
    api: Api
    engine_name: str
    body: dict[str, Any]
    session: Session
    strict: bool
    is_turn: bool  # False for a token count or a compaction: rewritten, never a turn of the session
    prepare_options: PrepareOptions | None  # None: telos is disabled for this call (pass-through)
    tenant: str  # the call's tenant digest (``_tenant``): scopes fleet learning
    #: The same call made for its body as the SDK serializes it (``None``: it cannot be read); given
    #: a body whose file inputs were read already, for that body.
    read_as_sdk: Callable[[dict[str, Any] | None], _Turn | None]
    sdk: str

    def unread(self, error: TelosStageError) -> _Turn | None:
        """The turn to prepare instead when ``error`` says the body is not plain JSON, else ``None``."""
        if not isinstance(error.__cause__, NotPlainJSON):
            return None
        logger.debug("telos_wrap: %s; reading the body as the SDK serializes it", error.__cause__)
        return self.read_as_sdk(None)

    async def aunread(self, error: TelosStageError) -> _Turn | None:
        """``unread`` for an async client: file inputs deep in the body (a later message's image
        given as a path) are read in a worker thread, as the SDK reads them there, never on the
        event loop's thread (``_async_route``)."""
        if not isinstance(error.__cause__, NotPlainJSON):
            return None
        logger.debug("telos_wrap: %s; reading the body as the SDK serializes it", error.__cause__)
        token = _async_route.set(True)
        try:
            return self.read_as_sdk(None)
        except _FilesToRead as files:
            copied = files.body
        finally:
            _async_route.reset(token)
        return self.read_as_sdk(await files_read(self.sdk, copied))

    def context(self, index: int) -> CallContext | None:
        """The context of a request sent as the SDK built it; ``None`` if its engine cannot be had.

        On the fall-back path: it must not fail a second time (the engine lookup is what failed if
        the engine cannot be built). Without a context the response is not read for usage.
        """
        try:
            engine = get_engine(self.engine_name)
        except Exception:
            logger.debug("telos_wrap: no engine %r to read this response's usage", self.engine_name)
            return None
        return CallContext(engine=engine, session=self.session, index=index, strict=self.strict)

    def rewritten(self, index: int, prepared: Prepared) -> tuple[Any, CallContext]:
        if prepared.untouched is not None:
            # Nothing in it can be cached: the SDK's own request goes out, byte for byte.
            ctx = CallContext(engine=prepared.engine, session=self.session, index=index, strict=self.strict)
            return self.options, ctx
        new_options = self.options.model_copy(update={"json_data": prepared.body, "extra_json": None})
        # The engine asked for stream usage the caller did not: the usage-only chunk is ours to swallow.
        hide = _includes_usage(prepared.body) and not _includes_usage(self.body)
        return new_options, CallContext(
            engine=prepared.engine,
            session=self.session,
            index=index,
            strict=self.strict,
            hide_usage_chunk=hide,
        )

    def failed(self, error: TelosStageError) -> bool:
        """Report a failure (raises if strict); whether the pass-through should be recorded."""
        report_failure(error, strict=self.strict)
        # When the store itself failed, recording the pass-through would wait on it a second time.
        return self.is_turn and error.stage != "session.store"


def _route(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None, _Turn | None]:
    """Everything before the session's I/O: hints, route, body, session. No store access."""
    config = current_config()
    try:
        options, header = _strip_hint_header(_materialize(options))
        options, named = _strip_session_header(sdk, client, options)
        hints, carried = read_hint_header(header)
    except Exception as exc:  # a telos bug must never break the call
        report_failure(TelosStageError("hint", exc))
        return options, None, None
    try:
        route: Route | None = route_request(
            sdk, options.method, options.url, str(client.base_url), hints, config
        )
    except Exception as exc:
        report_failure(TelosStageError("route", exc))
        return options, None, None
    if route is None:
        return options, None, None
    # Observe only (record() without patch(), or patch(enabled=False)): the request goes out as the
    # SDK built it; with no observer there is nothing to do at all.
    observe_only = not config.enabled or not rewriting()
    if observe_only and not OBSERVERS:
        return options, None, None
    if observe_only:  # a recording sees the request as the SDK builds it; nothing is read for sending
        body = _plain_body(options)
    else:
        options, body = _readable(sdk, options)
    if body is None:
        return options, None, None
    return options, None, _turn(sdk, client, options, body, route, hints, carried, named, observe_only)


def _turn(
    sdk: str,
    client: Any,
    options: Any,
    body: dict[str, Any],
    route: Route,
    hints: TelosHints,
    carried: Session | str | None,
    named: str | None,
    observe_only: bool,
) -> _Turn:
    """The call's turn, for ``body`` (``options`` send it); ``_Turn.read_as_sdk`` makes it again for
    the body as the SDK serializes it."""
    config = current_config()
    raw_hints = hints
    raw_tenant = _tenant(client, hints)
    session = _resolve_session(route.api, body, hints, carried, named, client, tenant=raw_tenant)
    hints = hints.merged_over(session.hints)
    strict = session.strict if session.strict is not None else config.strict
    prepare_options = None
    if not (hints.disable or observe_only):
        prepare_options = PrepareOptions(
            engine=route.engine,
            hints=hints,
            session_id=session.id,
            count_only=route.count_only,
            bridge=BridgeOptions(keep_past_drop=config.keep_past_drop),
            refpool_threshold=config.refpool_threshold,
            only_what_pays=config.only_what_pays,
        )
    is_turn = route.turn and not route.count_only
    tenant = raw_tenant if hints.isolation == raw_hints.isolation else _tenant(client, hints)

    def again(files_read: dict[str, Any] | None) -> _Turn | None:
        # ``_as_sdk_sends`` sends the body it read (``json_data``, no ``extra_json``) in either case.
        read, plain = _as_sdk_sends(sdk, options, body if files_read is None else files_read)
        if plain is None:
            return None
        return _turn(sdk, client, read, plain, route, raw_hints, carried, named, observe_only)

    return _Turn(
        options, route.api, route.engine, body, session, strict, is_turn, prepare_options, tenant, again, sdk
    )


def _guarded(
    prepare_call: Callable[[str, Any, Any], tuple[Any, CallContext | None]],
) -> Callable[[str, Any, Any], tuple[Any, CallContext | None]]:
    """``prepare_call`` that fails open on *any* exception of telos' (a bug outside the stages too):
    the SDK's request goes out as built. A ``TelosStageError`` passes: only ``strict`` raises one."""

    def guarded(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None]:
        try:
            options = _materialize(options)  # a generator is read once: what is sent is this list
            return prepare_call(sdk, client, options)
        except TelosStageError:
            raise
        except Exception as exc:
            report_failure(TelosStageError("prepare", exc))
            return options, None

    return guarded


def _aguarded(
    prepare_call: Callable[[str, Any, Any], Awaitable[tuple[Any, CallContext | None]]],
) -> Callable[[str, Any, Any], Awaitable[tuple[Any, CallContext | None]]]:
    """:func:`_guarded` for the async request layer."""

    async def guarded(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None]:
        try:
            options = _materialize(options)
            return await prepare_call(sdk, client, options)
        except TelosStageError:
            raise
        except Exception as exc:
            report_failure(TelosStageError("prepare", exc))
            return options, None

    return guarded


@_guarded
def _prepare(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None]:
    """Rewrite ``options`` for sending; returns the options to send and the call's context."""
    with time_budget(current_config().time_budget):
        return _prepare_within_budget(sdk, client, options)


def _prepare_within_budget(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None]:
    options, ctx, turn = _route(sdk, client, options)
    if turn is None:
        return options, ctx
    return _prepare_turn(turn, again=True)


def _prepare_turn(turn: _Turn, *, again: bool) -> tuple[Any, CallContext | None]:
    options = turn.options
    session, po = turn.session, turn.prepare_options
    if po is None:
        index = session.note_passthrough(turn.api, turn.engine_name, turn.body) if turn.is_turn else -1
        return options, turn.context(index)
    try:
        if not turn.is_turn:
            return turn.rewritten(-1, prepare(turn.api, turn.body, po, session.hooks(strict=turn.strict)))
        return turn.rewritten(
            *session.prepare_request(turn.api, turn.body, po, strict=turn.strict, tenant=turn.tenant)
        )
    except TelosStageError as error:
        read = turn.unread(error) if again else None
        if read is not None:
            return _prepare_turn(read, again=False)
        record = turn.failed(error)
        index = (
            session.note_passthrough(turn.api, turn.engine_name, turn.body, failed=error) if record else -1
        )
        return options, turn.context(index)


@_aguarded
async def _aprepare(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None]:
    """``_prepare`` for async clients: the session's store I/O is awaited, never blocking the loop."""
    with time_budget(current_config().time_budget):
        return await _aprepare_within_budget(sdk, client, options)


async def _aprepare_within_budget(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None]:
    token = _async_route.set(True)
    try:
        options, ctx, turn = _route(sdk, client, options)
    except _FilesToRead as files:
        read = await files_read(sdk, files.body)
        options = options.model_copy(update={"json_data": read, "extra_json": None})
        options, ctx, turn = _route(sdk, client, options)
    finally:
        _async_route.reset(token)
    if turn is None:
        return options, ctx
    return await _aprepare_turn(turn, again=True)


async def _aprepare_turn(turn: _Turn, *, again: bool) -> tuple[Any, CallContext | None]:
    options = turn.options
    session, po = turn.session, turn.prepare_options
    if po is None:
        index = (
            await session.note_passthrough_async(turn.api, turn.engine_name, turn.body)
            if turn.is_turn
            else -1
        )
        return options, turn.context(index)
    try:
        if not turn.is_turn:
            hooks = await session.ahooks(strict=turn.strict)
            return turn.rewritten(-1, prepare(turn.api, turn.body, po, hooks))
        return turn.rewritten(
            *await session.prepare_request_async(
                turn.api, turn.body, po, strict=turn.strict, tenant=turn.tenant
            )
        )
    except TelosStageError as error:
        read = await turn.aunread(error) if again else None
        if read is not None:
            return await _aprepare_turn(read, again=False)
        record = turn.failed(error)
        index = (
            await session.note_passthrough_async(turn.api, turn.engine_name, turn.body, failed=error)
            if record
            else -1
        )
        return options, turn.context(index)


def _includes_usage(body: Mapping[str, Any]) -> bool:
    stream_options = body.get("stream_options")
    return (
        bool(body.get("stream"))
        and isinstance(stream_options, Mapping)
        and bool(stream_options.get("include_usage"))
    )


def _swap_options(
    args: tuple[Any, ...], kwargs: dict[str, Any], options: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if len(args) > 1:
        return (args[0], options, *args[2:]), kwargs
    kwargs = dict(kwargs)
    kwargs["options"] = options
    return args, kwargs


def _original_options(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[1] if len(args) > 1 else kwargs.get("options")


def _after(result: Any, ctx: CallContext) -> None:
    """Remember the call on a raw response so its later ``.parse()`` can attach usage."""
    if hasattr(result, "http_response") and hasattr(result, "parse"):
        try:
            result._telos_call = ctx
        except Exception:
            pass


def make_request_wrapper(sdk: str) -> Wrapper:
    """Wrapper for ``SyncAPIClient.request`` of ``sdk`` (``"anthropic"`` or ``"openai"``)."""

    def request_wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        original = _original_options(args, kwargs)
        options, ctx = _prepare(sdk, instance, original)
        if OBSERVERS:
            notify_request(_trace_api(sdk, original), ctx, _observed_body(sdk, original))
        tel = telemetry_begin(ctx, original, instance)  # None unless a provider is configured
        args, kwargs = _swap_options(args, kwargs, options)
        if ctx is None:
            return wrapped(*args, **kwargs)
        token = current_call.set(ctx)
        flight = tel.sending() if tel is not None else None
        try:
            result = wrapped(*args, **kwargs)
        finally:
            current_call.reset(token)
            if tel is not None:
                tel.sent(flight)
        _after(result, ctx)
        return result

    return request_wrapper


def make_async_request_wrapper(sdk: str) -> Callable[..., Awaitable[Any]]:
    """Wrapper for ``AsyncAPIClient.request`` of ``sdk``."""

    async def request_wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        original = _original_options(args, kwargs)
        options, ctx = await _aprepare(sdk, instance, original)
        if OBSERVERS:
            notify_request(_trace_api(sdk, original), ctx, _observed_body(sdk, original))
        tel = telemetry_begin(ctx, original, instance)  # None unless a provider is configured
        args, kwargs = _swap_options(args, kwargs, options)
        if ctx is None:
            return await wrapped(*args, **kwargs)
        token = current_call.set(ctx)
        flight = tel.sending() if tel is not None else None
        try:
            result = await wrapped(*args, **kwargs)
        finally:
            current_call.reset(token)
            if tel is not None:
                tel.sent(flight)
        _after(result, ctx)
        return result

    return request_wrapper


# -- responses -------------------------------------------------------------------------------------


def _observe_result(result: Any, ctx: CallContext) -> None:
    try:
        if is_stream(result):
            hook_stream(result, ctx)
            return
        usage = getattr(result, "usage", None)
        if usage is None or not hasattr(usage, "model_dump"):
            return
        # Anthropic ``diagnostics``; OpenAI Responses ``prompt_cache_diagnostics`` (docs/engines.md).
        diagnostics = _field(result, "diagnostics") or _field(result, "prompt_cache_diagnostics")
        report = ctx.engine.parse_usage(usage.model_dump(mode="json"), diagnostics=json_mapping(diagnostics))
        attach_usage(result, report)
        notify_usage(ctx, report)
        if ctx.telemetry is not None:
            ctx.telemetry.observe(report)
        if ctx.index >= 0:
            response_id = getattr(result, "id", None)
            ctx.session.record_usage(
                ctx.index, report, response_id=response_id if isinstance(response_id, str) else None
            )
    except Exception as exc:
        report_failure(TelosStageError("usage", exc), strict=ctx.strict)


def _field(model: Any, name: str) -> Any:
    """``getattr(model, name, None)`` for an SDK model, without the raised and caught AttributeError
    (~0.8 us) of a field the model lacks: pydantic keeps fields in ``__dict__``, unknown ones (an
    SDK line without the type) in ``__pydantic_extra__``."""
    fields = getattr(model, "__dict__", None)
    if not isinstance(fields, dict):
        return getattr(model, name, None)
    if name in fields:
        return fields[name]
    extra = getattr(model, "__pydantic_extra__", None)
    return extra.get(name) if isinstance(extra, dict) else None


def _context_of(response: Any) -> CallContext | None:
    ctx = getattr(response, "_telos_call", None)
    return ctx if isinstance(ctx, CallContext) else current_call.get()


def parse_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``APIResponse.parse`` / ``LegacyAPIResponse.parse``: attach usage to what it returns."""
    result = wrapped(*args, **kwargs)
    ctx = _context_of(instance)
    if ctx is not None:
        _observe_result(result, ctx)
    return result


async def async_parse_wrapper(
    wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``AsyncAPIResponse.parse``: attach usage to what it returns."""
    result = await wrapped(*args, **kwargs)
    ctx = _context_of(instance)
    if ctx is not None:
        _observe_result(result, ctx)
    return result
