"""One plan for a call's route and preparation, two drivers (``patch/steps.py``).

The plan (``turns._plan``) is the same for sync and async clients; only the driver that answers its
steps differs: ``run`` reads file inputs inline and does the session's sync I/O, ``arun`` reads them in
a worker thread and awaits the session's async I/O. Driven through both, a plan asks for the same
steps and gives the same request to send, for a body with file inputs and one without; and a failing
step means the same in both (the file cannot be read: sent as built, the SDK reports its error).
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import logging
import pathlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.patch import steps, turns
from telos_wrap.sessions import MemoryStore

SYSTEM = "You answer questions about the shop's orders.\n" * 200


def _has_file_inputs() -> bool:
    prepare = importlib.import_module("anthropic._utils")
    return hasattr(getattr(prepare, "_prepare", None), "async_prepare_request_data")


def _options(body: dict[str, Any]) -> Any:
    """The request options the anthropic SDK gives its request layer for ``messages.create``."""
    return anthropic._models.FinalRequestOptions.construct(method="post", url="/v1/messages", json_data=body)


def _body(image: pathlib.Path | None) -> dict[str, Any]:
    """A conversation whose first message is plain text and whose tool result holds ``image`` as a
    file input (a path where a base64 source's data goes), or plain text without one."""
    result: Any = "no chart"
    if image is not None:
        source = {"type": "base64", "media_type": "image/png", "data": image}
        result = [{"type": "image", "source": source}]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "system": SYSTEM,
        "messages": [
            {"role": "user", "content": "Show me the chart."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "chart", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}],
            },
        ],
    }


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, Any]]]:
    """The steps the drivers answer, in order: ``(driver, step type, the body it carries)``."""
    seen: list[tuple[str, str, Any]] = []
    for kind in (steps.ReadFiles, steps.PrepareTurn, steps.Hooks, steps.NotePassthrough):
        sync, asyn = kind.run, kind.arun

        def run(self: Any, sync: Callable[..., Any] = sync) -> Any:
            seen.append(("run", type(self).__name__, self.body if hasattr(self, "body") else None))
            return sync(self)

        async def arun(self: Any, asyn: Callable[..., Any] = asyn) -> Any:
            seen.append(("arun", type(self).__name__, self.body if hasattr(self, "body") else None))
            return await asyn(self)

        monkeypatch.setattr(kind, "run", run)
        monkeypatch.setattr(kind, "arun", arun)
    yield seen


def _both(body: Callable[[], dict[str, Any]]) -> tuple[Any, Any]:
    """The plan of one call with ``body`` run by each driver, each in a fresh session of its own."""
    client = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9")  # nothing is sent

    with telos_wrap.session("plan-sync", store=MemoryStore()):
        by_run = steps.run(turns._plan("anthropic", client, _options(body())))

    async def main() -> Any:
        with telos_wrap.session("plan-async", store=MemoryStore()):
            return await steps.arun(turns._plan("anthropic", client, _options(body())))

    return by_run, asyncio.run(main())


def _split(seen: list[tuple[str, str, Any]]) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    return (
        [(kind, body) for driver, kind, body in seen if driver == "run"],
        [(kind, body) for driver, kind, body in seen if driver == "arun"],
    )


def test_a_plain_body_takes_the_same_steps_through_both_drivers(
    patched: None, taken: list[tuple[str, str, Any]]
) -> None:
    (sync_options, sync_ctx), (async_options, async_ctx) = _both(lambda: _body(None))
    by_run, by_arun = _split(taken)
    assert [kind for kind, _ in by_run] == ["PrepareTurn"]
    assert by_run == by_arun
    assert sync_options.json_data == async_options.json_data
    assert "cache_control" in str(sync_options.json_data)  # rewritten, not sent as built
    assert (sync_ctx.index, async_ctx.index) == (0, 0)
    assert telos_wrap.failure_counts() == {}


def test_file_inputs_take_the_same_steps_and_are_read_where_each_sdk_reads_them(
    patched: None, taken: list[tuple[str, str, Any]], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _has_file_inputs():
        pytest.skip("this anthropic SDK reads no file inputs in a JSON body")
    image = tmp_path / "chart.png"
    image.write_bytes(b"chart-bytes")
    read_on: list[threading.Thread] = []
    read_bytes = pathlib.Path.read_bytes

    def observed(self: pathlib.Path) -> bytes:
        read_on.append(threading.current_thread())
        return read_bytes(self)

    monkeypatch.setattr(pathlib.Path, "read_bytes", observed)
    (sync_options, sync_ctx), (async_options, async_ctx) = _both(lambda: _body(image))

    by_run, by_arun = _split(taken)
    # The image is deep in the last message: the turn finds it is not plain JSON, the body is read as
    # the SDK serializes it (its file inputs read: ReadFiles, the SDK's copy) and the turn runs again.
    assert [kind for kind, _ in by_run] == ["PrepareTurn", "ReadFiles", "PrepareTurn"]
    assert by_run == by_arun
    encoded = base64.b64encode(b"chart-bytes").decode()
    for options in (sync_options, async_options):
        block = options.json_data["messages"][2]["content"][0]["content"][0]
        assert block["source"]["data"] == encoded
    assert sync_options.json_data == async_options.json_data
    assert "cache_control" in str(sync_options.json_data)
    assert (sync_ctx.index, async_ctx.index) == (0, 0)
    # Once per driver: inline by the sync one, in a worker thread by the async one.
    assert len(read_on) == 2
    assert read_on[0] is threading.current_thread()
    assert read_on[1] is not threading.current_thread()  # asyncio.run's loop runs on this thread
    assert telos_wrap.failure_counts() == {}


def test_a_file_that_cannot_be_read_means_the_same_through_both_drivers(
    patched_lenient: None,
    taken: list[tuple[str, str, Any]],
    tmp_path: pathlib.Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK cannot read the file: the request goes out as built (the SDK then raises its own
    error), one log line, the pass-through noted in the session; what is counted is the turn's own
    fallback (its body is not plain JSON), never a failure of telos' "prepare"."""
    if not _has_file_inputs():
        pytest.skip("this anthropic SDK reads no file inputs in a JSON body")
    missing = tmp_path / "missing.png"
    with caplog.at_level(logging.WARNING, logger="telos_wrap"):
        (sync_options, _), (async_options, _) = _both(lambda: _body(missing))
    by_run, by_arun = _split(taken)
    assert [kind for kind, _ in by_run] == ["PrepareTurn", "ReadFiles", "NotePassthrough"]
    assert [kind for kind, _ in by_arun] == [kind for kind, _ in by_run]
    assert sync_options.json_data == async_options.json_data == _body(missing)  # as built
    said = [r.getMessage() for r in caplog.records if "cannot serialize" in r.getMessage()]
    assert (
        said
        == [
            "telos_wrap: the anthropic SDK cannot serialize this request's body (FileNotFoundError); "
            "telos leaves it as built and the SDK reports the error"
        ]
        * 2
    )
    # The turn's own failure (a value that is not plain JSON) is what is counted, once per call.
    assert telos_wrap.failure_counts() == {"lift": 2}


def test_an_async_call_with_a_file_input_at_the_top_stays_in_its_session(
    patched: None, tmp_path: pathlib.Path
) -> None:
    """Regression: an async client's body with a file input in its first message was routed twice
    (the first time ended by an exception carrying the copied body, to read the files off the loop),
    and the second routing found the call's hint entry taken by the first: the call was counted in
    an implicit session, not in the session it was made in. One plan routes it once."""
    if not _has_file_inputs():
        pytest.skip("this anthropic SDK reads no file inputs in a JSON body")
    from telos_wrap.emulator import Emulator, serve

    image = tmp_path / "chart.png"
    image.write_bytes(b"chart-bytes")
    source = {"type": "base64", "media_type": "image/png", "data": image}
    messages = [{"role": "user", "content": [{"type": "image", "source": source}]}]
    emulator = Emulator()

    async def main(url: str) -> Any:
        async with anthropic.AsyncAnthropic(api_key="k", base_url=url, max_retries=0) as client:
            with telos_wrap.session("charts", store=MemoryStore()) as session:
                await client.messages.create(
                    model="claude-sonnet-4-5", max_tokens=8, system=SYSTEM, messages=messages
                )
                return session.stats

    with serve(emulator) as url:
        stats = asyncio.run(main(url))
    assert stats.requests == 1
    (sent,) = emulator.requests
    assert (
        sent.body["messages"][0]["content"][0]["source"]["data"] == base64.b64encode(b"chart-bytes").decode()
    )
    assert telos_wrap.failure_counts() == {}
