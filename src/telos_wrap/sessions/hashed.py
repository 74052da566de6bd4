"""A session id as logs and spans may show it: hashed, never raw (a session id may be a user's or a
ticket's id). One function for both, so a log line and a span of one session can be matched: the
``telos.session`` span attribute (``telemetry.facts``) and every telos log line that names a session
(``sessions/logs.py``). Pure (hashlib only): the sans-IO store plans use it too."""

from __future__ import annotations

import hashlib

__all__ = ["scrub", "session_hash"]


def session_hash(session_id: str) -> str:
    """The session as a span or a log line may show it: 16 hex digits of its SHA-256, never the id."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:16]


def scrub(text: str, session_id: str) -> str:
    """``text`` with every occurrence of ``session_id`` (and its ``repr``) replaced by its hash."""
    if not session_id:
        return text
    hashed = session_hash(session_id)
    return text.replace(repr(session_id), hashed).replace(session_id, hashed)
