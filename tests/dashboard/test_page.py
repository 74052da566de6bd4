"""The dashboard of a recording: its figures are replay's, the page is one offline file, text on request."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from telos_wrap.dashboard.model import BreakView, ConversationView, Dashboard, RequestPoint
from telos_wrap.dashboard.page import render
from telos_wrap.replay.comparison import Comparison


def test_figures_are_replays(demo_board: Dashboard, demo_replay: Comparison) -> None:
    """Totals per strategy equal what ``telos-wrap replay`` measures on the same requests."""
    runs = demo_replay.variants["recorded"]
    telos, native = runs["telos_wrap"], runs["auto-caching"]
    assert demo_board.requests == len(telos.turns)
    assert (demo_board.input, demo_board.read, demo_board.write) == (telos.input, telos.read, telos.write)
    assert demo_board.cost == pytest.approx(telos.cost)
    assert demo_board.native_cost == pytest.approx(native.cost)
    assert demo_board.read > 0 and demo_board.cost < demo_board.input


def test_conversation_views_add_up(demo_board: Dashboard) -> None:
    (conversation,) = demo_board.conversations
    points = conversation.requests
    assert [p.index for p in points] == list(range(len(points)))
    assert sum(p.read for p in points) == conversation.read
    assert all(p.uncached >= 0 for p in points)
    assert conversation.break_count == len(conversation.breaks) >= 1
    assert {b.reason for b in conversation.breaks} <= set(demo_board.break_reasons)


def test_page_is_one_offline_file(demo_board: Dashboard) -> None:
    page = render(demo_board)
    assert page.startswith("<!doctype html>")
    # Nothing is loaded from elsewhere: no script, style sheet, image or frame with a source URL.
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=[\"']?(https?:)?//", page, re.I)
    assert "Plotly.newPlot" in page  # the figures are drawn by the inlined plotly.js
    assert page.count('class="conversation"') == len(demo_board.conversations)


def test_break_sentences_only_on_request(demo_board: Dashboard) -> None:
    """A break's sentence may quote the recording: shown with show_text only."""
    details = [b.detail for c in demo_board.conversations for b in c.breaks if b.detail]
    assert details
    quiet = render(demo_board)
    assert not any(detail in quiet for detail in details)
    assert all(detail.replace("'", "&#39;") in render(demo_board, show_text=True) for detail in details)


def test_many_conversations_list_all_and_draw_the_busiest() -> None:
    conversations = tuple(
        ConversationView(f"c{i}", 2, 100 * (i + 1), 50 * i, 10, 60.0 * (i + 1), None, requests=())
        for i in range(7)
    )
    board = Dashboard("store", "store", "anthropic", conversations)
    page = render(board, detailed=3)
    assert page.count("data-conversation=") == 7
    assert page.count('class="conversation"') == 3
    assert "Details below for the 3 conversations" in page


def test_a_store_board_never_shows_sentences() -> None:
    brk = BreakView(3, "system_changed", "system[0]", 1200, detail="quoted caller text")
    conversation = ConversationView("abc", 4, 1000, 600, 100, 400.0, None, breaks=(brk,), break_count=1)
    board = Dashboard("store", "store", "anthropic", (conversation,))
    page = render(board, show_text=True)
    assert "quoted caller text" not in page and "system[0]" in page


def test_points_without_usage_count_as_uncached() -> None:
    point = RequestPoint(0, 0, 0, 0, 0.0, error="400: prompt is too long")
    conversation = ConversationView("x", 1, 0, 0, 0, 0.0, 0.0, requests=(point,))
    assert conversation.hit_ratio == 0.0 and conversation.relative_cost == 1.0
    assert replace(conversation, input=10, cost=5.0).relative_cost == 0.5
