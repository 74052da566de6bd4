"""Zero-code with a store (issue 44): ``telos-wrap run --store URL`` shares sessions across processes.

An application that never imports telos_wrap runs one conversation in two processes, one after the
other, both started with ``telos-wrap run --store redis://…`` against one real Redis and one served
emulator (the vendor's cache is shared, as a vendor's is). The first process sends turns 0-1: the
clock line of the system prompt changes at turn 1, so its session learns it is volatile. The second
process sends turns 2-3: with the store it knows what the first learned (its first request reads the
whole cached prefix, and the stored session counts all four requests); without it, its first request
sends the clock in place and reads nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from telos_wrap.autopatch import STORE_VARIABLE, environment, store_from_environment
from telos_wrap.emulator import Emulator, serve
from telos_wrap.errors import TelosOptionError
from telos_wrap.sessions import SessionState
from telos_wrap.sessions.stores.from_url import redacted, store_from_url
from telos_wrap.sessions.stores.redis_store import RedisStore
from telos_wrap.sessions.stores.store import MemoryStore

#: Knows nothing of telos: a support conversation whose system prompt carries a clock under a label
#: telos does not know (so it is learned at its first change, not on sight). It sends turns
#: FIRST..LAST of the conversation (the earlier ones are its history) and prints each one's usage.
APP = """
import sys
import anthropic

base_url, opening, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
client = anthropic.Anthropic(api_key="x", base_url=base_url, max_retries=0)
POLICY = "\\n".join(f"Policy {i}: a refund under rule {i} needs the receipt." for i in range(80))
history = []
for turn in range(last + 1):
    history.append({"role": "user", "content": opening if turn == 0 else f"question {turn}"})
    if turn >= first:
        system = f"You are the support agent of Acme.\\nChecked at 10:00:{turn:02d}\\n{POLICY}"
        reply = client.messages.create(model="claude-opus-5", max_tokens=16, system=system, messages=history)
        u = reply.usage
        total = u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
        print(f"turn {turn}: read {u.cache_read_input_tokens or 0} of {total}")
    history.append({"role": "assistant", "content": "ok"})
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    path = tmp_path / "app.py"
    path.write_text(APP, encoding="utf-8")
    assert "telos" not in APP
    return path


@pytest.fixture
def served() -> Iterator[str]:
    with serve(Emulator()) as url:
        yield url


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TELOS_WRAP_", STORE_VARIABLE))}


def _run(
    app: Path, url: str, opening: str, turns: tuple[int, int], *store: str
) -> dict[int, tuple[int, int]]:
    """Start the app through ``telos-wrap run``; ``{turn: (cache read, input)}`` it printed."""
    command = [sys.executable, "-m", "telos_wrap.cli", "run", *store, "--", sys.executable, str(app)]
    result = subprocess.run(
        [*command, url, opening, *map(str, turns)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_plain_env(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    usage = {}
    for line in result.stdout.splitlines():
        head, _, rest = line.partition(": read ")
        read, _, total = rest.partition(" of ")
        usage[int(head.removeprefix("turn "))] = (int(read), int(total))
    return usage


def _sessions(store: RedisStore) -> set[str]:
    keys = store.redis.scan_iter(match=f"{store.prefix}{{*}}:session", count=1000)
    return {key.decode()[len(store.prefix) + 1 : -len("}:session")].removeprefix("=") for key in keys}


@pytest.mark.redis
def test_run_with_a_store_shares_sessions_across_processes(app: Path, served: str, redis_url: str) -> None:
    store = RedisStore(redis_url)
    before = _sessions(store)
    opening = f"My order {uuid.uuid4().hex[:8]} arrived broken."

    first = _run(app, served, opening, (0, 1), "--store", redis_url)
    second = _run(app, served, opening, (2, 3), "--store", redis_url)

    assert first[1][0] == 0, "process 1: the clock changed at turn 1 (a break, and learned)"
    read, total = second[2]
    assert read >= 0.95 * total, f"process 2's first request reads the prefix process 1 learned: {second}"
    (session_id,) = _sessions(store) - before
    stored = store.load(session_id)
    assert stored is not None
    assert SessionState.loads(stored.text).requests == 4, "one session's stats over both processes"


def test_without_a_store_the_second_process_starts_over(app: Path, served: str) -> None:
    opening = f"My order {uuid.uuid4().hex[:8]} arrived broken."
    _run(app, served, opening, (0, 1))
    second = _run(app, served, opening, (2, 3))
    assert second[2][0] == 0, "the clock sent in place: the cached prefix is not read"


def test_a_bad_store_url_stops_run_before_the_command_starts(app: Path) -> None:
    bad = "redis://:hunter2@cache:63x9/0"
    result = subprocess.run(
        [sys.executable, "-m", "telos_wrap.cli", "run", "--store", bad, "--", sys.executable, str(app)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_plain_env(),
        check=False,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "telos-wrap run: --store: store URL 'redis://:***@cache:63x9/0' cannot work" in result.stderr
    assert "expected one of: redis://HOST:6379/0" in result.stderr
    assert "hunter2" not in result.stderr


def test_a_bad_store_url_in_the_environment_runs_the_app_patched_and_says_so(app: Path, served: str) -> None:
    env = environment({}, base=_plain_env(), store="http://cache:6379")
    result = subprocess.run(
        [sys.executable, str(app), served, "hello", "0", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0 and "turn 0:" in result.stdout
    assert f"telos-wrap: {STORE_VARIABLE}: store URL 'http://cache:6379' cannot work" in result.stderr
    assert "Sessions stay in this process" in result.stderr


def test_print_env_names_the_store() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "telos_wrap.cli", "run", "--store", "redis://cache:6379/0", "--print-env"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_plain_env(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"{STORE_VARIABLE}=redis://cache:6379/0" in result.stdout.splitlines()


def test_store_urls() -> None:
    assert isinstance(store_from_url("memory://"), MemoryStore)
    single = store_from_url("redis://cache:6379/2")
    assert isinstance(single, RedisStore) and not single.cluster
    cluster = store_from_url("redis+cluster://a:7000,b:7001")
    assert isinstance(cluster, RedisStore) and cluster.cluster
    assert isinstance(store_from_url("redis+sentinel://s1:26379/main"), RedisStore)
    assert store_from_environment({}) is None
    assert isinstance(store_from_environment({STORE_VARIABLE: "rediss://cache:6380/0"}), RedisStore)
    for bad in ("", "cache:6379", "http://cache", "redis+mesh://a:1", "redis://cache:99999/0"):
        with pytest.raises(TelosOptionError, match="expected one of"):
            store_from_url(bad)
    with pytest.raises(TelosOptionError, match=f"^{STORE_VARIABLE}: "):
        store_from_environment({STORE_VARIABLE: "nope"})
    assert redacted("rediss://user:pw@h:1/0") == "rediss://user:***@h:1/0"
    assert redacted("redis://pw@h:1/0") == "redis://***@h:1/0"
    assert redacted("redis://h:1/0") == "redis://h:1/0"
