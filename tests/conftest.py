"""Shared fixtures: patch/unpatch around a test, strict by default, and cassette settings.

Cassettes (``cassettes/<test module>/<test name>.yaml``) are real HTTP exchanges between the real
SDKs and the built-in engine emulator served on 127.0.0.1 (see ``cassettes/README.md``). They are
matched on method, path and the exact request body bytes, so any change in what telos emits fails
the test. Re-record with ``pytest --record-mode=rewrite`` (the ``emulator_url`` fixture then starts
a real local server).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import telos_wrap
from telos_wrap.failopen import reset_failures
from telos_wrap.sessions import logs
from telos_wrap.sessions.turns.wire_i2 import telos_rewrites_seen

ROOT = Path(__file__).resolve().parent.parent

# CI (CI=true, as .ci/run is run) draws every property's examples from a fixed seed per test and has
# no per-example deadline: a red CI is then reproduced by running the same command locally, and a
# rare example found by a developer's random run becomes a regression test, never an intermittent CI
# failure. Speed is shown by benchmarks, not by hypothesis deadlines on a shared 2-core machine.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _no_telos_rewrote(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test during which a session recorded a ``telos_rewrote`` break (I2 on the wire).

    Every test that sends more than one request of a session is thereby a check that telos re-sends
    settled messages byte for byte; ``@pytest.mark.allow_telos_rewrote`` opts a test out.
    """
    telos_rewrites_seen(clear=True)
    yield
    found = telos_rewrites_seen(clear=True)
    if found and request.node.get_closest_marker("allow_telos_rewrote") is None:
        pytest.fail(f"telos re-sent a settled message in another form: {found[0].detail} ({found[0].where})")


@pytest.fixture(autouse=True)
def _fresh_log_tally() -> Iterator[None]:
    """Each test starts as a fresh process does for ``sessions/logs.py``: the first event of each
    kind is logged at its level again, and no count of an earlier test is summarized in this one."""
    logs._reset()
    yield
    logs._reset()


@pytest.fixture
def patched() -> Iterator[None]:
    """``telos_wrap.patch(strict=True)`` for the test, ``unpatch()`` after."""
    telos_wrap.patch(strict=True)
    reset_failures()
    try:
        yield
    finally:
        telos_wrap.unpatch()


@pytest.fixture
def patched_lenient() -> Iterator[None]:
    """``telos_wrap.patch()`` in its production (fail-open) mode."""
    telos_wrap.patch(strict=False)
    reset_failures()
    try:
        yield
    finally:
        telos_wrap.unpatch()


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, object]:
    return {
        # raw_body: the exact bytes. vcrpy's "body" matcher parses JSON and would accept a request
        # whose keys come in another order — precisely the drift telos exists to prevent.
        "match_on": ["method", "path", "raw_body"],
        "filter_headers": [
            "authorization",
            "x-api-key",
            "api-key",
            "openai-organization",
            "openai-project",
            "cookie",
        ],
        "decode_compressed_response": True,
    }


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """``cassettes/<module>``; ``TELOS_CASSETTE_DIR`` redirects them (the older-SDK nox sessions).

    Cassettes hold the bytes the newest SDK sends; an older SDK orders a request's keys
    differently, so those sessions re-record (``--record-mode=all``) into a scratch directory
    against the live emulator and check the same assertions on what was sent.
    """
    module = request.module.__name__.rsplit(".", 1)[-1]
    return str(Path(os.environ.get("TELOS_CASSETTE_DIR") or ROOT / "cassettes") / module)


@pytest.fixture
def emulator_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Base URL of a real emulator HTTP server when recording; a placeholder when replaying.

    Cassettes match on method, path and body, not on the port: the committed ones are recorded on
    port 4010 (so a re-recording only changes what changed); scratch recordings (``TELOS_CASSETTE_DIR``,
    the older-SDK nox sessions) take a free port, so two such runs on one machine cannot collide.
    """
    mode = request.config.getoption("--record-mode", default="none")
    if mode in (None, "none"):
        yield "http://127.0.0.1:4010"
        return
    from telos_wrap.emulator import Emulator, serve

    with serve(Emulator(), port=0 if os.environ.get("TELOS_CASSETTE_DIR") else 4010) as url:
        yield url
