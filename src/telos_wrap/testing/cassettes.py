"""A project's vcrpy cassettes as cache tests: their recorded requests through telos and the emulator.

``replay_cassette("cassettes/test_agent/test_refund.yaml", min_hit_ratio=0.6, max_breaks=1)`` reads
the cassette with vcrpy's own loader (YAML, or JSON for ``.json``), keeps the chat requests —
Anthropic ``POST …/v1/messages`` and OpenAI-API ``POST …/chat/completions`` bodies — and replays
them in order through the real SDKs, ``patch()`` and a fresh built-in emulator
(``telos_wrap.testing.budget.replay_requests``). Nothing is re-recorded and nothing goes to the network.

A cassette recorded **without** telos holds what the application sent: the replay shows what telos
makes of it. One recorded **with** telos holds telos' emitted bodies: telos' second pass over a
request changes nothing (``docs/reliability.md``), and the envelopes telos pruned from past turns
are read as DROP (``telos_wrap.replay.pruned``), so the replay is one conversation, without false
breaks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from telos_wrap.replay.traces import TraceRequest
from telos_wrap.testing.budget import Budget, CacheReport, replay_requests

__all__ = ["api_of_path", "load_cassette", "replay_cassette"]


def api_of_path(method: str, path: str) -> str | None:
    """``"anthropic"`` for ``POST …/messages``, ``"openai"`` for ``POST …/chat/completions``, else None."""
    if method.upper() != "POST":
        return None
    path = path.rstrip("/")
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai"
    return None


def _vcr() -> tuple[Any, Any, Any]:
    try:
        from vcr.persisters.filesystem import FilesystemPersister
        from vcr.serializers import jsonserializer, yamlserializer
    except ImportError:
        raise ImportError("reading cassettes needs vcrpy: pip install vcrpy (or telos-wrap[test])") from None
    return FilesystemPersister, yamlserializer, jsonserializer


def _body_text(body: Any) -> str | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return body if isinstance(body, str) else None


def load_cassette(path: str | Path) -> list[TraceRequest]:
    """The chat requests of a vcrpy cassette, in recorded order (session ``cassette:<file name>``).

    Raises ``FileNotFoundError`` when the file does not exist or is empty, ``ValueError`` when it is
    not a vcrpy cassette.
    """
    persister, yaml_serializer, json_serializer = _vcr()
    path = Path(path)
    serializer = json_serializer if path.suffix == ".json" else yaml_serializer
    try:
        requests, _ = persister.load_cassette(path, serializer)
    except Exception as exc:
        if type(exc).__name__ == "CassetteNotFoundError":
            raise FileNotFoundError(f"{path}: no cassette there (missing or empty file)") from None
        raise ValueError(f"{path}: not a vcrpy cassette ({type(exc).__name__}: {exc})") from exc
    out: list[TraceRequest] = []
    for request in requests:
        api = api_of_path(request.method, request.path)
        text = _body_text(request.body)
        if api is None or text is None:
            continue
        try:
            body = json.loads(text)
        except ValueError:
            continue
        if isinstance(body, dict):
            out.append(TraceRequest(f"cassette:{path.name}", len(out), api, body))
    return out


def replay_cassette(
    path: str | Path,
    *,
    min_hit_ratio: float | None = None,
    max_breaks: int | None = None,
    max_cost_ratio: float | None = None,
    engine: str | None = None,
    learn_volatility: bool = True,
) -> CacheReport:
    """Replay a cassette's chat requests through telos and the emulator; check the budget if one is given.

    Args:
        path: a vcrpy cassette (``.yaml``; ``.json`` for vcrpy's JSON serializer).
        min_hit_ratio / max_breaks / max_cost_ratio: the budget (``telos_wrap.testing.budget.Budget``);
            when any is given, ``CacheBudgetError`` (an ``AssertionError``) is raised unless it is met.
        engine: emulated engine (default: ``anthropic`` for Anthropic bodies, ``openai`` for OpenAI ones).
        learn_volatility: as ``telos_wrap.session(learn_volatility=...)``.

    Returns:
        the ``CacheReport`` (hit ratio, cost, every cache break explained).

    Raises:
        ValueError: the cassette holds no Anthropic or OpenAI chat request.
    """
    budget = Budget(min_hit_ratio, max_breaks, max_cost_ratio)
    requests = load_cassette(path)
    if not requests:
        raise ValueError(
            f"{path}: no Anthropic (POST …/messages) or OpenAI (POST …/chat/completions) request with a "
            "JSON body in this cassette; nothing to replay"
        )
    report = replay_requests(requests, engine=engine, learn_volatility=learn_volatility)
    if not budget.empty:
        report.check(budget)
    return report
