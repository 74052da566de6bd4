"""A call's turn: its hints, route, session and tenant, then its preparation (sync and async).

``prepare_for_sending`` / ``aprepare_for_sending`` take the SDK's request options and give back the
options to send and the ``CallContext`` the response side reads: the telos hint and the session
header are taken out of the request, the route says which engine builds it, the body is read as the
SDK would send it (``request_body``), the session is the caller's, the one the hint names, or the
implicit one of the conversation, and the session's turn runs the pipeline (lift → bridge → emit)
once. Everything fails open: any exception of telos' sends the SDK's own request (``strict=True``
raises); a body that turns out not to be plain JSON deep inside is read again as the SDK serializes
it (``_read_as_sdk``) before anything is given up.

All of it is one plan (``_plan``), written once and doing no I/O itself: it yields the steps it
needs (``patch/steps.py``: file inputs to read, the session's turn, its hooks, a pass-through to
note) and is sent their answers. ``prepare_for_sending`` runs it with the sync driver,
``aprepare_for_sending`` with the async one; nothing else tells a sync call from an async one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telos_wrap.bridge import BridgeOptions
from telos_wrap.config import current_config, rewriting
from telos_wrap.engines.registry import get_engine
from telos_wrap.errors import NotPlainJSON, TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api
from telos_wrap.patch.calls import (
    BUILT_OUTSIDE,
    BuiltIn,
    CallContext,
    hint_header_names,
    hint_token,
    read_hint_header,
)
from telos_wrap.patch.observers import OBSERVERS
from telos_wrap.patch.request_body import as_sdk_sends, materialize, plain_body, readable
from telos_wrap.patch.routing import Route, route_request
from telos_wrap.patch.steps import Hooks, NotePassthrough, Plan, PrepareTurn, arun, run
from telos_wrap.pipeline import Prepared, PrepareOptions, prepare, time_budget
from telos_wrap.private_api import asyncio_loop_running, client_custom_headers, sdk_omit_type
from telos_wrap.sessions import Session, current_session, default_store, implicit_session, named_session
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.identity import tenant_digest
from telos_wrap.sessions.runtime import SessionRuntime
from telos_wrap.sessions.stores.budget import StoreTimeSpent
from telos_wrap.sessions.tenancy import space_of

__all__ = ["SESSION_HEADER", "aprepare_for_sending", "prepare_for_sending", "resolve_session", "tenant_of"]

logger = logging.getLogger("telos_wrap")


def _strip_hint_header(options: Any) -> tuple[Any, str | None]:
    headers = options.headers
    names = hint_header_names(headers) if isinstance(headers, Mapping) else []
    if not names:
        return options, None
    kept = {key: item for key, item in headers.items() if key not in names}
    # One per call: an outer entry point's header wins over an inner one (calls.hint_headers).
    return options.model_copy(update={"headers": kept}), hint_token(names[0])


#: A caller's name for the conversation (docs/sessions.md), per call (``extra_headers``) or per client
#: (``default_headers``); telos reads it and removes it from the request that goes out.
SESSION_HEADER = "x-telos-session"


def _strip_session_header(sdk: str, client: Any, options: Any) -> tuple[Any, str | None]:
    headers = options.headers if isinstance(options.headers, Mapping) else {}
    own = [key for key in headers if isinstance(key, str) and key.lower() == SESSION_HEADER]
    # The caller's own client headers (``default_headers=``), without the SDK's own.
    defaults = client_custom_headers(client)
    if not isinstance(defaults, Mapping):
        defaults = getattr(client, "default_headers", None)
    default = [
        key for key in (defaults if isinstance(defaults, Mapping) else {}) if key.lower() == SESSION_HEADER
    ]
    if not own and not default:
        return options, None
    value = headers[own[-1]] if own else defaults[default[-1]]
    kept = {key: item for key, item in headers.items() if key not in own}
    if default:  # set on the client: the SDK's Omit removes it from this request's headers
        omit = sdk_omit_type(sdk)()
        # Under the client's own spelling of the name too: openai 2.x / anthropic 0.x merge default
        # and per-request headers as plain dicts, so only an Omit under the same key removes it.
        for key in {SESSION_HEADER, *default}:
            kept[key] = omit
    name = value.strip() if isinstance(value, str) else ""
    return options.model_copy(update={"headers": kept}), name or None


def tenant_of(client: Any, hints: TelosHints) -> str:
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


def _only_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def resolve_session(
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    carried: BuiltIn,
    named: str | None = None,
    client: Any = None,
    *,
    tenant: str | None = None,
) -> Session:
    """The call's session. ``tenant``: ``tenant_of(client, hints)`` when the caller has it already."""
    # The session the call was built in (carried with the request; BUILT_OUTSIDE: none, whatever
    # is active now), else - a request without telos' token - the one active now.
    own = carried if isinstance(carried, Session) else None if carried is BUILT_OUTSIDE else current_session()
    if hints.session is not None or named is not None:
        # A session named by id resolves within the caller's own store: the store of the session
        # the call was built in, else the configured default — never another tenant's store.
        store = own.store if own is not None else default_store()
        space = space_of(hints.isolation, tenant_of(client, hints) if tenant is None else tenant)
        return named_session(
            hints.session if hints.session is not None else str(named), store=store, space=space
        )
    if own is not None:
        return own
    # The conversation is named by its first message as the caller wrote it: drop_patterns strip it
    # only where they apply to messages (drop_scope="all").
    scoped = hints.drop_patterns if hints.drop_scope == "all" else ()
    return implicit_session(
        api, body, drop_patterns=scoped, tenant=tenant_of(client, hints) if tenant is None else tenant
    )


@dataclass(frozen=True, slots=True)
class _Call:
    """What the route of a call decided before its body was read: what makes its turn again for the
    body as the SDK serializes it (``_read_as_sdk``)."""

    sdk: str
    client: Any
    route: Route
    hints: TelosHints  # the call's own hints, before its session's are merged over them
    carried: BuiltIn
    named: str | None
    observe_only: bool


@dataclass(frozen=True, slots=True)
class _Turn:
    """A call that needs its session: what ``_route`` decided, for its preparation (``_prepare_turn``)."""

    call: _Call
    options: Any
    api: Api
    engine_name: str
    body: dict[str, Any]
    session: SessionRuntime  # the runtime of the call's session (``runtime_of``)
    strict: bool
    is_turn: bool  # False for a token count or a compaction: rewritten, never a turn of the session
    prepare_options: PrepareOptions | None  # None: telos is disabled for this call (pass-through)
    tenant: str  # the call's tenant digest (``tenant_of``): scopes fleet learning

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


def _route(sdk: str, client: Any, options: Any) -> Plan[tuple[Any, _Turn | None]]:
    """Everything before the session's I/O: hints, route, body, session. No store access; the body's
    file inputs, if it must be read as the SDK serializes it, are read by the driver (``ReadFiles``)."""
    config = current_config()
    try:
        options, header = _strip_hint_header(materialize(options))
        options, named = _strip_session_header(sdk, client, options)
        hints, carried = read_hint_header(header)
    except Exception as exc:  # a telos bug must never break the call
        report_failure(TelosStageError("hint", exc))
        return options, None
    try:
        route: Route | None = route_request(
            sdk, options.method, options.url, str(client.base_url), hints, config
        )
    except Exception as exc:
        report_failure(TelosStageError("route", exc))
        return options, None
    if route is None:
        return options, None
    # Observe only (record() without patch(), or patch(enabled=False)): the request goes out as the
    # SDK built it; with no observer there is nothing to do at all.
    observe_only = not config.enabled or not rewriting()
    if observe_only and not OBSERVERS:
        return options, None
    if observe_only:  # a recording sees the request as the SDK builds it; nothing is read for sending
        body = plain_body(options)
    else:
        options, body = yield from readable(sdk, options)
    if body is None:
        return options, None
    call = _Call(sdk, client, route, hints, carried, named, observe_only)
    return options, _turn(call, options, body)


def _turn(call: _Call, options: Any, body: dict[str, Any]) -> _Turn:
    """The call's turn, for ``body`` (``options`` send it)."""
    config = current_config()
    client, route = call.client, call.route
    raw_tenant = tenant_of(client, call.hints)
    session = runtime_of(
        resolve_session(route.api, body, call.hints, call.carried, call.named, client, tenant=raw_tenant)
    )
    hints = call.hints.merged_over(session.hints)
    strict = session.strict if session.strict is not None else config.strict
    prepare_options = None
    if not (hints.disable or call.observe_only):
        prepare_options = PrepareOptions(
            engine=route.engine,
            hints=hints,
            session_id=session.id,
            count_only=route.count_only,
            bridge=BridgeOptions(keep_past_drop=config.keep_past_drop, output_filter=config.output_filter),
            refpool_threshold=config.refpool_threshold,
            only_what_pays=config.only_what_pays,
        )
    is_turn = route.turn and not route.count_only
    tenant = raw_tenant if hints.isolation == call.hints.isolation else tenant_of(client, hints)
    # A named session binds to its first call's tenant (sessions/tenancy.py); no I/O here.
    if not session.bound:
        session.bind_tenant(space_of(hints.isolation, tenant))
    return _Turn(
        call, options, route.api, route.engine, body, session, strict, is_turn, prepare_options, tenant
    )


def _read_as_sdk(turn: _Turn, error: TelosStageError) -> Plan[_Turn | None]:
    """The turn to prepare instead when ``error`` says the body is not plain JSON deep inside (a
    later message's value the SDK would serialize its own way): the same call for its body as the SDK
    serializes it. ``None``: another error, or the SDK cannot serialize the body either."""
    if not isinstance(error.__cause__, NotPlainJSON):
        return None
    logger.debug("telos_wrap: %s; reading the body as the SDK serializes it", error.__cause__)
    # ``as_sdk_sends`` sends the body it read (``json_data``, no ``extra_json``).
    options, plain = yield from as_sdk_sends(turn.call.sdk, turn.options, turn.body)
    return None if plain is None else _turn(turn.call, options, plain)


def _plan(sdk: str, client: Any, options: Any) -> Plan[tuple[Any, CallContext | None]]:
    """One call's route and preparation, for either driver (``patch/steps.py``): the options to send
    and the call's context.

    Fails open on *any* exception of telos' (a bug outside the stages too): the SDK's request goes
    out as built. A ``TelosStageError`` passes: only ``strict`` raises one."""
    try:
        options = materialize(options)  # a generator is read once: what is sent is this list
        sent, turn = yield from _route(sdk, client, options)
        if turn is None:
            return sent, None
        return (yield from _prepare_turn(turn, again=True))
    except TelosStageError:
        raise
    except Exception as exc:
        report_failure(TelosStageError("prepare", exc))
        return options, None


def _prepare_turn(turn: _Turn, *, again: bool) -> Plan[tuple[Any, CallContext | None]]:
    """The turn prepared in its session (``again``: read the body as the SDK serializes it and try
    once more if it turns out not to be plain JSON deep inside)."""
    session, po = turn.session, turn.prepare_options
    if po is None:
        index = (
            (yield NotePassthrough(session, turn.api, turn.engine_name, turn.body)) if turn.is_turn else -1
        )
        return turn.options, turn.context(index)
    try:
        if not turn.is_turn:
            hooks = yield Hooks(session, turn.strict)
            return turn.rewritten(-1, prepare(turn.api, turn.body, po, hooks))
        return turn.rewritten(
            *(yield PrepareTurn(session, turn.api, turn.body, po, turn.strict, turn.tenant))
        )
    except TelosStageError as error:
        read = (yield from _read_as_sdk(turn, error)) if again else None
        if read is not None:
            return (yield from _prepare_turn(read, again=False))
        if turn.failed(error):
            index = yield NotePassthrough(session, turn.api, turn.engine_name, turn.body, error)
        elif turn.is_turn and isinstance(error.__cause__, StoreTimeSpent):
            # No store time left for the session's plan (an async call's store budget, ``budget.py``):
            # counted without the store (written with the session's next write).
            index = session.note_passthrough_deferred(turn.api, turn.engine_name, turn.body, failed=error)
        else:
            index = -1
        return turn.options, turn.context(index)


def prepare_for_sending(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None]:
    """Rewrite ``options`` for sending; returns the options to send and the call's context.

    The call's plan (``_plan``) run by the sync driver: file inputs read inline, as the sync SDK
    reads them, and the session's store I/O done on this thread."""
    with time_budget(current_config().time_budget):
        return run(_plan(sdk, client, options))


async def aprepare_for_sending(sdk: str, client: Any, options: Any) -> tuple[Any, CallContext | None]:
    """``prepare_for_sending`` for async clients: the same plan run by the async driver, the file
    inputs read in a worker thread and the session's store I/O awaited, never blocking the loop.

    The sessions' async paths are asyncio's (locks, the breaker's race, ``to_thread``). On another
    event loop the SDKs run on through anyio (trio), the call is prepared by the sync path in one of
    anyio's worker threads instead (in a copy of this context, so the caller's session is seen):
    the same bytes, the loop never blocked, and no fallback. anyio comes with the SDKs' HTTP
    library."""
    if not asyncio_loop_running():
        from anyio import to_thread

        return await to_thread.run_sync(prepare_for_sending, sdk, client, options)
    with time_budget(current_config().time_budget):
        return await arun(_plan(sdk, client, options))


def _includes_usage(body: Mapping[str, Any]) -> bool:
    stream_options = body.get("stream_options")
    return (
        bool(body.get("stream"))
        and isinstance(stream_options, Mapping)
        and bool(stream_options.get("include_usage"))
    )
