"""docs/grafana/telos_wrap.json: every metric and label its queries name is one telos really exports.

A session with a cache break runs through ``patch()`` with the OpenTelemetry Prometheus exporter, a
session's tool results go through the output filter, and one call fails open on a session store that
cannot be read (a fallback); the scrape's metric and
label names are then what the dashboard's PromQL may use.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anthropic

import telos_wrap
from telos_wrap.sessions import MemoryStore
from tests.sessions.filter_convo import MODEL, SYSTEM, TOOLS, messages_for

from .conftest import prometheus_exporter, run_session

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "telos_wrap.json"
# PromQL's functions, aggregations and keywords, and Grafana's variables: not metric names.
PROMQL_WORDS = {"sum", "by", "without", "rate", "increase", "irate", "avg", "max", "min", "count", "on"}


class UnreadableStore(MemoryStore):
    """A store whose reads fail while ``down``, as during an outage: telos sends the call as built
    (a fallback)."""

    down = True

    def load(self, session_id: str) -> Any:
        if self.down:
            raise ConnectionError("the store is down")
        return super().load(session_id)


def _queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def _names_in(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names one PromQL expression uses."""
    labels: set[str] = set()
    for selector in re.findall(r"\{([^}]*)\}", expr):
        labels.update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!=|!~|=)", selector))
    for grouping in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        labels.update(name.strip() for name in grouping.split(",") if name.strip())
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\b(?:by|without)\s*\([^)]*\)|\$\w+|\"[^\"]*\"", " ", expr)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare))
    return words - PROMQL_WORDS, labels


def _scrape(emulator: str, track: Any) -> str:
    with prometheus_exporter() as scrape_metrics:
        client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
        run_session(client, "grafana-1")
        with telos_wrap.session("grafana-3", output_filter="aggressive"):
            for request in range(3):  # tool results the output filter shortens
                client.messages.create(
                    model=MODEL, max_tokens=8, system=SYSTEM, tools=TOOLS, messages=messages_for(request)
                )
        store = UnreadableStore()
        with telos_wrap.session("grafana-2", store=store) as down:
            client.messages.create(
                model="claude-opus-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
        scrape = scrape_metrics()
        store.down = False  # back: what the session holds is written now, not at the interpreter's exit
        down.flush()
        return scrape


def test_the_grafana_dashboard_queries_what_telos_exports(emulator: str, track: Any) -> None:
    scrape = _scrape(emulator, track)
    exported: dict[str, set[str]] = {}
    for line in scrape.splitlines():
        sample = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s", line)
        if sample and not line.startswith("#"):
            names = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", sample.group(2) or ""))
            exported.setdefault(sample.group(1), set()).update(names)
    queries = _queries()
    assert len(queries) >= 7
    used = set()
    for expr in queries:
        metrics, labels = _names_in(expr)
        assert metrics, expr
        for metric in metrics:
            assert metric in exported, f"{metric} (in {expr!r}) is not exported; exported: {sorted(exported)}"
            used.add(metric)
        on_them = set().union(*(exported[m] for m in metrics))
        assert labels <= on_them, (
            f"labels {sorted(labels - on_them)} of {expr!r} are not on {sorted(metrics)}"
        )
    # Every telos metric the exporter shows is on the dashboard.
    telos_metrics = {m for m in exported if m.startswith("telos_") and not m.endswith("_created")}
    assert telos_metrics <= used, sorted(telos_metrics - used)
