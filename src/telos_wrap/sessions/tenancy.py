"""Tenants apart on a shared store: the key a named session's state lives under (issue 44).

Two customers of one application may name their conversations alike (a ticket id, ``support-1``).
On one store and prefix, the id alone would make them one session: the second tenant would read the
first one's stats, learned spans and folds. So by default a named session's state is kept under a
key *within its tenant's namespace*, the namespace fleet learning already uses (``fleet.namespace``:
a digest of the call's ``isolation`` hint and the client's credentials and base URL, hashed twice,
never in clear):

* ``store_key(id, space)``: ``<id>@t:<namespace>`` (32 hex characters); the id itself where there is
  no tenant signal (namespace ``"shared"``: a bare ``Session`` used without a client), or where the
  application declared the id global (``session(..., scope="global")``: every tenant naming it shares
  it).
* **One layout.** A session's state lives at that one key and nowhere else: a tenant's session never
  reads the id's own key (a global session's, or one kept without a tenant signal), nor another
  tenant's; ``Session.erase()`` removes the one key. There is no second layout to read or migrate
  from (CONTRIBUTING.md: no compatibility layer before the first release).
* **Binding.** The tenant is only known from a call. A session binds to the tenant of its first call
  (``SessionRuntime.bind_tenant``, or ``Session.bind(client)`` before any call) and keeps it: one object is
  one conversation (docs/security.md, S1). Before it binds, it holds its state in this process only
  (``SessionRuntime._local``): reads see that local state and nothing stored (it could be another
  tenant's); ``pin()``, ``fold(slugs=...)`` and ``forget_volatility()`` are applied to it, and carried
  onto the tenant's stored state at the binding (``carried``).

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from telos_wrap.errors import RefPoolError
from telos_wrap.sessions.durable.records import SlugFold
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.learning.fleet import namespace
from telos_wrap.sessions.turns.steps import unknown_slugs

__all__ = [
    "GLOBAL",
    "SCOPES",
    "SHARED",
    "TENANT",
    "carried",
    "check_scope",
    "space_of",
    "store_key",
]

#: A named session's state is kept within its tenant's namespace (the default).
TENANT = "tenant"
#: The application says the id is global: every tenant naming it shares one state.
GLOBAL = "global"
SCOPES = (TENANT, GLOBAL)
#: The namespace of a call without any tenant signal (``fleet.namespace``): the id's own key.
SHARED = "shared"
#: Between the id and the namespace in a tenant's key.
_SEPARATOR = "@t:"


def check_scope(scope: object) -> str:
    """``scope`` if it is one of ``SCOPES``, else ``ValueError`` saying what is valid."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    return str(scope)


@lru_cache(maxsize=1024)
def space_of(isolation: str | None, tenant: str | None) -> str:
    """The tenant namespace of a call (``fleet.namespace``: ``tenant`` is ``identity.tenant_digest``
    of its isolation hint and client credentials and base URL). Memoized (bounded): a call that names
    its session by id asks for it on every call (``patch/turns.py``, ``resolve_session``)."""
    return namespace(isolation, tenant)


def store_key(session_id: str, space: str | None) -> str:
    """The id session ``session_id`` of namespace ``space`` is stored under (see module docstring)."""
    if not space or space == SHARED:
        return session_id
    return f"{session_id}{_SEPARATOR}{space}"


def carried(local: SessionState) -> Any:
    """The step that puts what a session recorded before its binding (``local``: its pins and slug
    folds) onto its tenant's stored state. A slug the stored state pins already is kept if it names
    the same document, else ``RefPoolError`` (slugs are frozen); a slug fold is recorded again at the
    stored state's request count, once its slugs are checked against that state (``RefPoolError``
    for a slug neither pinned nor a ``<file path=…>`` block of its last request)."""

    def step(state: SessionState) -> tuple[SessionState | None, None]:
        pins = dict(state.pins)
        for slug, key in local.pins.items():
            if slug in pins and pins[slug] != key:
                raise RefPoolError(
                    f"ref-pool slug {slug!r} was pinned before the session's first call, but its "
                    "tenant's stored state pins another document under it; slugs are frozen"
                )
            pins[slug] = key
        if local.slug_folds:
            unknown_slugs(replace(state, pins=pins), [f.slug for f in local.slug_folds])
        folds = [f for f in state.slug_folds if f.slug not in {g.slug for g in local.slug_folds}]
        folds += [SlugFold(f.slug, f.summary, state.requests) for f in local.slug_folds]
        if pins == state.pins and not local.slug_folds:
            return None, None
        return replace(state, pins=pins, slug_folds=tuple(folds)), None

    return step
