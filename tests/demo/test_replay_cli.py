"""``telos-wrap replay``: recordings round-trip, trace files replay, bad arguments get clear errors."""

from __future__ import annotations

import contextlib
import io
import json
import lzma
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.cli import main
from telos_wrap.replay import comparison as replay_compare
from telos_wrap.replay.responses import responses_sessions
from telos_wrap.replay.runner import TELOS, patched, replay
from telos_wrap.replay.traces import TraceRequest


def run_json(*argv: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI expecting an error exit; return what it said."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    captured = capsys.readouterr()
    code = exited.value.code
    return (code if isinstance(code, str) else "") + captured.err


def write_trace(path: Path, requests: list[TraceRequest]) -> None:
    lines = [
        json.dumps({"session": r.session, "turn": r.turn, "api": r.api, "kwargs": r.kwargs}) + "\n"
        for r in requests
    ]
    with lzma.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(lines)


def test_a_recording_replays_to_the_same_usage(tmp_path: Path, demo_requests: list[TraceRequest]) -> None:
    """Record a telos run, replay the recording: the emulator reports the same usage turn by turn."""
    path = tmp_path / "recording.jsonl"
    with patched(), telos_wrap.record(path):
        replay([demo_requests[:8]], TELOS)
    recorded = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(recorded) == 8
    data = run_json("replay", str(path), "--json")
    turns = data["variants"]["recorded"]["telos_wrap"]["turns"]
    assert [(t["cache_read"], t["cache_write"]) for t in turns] == [
        (r["usage"]["cache_read"], r["usage"]["cache_write"]) for r in recorded
    ]
    assert data["variants"]["recorded"]["as sent"]["cache_read"] == 0
    assert data["sessions"] == 1 and data["requests"] == 8


def test_replay_a_trace_file_with_jitter_and_limit(
    tmp_path: Path, demo_requests: list[TraceRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "trace.jsonl.xz"
    write_trace(path, demo_requests)
    data = run_json("replay", str(path), "--jitter", "--limit", "10", "--json")
    assert data["requests"] == 10
    jittered = data["variants"]["jittered"]
    assert jittered["auto-caching"]["cache_read"] == 0
    assert jittered["telos_wrap"]["hit_ratio"] > 0.8
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["replay", str(path), "--limit", "5"])
    assert "Totals over 5 requests" in out.getvalue()


def test_replay_openai_requests_through_the_openai_sdk(tmp_path: Path) -> None:
    system = "You are a meticulous support agent. " * 200
    history: list[dict[str, Any]] = [{"role": "system", "content": system}]
    requests = []
    for turn in range(4):
        history = [*history, {"role": "user", "content": f"question {turn}"}]
        requests.append(TraceRequest("chat", turn, "openai", {"model": "gpt-4o", "messages": list(history)}))
        history = [*history, {"role": "assistant", "content": f"answer {turn}"}]
    path = tmp_path / "chat.jsonl.xz"
    write_trace(path, requests)
    data = run_json("replay", str(path), "--engine", "openai", "--json")
    runs = data["variants"]["recorded"]
    assert set(runs) == {"as sent", "telos_wrap"}  # automatic caching is what "as sent" gets on OpenAI
    assert runs["as sent"]["cache_read"] > 0 and runs["telos_wrap"]["cache_read"] > 0
    assert data["engine"] == "openai"


def test_bad_arguments_get_clear_messages(
    tmp_path: Path, demo_requests: list[TraceRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.jsonl.xz"
    write_trace(trace, demo_requests[:2])
    assert "no such file" in fails(capsys, "replay", str(tmp_path / "missing.jsonl"))
    assert "invalid choice: 'bogus'" in fails(capsys, "replay", str(trace), "--engine", "bogus")
    assert "positive integer" in fails(capsys, "replay", str(trace), "--limit", "0")
    assert "positive integer" in fails(capsys, "replay", str(trace), "--limit", "many")
    said = fails(capsys, "replay", str(trace), "--engine", "openai")
    assert "no openai-API / responses-API requests" in said and "--engine anthropic" in said
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("this is not json\n", encoding="utf-8")
    assert "cannot read" in fails(capsys, "replay", str(garbage))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert "has no requests" in fails(capsys, "replay", str(empty))
    assert ".png" in fails(capsys, "demo", "--plot", str(tmp_path / "plot.txt"))
    assert "the following arguments are required" in fails(capsys)
    assert "invalid choice" in fails(capsys, "dmeo")


def test_plot_without_matplotlib_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    said = fails(capsys, "demo", "--plot", str(tmp_path / "x.png"))
    assert "pip install 'telos-wrap[plot]'" in said


def test_an_engine_telos_does_not_have_yet(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    demo_requests: list[TraceRequest],
    capsys: pytest.CaptureFixture[str],
) -> None:
    trace = tmp_path / "trace.jsonl.xz"
    write_trace(trace, demo_requests[:2])

    def missing(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named 'telos_wrap.engines.{name}'")

    monkeypatch.setattr(replay_compare, "get_engine", missing)
    said = fails(capsys, "replay", str(trace), "--engine", "sglang")
    assert "not available in this version" in said and "--engine anthropic" in said


def test_replay_needs_patch(demo_requests: list[TraceRequest]) -> None:
    assert not telos_wrap.is_patched()
    with pytest.raises(RuntimeError, match=r"telos_wrap\.patch\(\)"):
        replay([demo_requests[:1]], TELOS)


@pytest.mark.usefixtures("patched")
def test_patched_restores_the_callers_configuration() -> None:
    from telos_wrap.config import current_config

    assert current_config().strict
    with patched():
        assert current_config().engines  # the emulated self-hosted URLs are routed
    assert current_config().strict and telos_wrap.is_patched()


def _chat_requests(turns: int = 4) -> list[TraceRequest]:
    system = "You are a meticulous support agent. " * 200
    history: list[dict[str, Any]] = [{"role": "system", "content": system}]
    requests = []
    for turn in range(turns):
        history = [*history, {"role": "user", "content": f"question {turn}"}]
        requests.append(TraceRequest("chat", turn, "openai", {"model": "gpt-4o", "messages": list(history)}))
        history = [*history, {"role": "assistant", "content": f"answer {turn}"}]
    return requests


def _responses_recording(path: Path) -> list[dict[str, Any]]:
    """A real recording of a Responses agent (telos_wrap.record around responses.create calls)."""
    with patched(), telos_wrap.record(path):
        replay(responses_sessions([_chat_requests()]), TELOS, engine="openai")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["api"] for line in lines] == ["responses"] * 4
    return lines


@pytest.mark.parametrize("engine", ["openai", "vllm", "sglang"])
@pytest.mark.parametrize("api", ["native", "responses"])
def test_a_responses_recording_replays_on_every_engine_that_serves_responses(
    tmp_path: Path, engine: str, api: str
) -> None:
    """Before: `--api responses` dropped the recording's Responses requests: 'Totals over 0 requests'."""
    path = tmp_path / "responses.jsonl"
    _responses_recording(path)
    data = run_json("replay", str(path), "--engine", engine, "--api", api, "--json")
    assert data["requests"] == 4 and data["engine"] == engine
    runs = data["variants"]["recorded"]
    assert all(not turn.get("error") for run in runs.values() for turn in run["turns"])
    assert runs["telos_wrap"]["input_tokens"] > 4 * 1500 and runs["telos_wrap"]["cache_read"] > 0


@pytest.mark.parametrize("engine", ["anthropic", "deepseek", "openrouter"])
def test_a_responses_recording_on_an_engine_without_responses_says_why(
    tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "responses.jsonl"
    _responses_recording(path)
    said = fails(capsys, "replay", str(path), "--engine", engine)
    assert "responses" in said and "--engine openai|vllm|sglang" in said


def test_responses_on_a_file_with_nothing_to_convert_exits_non_zero(
    tmp_path: Path, demo_requests: list[TraceRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "claude.jsonl.xz"
    write_trace(trace, demo_requests[:3])
    said = fails(capsys, "replay", str(trace), "--engine", "openai", "--api", "responses")
    assert "anthropic" in said


def test_per_turn_rows_name_their_session(tmp_path: Path) -> None:
    requests = [
        TraceRequest(name, r.turn, r.api, r.kwargs) for name in ("alpha", "beta") for r in _chat_requests(3)
    ]
    path = tmp_path / "two.jsonl.xz"
    write_trace(path, requests)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["replay", str(path), "--engine", "openai", "--per-turn"]) == 0
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.split()[:2] == ["session", "turn"])
    rows = lines[lines.index(header) + 1 : lines.index(header) + 7]
    assert [row.split()[:2] for row in rows] == [
        [name, str(turn)] for name in ("alpha", "beta") for turn in range(3)
    ]
