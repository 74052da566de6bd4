"""The dashboard page: one self-contained HTML file (plotly.js inlined), made with Jinja2 and plotly.

Needs ``pip install 'telos-wrap[dashboard]'``. The page loads nothing from the network: the plots'
library is in the file, so it opens offline and can be attached to a ticket as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telos_wrap import __version__
from telos_wrap.dashboard.model import ConversationView, Dashboard

#: Conversations drawn one by one (the busiest); the table lists every conversation.
DETAILED = 50

_READ, _WRITE, _UNCACHED, _NATIVE, _TELOS = "#2a9d8f", "#e9c46a", "#8d99ae", "#e76f51", "#264653"


class DashboardUnavailable(RuntimeError):
    """The page's libraries (plotly, Jinja2) are not installed."""


def _libraries() -> tuple[Any, Any, Any]:
    try:
        import jinja2
        import plotly.graph_objects as go
        import plotly.offline
    except ImportError as exc:
        raise DashboardUnavailable(
            f"the dashboard needs plotly and Jinja2 ({exc.name} is missing): "
            "pip install 'telos-wrap[dashboard]'"
        ) from None
    return jinja2, go, plotly.offline


def pct(value: float | None) -> str:
    """A ratio as the page shows it: one decimal of a percent."""
    return "—" if value is None else f"{100 * value:.1f}%"


def num(value: int) -> str:
    """A count as the page shows it: thousands separated by commas."""
    return f"{value:,}"


def _short(name: str, width: int = 28) -> str:
    """A conversation name short enough for a plot's axis (the table shows it whole)."""
    return name if len(name) <= width else name[: width - 1] + "…"


def _div(figure: Any) -> str:
    html: str = figure.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})
    return html


def _layout(go: Any, title: str, *, height: int = 340, **extra: Any) -> Any:
    return go.Layout(
        title={"text": title, "font": {"size": 14}},
        height=height,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        legend={"orientation": "h", "y": -0.2},
        **extra,
    )


def _application_figure(go: Any, board: Dashboard) -> str:
    names = [_short(c.name) for c in board.conversations]
    bars = [
        go.Bar(
            name="through telos_wrap",
            x=names,
            y=[c.relative_cost for c in board.conversations],
            marker_color=_TELOS,
        )
    ]
    if board.source == "recording":
        bars.insert(
            0,
            go.Bar(
                name=board.native_label,
                x=names,
                y=[c.native_relative_cost for c in board.conversations],
                marker_color=_NATIVE,
            ),
        )
    layout = _layout(
        go,
        "Input cost per conversation, relative to sending it uncached",
        barmode="group",
        yaxis={"tickformat": ".0%", "rangemode": "tozero"},
    )
    return _div(go.Figure(data=bars, layout=layout))


def _reasons_figure(go: Any, board: Dashboard) -> str:
    reasons = board.break_reasons
    if not reasons:
        return ""
    bar = go.Bar(y=list(reasons), x=list(reasons.values()), orientation="h", marker_color=_NATIVE)
    layout = _layout(go, "Cache breaks by reason", height=120 + 30 * len(reasons), xaxis={"dtick": 1})
    return _div(go.Figure(data=[bar], layout=layout))


def _conversation_figure(go: Any, conversation: ConversationView) -> str:
    points = conversation.requests
    if not points:
        return ""
    x = [p.index for p in points]
    data = [
        go.Bar(name="cache read", x=x, y=[p.read for p in points], marker_color=_READ),
        go.Bar(name="cache write", x=x, y=[p.write for p in points], marker_color=_WRITE),
        go.Bar(name="uncached", x=x, y=[p.uncached for p in points], marker_color=_UNCACHED),
    ]
    breaks = [b.request for b in conversation.breaks]
    if breaks:
        tops = {p.index: p.input for p in points}
        data.append(
            go.Scatter(
                name="cache break",
                mode="markers",
                x=breaks,
                y=[tops.get(i, 0) for i in breaks],
                marker={"symbol": "x", "size": 11, "color": _NATIVE},
            )
        )
    layout = _layout(
        go, "Input tokens per request", barmode="stack", xaxis={"title": "request"}, yaxis={"title": "tokens"}
    )
    return _div(go.Figure(data=data, layout=layout))


def render(board: Dashboard, *, show_text: bool = False, detailed: int = DETAILED) -> str:
    """The page for ``board`` as one HTML document."""
    jinja2, go, offline = _libraries()
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("telos_wrap.dashboard", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    shown: Sequence[ConversationView] = board.conversations[:detailed]
    figures = {
        "application": _application_figure(go, board),
        "reasons": _reasons_figure(go, board),
        "conversations": [_conversation_figure(go, c) for c in shown],
    }
    if board.source == "recording":
        source_note = "Replayed through the real SDKs and the built-in emulator"
        privacy = (
            "Break sentences quote the recording (--show-text)."
            if show_text
            else "No text of the recording is shown: positions and reasons only "
            "(--show-text shows the sentences)."
        )
    else:
        source_note = "Read from a session store (counters, positions and digests; no conversation text)"
        privacy = "Session ids are shown as digests; the store holds no conversation text."
    template = environment.get_template("page.html.j2")
    return str(
        template.render(
            board=board,
            figures=figures,
            detailed=min(detailed, len(board.conversations)),
            show_text=show_text and board.source == "recording",
            pct=pct,
            num=num,
            plotly_js=offline.get_plotlyjs(),
            source_note=source_note,
            privacy_note=privacy,
            version=__version__,
        )
    )
