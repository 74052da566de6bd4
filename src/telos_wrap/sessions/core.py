"""``Session``: the user's handle on one conversation (docs/sessions.md), over its runtime.

``with telos_wrap.session("chat-42"):`` (or ``async with``) makes every patched call inside it —
including calls made in asyncio tasks started inside it — part of session ``chat-42``. Sessions
nest: the innermost active one wins and the outer one is back when it exits. ``registry`` creates
and finds sessions (``session()``, the implicit and named ones).

A ``Session``'s public names are exactly what docs/sessions.md documents ("The Session object";
``tests/sessions/test_session_surface.py`` holds the list): its name and binding, the primitives
(``pin``, ``fold``, ``mark``, ``refresh``, ``forget_volatility``, ``erase``, ``flush``) and the
read-only views (``state``, ``stats``, ``cache_breaks``, ``volatile_spans``, ``explain``). What a
call does with the session — prepare its request, record a pass-through, add its usage — is its
runtime's (``runtime.SessionRuntime``), which the patch layer reaches with ``runtime_of(session)``
and nothing else: one documented seam, greppable, that adds no public name to ``Session``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import TracebackType
from typing import Any

from telos_wrap.engines.base import EmitPlan
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api
from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions import identity, live, tenancy
from telos_wrap.sessions.durable.records import CacheBreak, VolatileSpan
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.refresh import RefreshDecision, decide_refresh
from telos_wrap.sessions.runtime import CacheBreakCallback, SessionRuntime
from telos_wrap.sessions.stores.store import SessionStore
from telos_wrap.sessions.turns.folds import FoldError, validate_slug
from telos_wrap.sessions.turns.steps import fold_step, forget_volatility
from telos_wrap.sessions.views.explain import explain
from telos_wrap.sessions.views.stats import PriceMultipliers, SessionStats

__all__ = ["Session", "runtime_of"]


class Session:
    """One conversation. Create it with ``telos_wrap.session(...)`` (see that function for the
    options). Thread-safe. Attributes (read-only): ``id``, ``scope``, ``store``, ``store_key``,
    ``bound``, ``hints``, ``strict``, ``implicit``.
    """

    __slots__ = ("__weakref__", "_runtime")

    def __init__(
        self,
        session_id: str | None = None,
        *,
        store: SessionStore | str | None = None,
        hints: TelosHints | None = None,
        strict: bool | None = None,
        implicit: bool = False,
        on_cache_break: CacheBreakCallback | None = None,
        learn_volatility: bool = True,
        diagnostics: bool = False,
        prices: Mapping[str, PriceMultipliers] | None = None,
        clock: Callable[[], float] | None = None,
        history_limit: int = 64,
        fleet_learning: bool | None = None,
        keep_requests: bool = True,
        scope: str = tenancy.TENANT,
    ) -> None:
        self._runtime = SessionRuntime(
            session_id,
            store=store,
            hints=hints,
            strict=strict,
            implicit=implicit,
            on_cache_break=on_cache_break,
            learn_volatility=learn_volatility,
            diagnostics=diagnostics,
            prices=prices,
            clock=clock,
            history_limit=history_limit,
            fleet_learning=fleet_learning,
            keep_requests=keep_requests,
            scope=scope,
        )
        live.register(self, store, self._runtime.id)

    def __repr__(self) -> str:
        return f"<telos_wrap.Session {self._runtime.id!r}>"

    # -- its name, its store, its tenant ---------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id (given, or ``s-…`` generated)."""
        return self._runtime.id

    @property
    def scope(self) -> str:
        """``"tenant"``: kept within the namespace of its first call's tenant; ``"global"``: under the id."""
        return self._runtime.scope

    @property
    def store(self) -> SessionStore:
        """The session's store: the one given, else the process default at the time of use."""
        return self._runtime.store

    @property
    def store_key(self) -> str:
        """The key its state is stored under: ``<id>@t:<namespace>`` once bound to a tenant
        (``scope="tenant"``), else the id itself (docs/sessions.md, "Tenants")."""
        return self._runtime.store_key

    @property
    def bound(self) -> bool:
        """Whether the session knows where its state lives (a tenant-scoped one: after its first
        call or ``bind``; a global or implicit one: always)."""
        return self._runtime.bound

    @property
    def hints(self) -> TelosHints:
        """The session's default ``TelosHints`` (a call's ``telos_hint`` is merged over them)."""
        return self._runtime.hints

    @property
    def strict(self) -> bool | None:
        """``True``: the session's calls raise instead of failing open (``None``: ``patch(strict=...)``)."""
        return self._runtime.strict

    @property
    def implicit(self) -> bool:
        """Whether telos made the session for a call outside any ``session()`` (``implicit-<key>``)."""
        return self._runtime.implicit

    def bind(self, client: Any = None, *, isolation: str | None = None) -> Session:
        """Bind the session, before any call, to the tenant of ``client`` (an SDK client: its
        credentials and base URL) and ``isolation`` as a call would; returns the session. For
        reading a tenant's stats, folding or erasing a conversation from a process that makes no
        call in it."""
        tenant = identity.client_tenant(client, isolation) if client is not None else None
        self._runtime.bind_tenant(tenancy.space_of(isolation, tenant))
        return self

    # -- context manager --------------------------------------------------------------------------

    def __enter__(self) -> Session:
        live.push(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not live.pop(self):
            raise RuntimeError(f"{self!r} exited out of order: sessions must exit in reverse order of entry")

    async def __aenter__(self) -> Session:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- bridge primitives --------------------------------------------------------------------------

    def pin(self, slug: str, payload: str | Mapping[str, Any]) -> None:
        """Register a large document in the session's ref-pool under a frozen ``slug``.

        ``payload`` is the text (or a ``{"type": "text", "text": ...}`` block). From the next request
        on it is rendered in the system segment's ref-pool (after the PIN blocks, slug order), where
        ``fold(slugs=[slug], ...)`` can later shrink it without moving a byte before it. Raises
        ``RefPoolError`` if the slug is already registered (slugs are frozen) and ``FoldError`` for
        an invalid or reserved slug.
        """
        text = payload.get("text") if isinstance(payload, Mapping) else payload
        if not isinstance(text, str) or not text:
            raise FoldError("pin() needs a non-empty text or a text block")
        validate_slug(slug)
        self._runtime.pin(slug, text)

    def fold(
        self,
        *,
        summary: str,
        slugs: Iterable[str] | None = None,
        message_range: tuple[int, int] | None = None,
    ) -> None:
        """A durable compaction, recorded in the session before the next request uses it.

        * ``fold(slugs=[...], summary=...)``: each ref-pool entry's content becomes ``summary``; its
          slug and ``[ref:slug]`` bytes stay, so everything before the entry's content stays cached.
        * ``fold(message_range=(start, end), summary=...)``: application messages ``start..end-1``
          (indices in the list the application sends) are replaced by one summary message on every
          later request, for as long as the application keeps sending them unchanged.

        The invariants are re-checked right away on the last request with the fold applied (when
        this process has one) and again by the bridge on every request; there is no flag to skip
        them. Raises ``FoldError`` / ``RefPoolError`` (nothing recorded) if the fold is invalid.
        """
        if not summary:
            raise FoldError("fold() needs a non-empty summary")
        if (slugs is None) == (message_range is None):
            raise FoldError("fold() takes exactly one of slugs=... or message_range=(start, end)")
        slug_list = [slugs] if isinstance(slugs, str) else list(slugs or ())
        runtime = self._runtime
        with runtime.lock:
            runtime.update(
                fold_step(summary, slug_list, message_range, runtime.recheck, deferred=not runtime.bound)
            )

    def mark(
        self,
        body: Mapping[str, Any] | None = None,
        *,
        api: Api | None = None,
        options: PrepareOptions | None = None,
    ) -> EmitPlan:
        """Dry run: the ``EmitPlan`` (breakpoints, extras, notes) the next request would get.

        Uses ``body`` if given, else the last request this process prepared for the session (with
        folds and pins recorded since). Records nothing.
        """
        return self._runtime.dry_run(body, api, options)

    def refresh(self, *, margin: float = 60.0) -> RefreshDecision:
        """Should the session's warm prefix be kept alive now? (R8 gating; no I/O.)

        Returns a ``RefreshDecision``; when ``send`` is true its ``body`` is the Anthropic pre-warm
        (the last request, ``max_tokens: 0``). ``telos_wrap.sessions.send_refresh`` sends it.
        """
        runtime = self._runtime
        with runtime.lock:
            return decide_refresh(runtime.read(), runtime.last_body(), runtime.clock(), margin=margin)

    def forget_volatility(self) -> None:
        """Drop every learned volatile span (they are learned again if they keep changing)."""
        self._runtime.update(forget_volatility)

    def erase(self) -> None:
        """Remove everything this session left: what it taught the fleet (every fact it contributed
        to, the prompt shape it stored), its state and blobs in the store, and what this process
        holds of it (records, history memo, pending usage). The session id may be used again: it
        starts afresh. Raises what the store raises (docs/security.md, "Erasure").

        The session's one entry: the one at ``store_key`` (its tenant's once bound; another tenant's
        session of the same id, and a global one, are other sessions and stay). A session not bound
        yet (no call, no ``bind``) uses the id's own key, as any use without a call does:
        ``bind(client)`` first to erase a tenant's conversation from a process that makes no call."""
        self._runtime.erase()

    async def aerase(self) -> None:
        """``erase`` for async code."""
        await self._runtime.aerase()

    def flush(self) -> None:
        """Write what this process holds and the store does not yet (pending usage, outage state).

        Usage is folded into the session's next write (see ``docs/sessions.md``); ``flush`` writes
        it now. No store round trip when there is nothing to write. Never raises (fail open).
        """
        self._runtime.flush()

    async def aflush(self) -> None:
        """``flush`` for async code (the store's async client; nothing blocks the event loop)."""
        await self._runtime.aflush()

    # -- observability --------------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """A snapshot of the session's durable state (as stored; JSON-serializable via ``to_json``)."""
        return self._runtime.read()

    @property
    def stats(self) -> SessionStats:
        """Exact counters of the session across every worker (read from the store).

        While the store cannot be read (its circuit breaker's back-off window), the state this process
        last knew of the session, from any ``Session`` object with its id (``sync/known.py``); if it
        knows nothing, the stats say so: ``known`` is ``False`` (never zeros taken for the session's).
        """
        state, known = self._runtime.read_known()
        stats = SessionStats.of(state, self._runtime.prices)
        return stats if known else replace(stats, known=False)

    @property
    def cache_breaks(self) -> tuple[CacheBreak, ...]:
        """The most recent cache breaks (all are counted in ``stats.cache_breaks``)."""
        return self.state.recent_breaks

    @property
    def volatile_spans(self) -> tuple[VolatileSpan, ...]:
        """The system-prompt spans learned as volatile."""
        return self.state.volatile

    def explain(self, n: int = -1) -> str:
        """What was sent for request ``n`` of this session (default: the latest here) and why.

        Lists the breakpoints and notes of the plan, every transformation that changed what the
        model sees (DROP moved or pruned, ref stubs, pins, folds, summaries, learned volatile
        spans), the cache break it caused, and its usage. Requests made by other workers are only
        known by their index and cache break.
        """
        runtime = self._runtime
        state = runtime.read()
        with runtime.lock:
            known = runtime.request_indices()
            # A negative index counts from the latest request prepared here, else (none here: a
            # fresh process) from the session's latest request, whichever worker made it.
            index = n if n >= 0 else (known[-1] + 1 + n if known else state.requests + n)
            record = runtime.request_record(index)
        return explain(runtime.id, n, record, index, state.recent_breaks, total=state.requests, known=known)


def runtime_of(session: Session) -> SessionRuntime:
    """The runtime of ``session``: what the patch layer (and the registry, the telemetry) call to
    prepare a request of the session, record a pass-through or a response's usage, bind it to a
    call's tenant. The one way in; not a user API (docs/sessions.md documents ``Session``)."""
    return session._runtime
