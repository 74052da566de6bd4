"""``replay_cassette`` on a cassette recorded *with* telos: one conversation, no false breaks.

The support agent of ``tests/plugin/project/agent.py`` (an untagged live clock in its system
prompt) runs through ``patch()`` against the emulator served on 127.0.0.1 while vcrpy records the
real HTTP exchanges, so the cassette holds telos' output: the clock it learned moved to the end of
each turn and pruned from past turns. Replayed, that is still one conversation without cache
breaks (it used to read as a rewritten history at every request, and its first request as a
conversation of its own); the same agent recorded without telos still shows its clock's breaks.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, serve
from telos_wrap.testing.cassettes import load_cassette, replay_cassette

vcr = pytest.importorskip("vcr")
HERE = Path(__file__).resolve().parent


@pytest.fixture
def agent() -> Iterator[object]:
    sys.path.insert(0, str(HERE / "project"))
    try:
        import agent as module

        yield module
    finally:
        sys.path.remove(str(HERE / "project"))


def _record(path: Path, agent: object, *, with_telos: bool) -> None:
    recorder = vcr.VCR(record_mode="all", match_on=["method", "path"], filter_headers=["x-api-key"])
    with serve(Emulator()) as url:
        if with_telos:
            telos_wrap.patch()
        try:
            client = anthropic.Anthropic(api_key="recording", base_url=url, max_retries=0)
            with client, recorder.use_cassette(str(path)):
                agent.run_anthropic(client, clock="untagged")  # type: ignore[attr-defined]
        finally:
            telos_wrap.unpatch()


def test_a_cassette_recorded_with_telos_replays_as_one_conversation(tmp_path: Path, agent: object) -> None:
    path = tmp_path / "with_telos.yaml"
    _record(path, agent, with_telos=True)
    requests = load_cassette(path)
    assert len(requests) >= 3 and "cache_control" in str(requests[1].kwargs), "telos' output was recorded"

    report = replay_cassette(path, max_breaks=0)

    assert report.conversations == 1
    assert report.break_count == 0 and report.breaks == []
    assert report.hit_ratio > 0.5


def test_without_telos_the_clock_still_breaks_when_learning_is_off(tmp_path: Path, agent: object) -> None:
    path = tmp_path / "without_telos.yaml"
    _record(path, agent, with_telos=False)

    report = replay_cassette(path, learn_volatility=False)

    assert report.conversations == 1
    assert report.break_count >= 2, "the replay still sees the application's own clock"
