"""The names a documented snippet may ask for with ``<!-- docs-test: NAME, ... -->``.

Every snippet runs with ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` (and dummy API keys) pointing
at the built-in emulator served over real HTTP on 127.0.0.1, so ``anthropic.Anthropic()`` as written
in the docs talks to it; with a fresh process-wide ``MemoryStore``; and is unpatched afterwards.
A fixture adds names to the snippet's globals and may declare *replacements*: a placeholder that
cannot be a real value in prose (a Redis URL) and the value the test substitutes. A declared
placeholder that does not occur in the snippet fails the test, so a replacement never silently
does nothing.

* ``conversation`` — ``client`` (``anthropic.Anthropic()``), ``async_client``
  (``anthropic.AsyncAnthropic()``), ``openai_client`` (``openai.OpenAI()``), and a small agent
  conversation: ``system`` (text), ``tools`` (two tools), ``history`` (messages).
* ``redis`` — ``redis://localhost:6379/0`` in the snippet is replaced by a real ``redis-server``'s
  URL (``TELOS_REDIS_URL`` or a throwaway server, as in ``tests/sessions``).
* ``redis-cluster`` — ``redis+cluster://localhost:7000,localhost:7001`` is replaced by a real
  Redis Cluster's URL (``TELOS_REDIS_CLUSTER_URL`` or a throwaway cluster, as in ``tests/sessions``).
* ``cli-emulator`` — the ``telos-wrap emulator --port 8790 ...`` command of docs/emulator.md runs as
  written there, in its own process (``python -m telos_wrap.cli``) on a free port instead of 8790;
  ``http://127.0.0.1:8790`` in the snippet is replaced by the URL it printed. Closing it fails the
  test if the emulator wrote a traceback (a dropped connection, a handler error) to its stderr.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import openai

__all__ = [
    "CLI_EMULATOR_PLACEHOLDER",
    "FIXTURES",
    "REDIS_CLUSTER_PLACEHOLDER",
    "REDIS_PLACEHOLDER",
    "Prepared",
    "cli_emulator_command",
    "start_cli_emulator",
]

REDIS_PLACEHOLDER = "redis://localhost:6379/0"
REDIS_CLUSTER_PLACEHOLDER = "redis+cluster://localhost:7000,localhost:7001"
CLI_EMULATOR_PORT = "8790"
CLI_EMULATOR_PLACEHOLDER = f"http://127.0.0.1:{CLI_EMULATOR_PORT}"
EMULATOR_PAGE = Path(__file__).resolve().parents[2] / "docs" / "emulator.md"


@dataclass
class Prepared:
    """What one fixture contributes: globals, placeholder replacements, and objects to close."""

    names: dict[str, Any] = field(default_factory=dict)
    replacements: dict[str, str] = field(default_factory=dict)
    closers: list[Callable[[], Any]] = field(default_factory=list)


SYSTEM = "You are the support agent of an online shop. Answer in one short paragraph.\n" + (
    "Refunds are accepted within fourteen days of delivery. " * 40
)
_NUMBER_SCHEMA = {"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]}
TOOLS = [
    {
        "name": "lookup_order",
        "description": "Find an order by its number.",
        "input_schema": _NUMBER_SCHEMA,
    },
    {
        "name": "refund",
        "description": "Refund an order.",
        "input_schema": _NUMBER_SCHEMA,
    },
]
HISTORY = [
    {"role": "user", "content": "Where is my order 1001?"},
    {"role": "assistant", "content": "It shipped yesterday and arrives on Friday."},
    {"role": "user", "content": "Can I still return it after it arrives?"},
]


def _conversation(context: dict[str, Any]) -> Prepared:
    client = anthropic.Anthropic()
    openai_client = openai.OpenAI()
    return Prepared(
        names={
            "client": client,
            "async_client": anthropic.AsyncAnthropic(),
            "openai_client": openai_client,
            "system": SYSTEM,
            "tools": [dict(tool) for tool in TOOLS],
            "history": [dict(message) for message in HISTORY],
        },
        closers=[client.close, openai_client.close],
    )


def _redis(context: dict[str, Any]) -> Prepared:
    return Prepared(replacements={REDIS_PLACEHOLDER: context["redis_url"]()})


def _redis_cluster(context: dict[str, Any]) -> Prepared:
    return Prepared(replacements={REDIS_CLUSTER_PLACEHOLDER: context["redis_cluster_url"]()})


def cli_emulator_command() -> list[str]:
    """The ``telos-wrap emulator --port 8790 ...`` line of docs/emulator.md, split as a shell would."""
    for line in EMULATOR_PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"telos-wrap emulator --port {CLI_EMULATOR_PORT} "):
            return shlex.split(line)
    raise AssertionError(f"docs/emulator.md has no `telos-wrap emulator --port {CLI_EMULATOR_PORT}` line")


def start_cli_emulator(argv: list[str]) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Run ``telos-wrap ARGV...`` (``argv[0]`` is ``telos-wrap``) with ``--port 0``.

    Returns the process, the URL it printed, and every stdout line it printed before serving.
    """
    args = list(argv[1:])
    if "--port" in args:
        args[args.index("--port") + 1] = "0"
    process = subprocess.Popen(
        [sys.executable, "-m", "telos_wrap.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:  # the banner ends with the hint about other processes
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if "telos in another process" in line:
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(120) or not lines:
        process.kill()
        raise AssertionError(f"telos-wrap emulator did not start: {process.communicate()[1][-2000:]}")
    found = re.search(r"serving on (http://\S+)", lines[0])
    assert found is not None, lines
    return process, found[1], lines


def stop_cli_emulator(process: subprocess.Popen[str]) -> str:
    """Stop it (SIGTERM, as Ctrl-C's neighbour) and return its stderr."""
    process.terminate()
    try:
        _, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
    return err


def _cli_emulator(context: dict[str, Any]) -> Prepared:
    process, url, _ = start_cli_emulator(cli_emulator_command())

    def close() -> None:
        err = stop_cli_emulator(process)
        assert "Traceback" not in err and "Error" not in err, err[-3000:]

    return Prepared(replacements={CLI_EMULATOR_PLACEHOLDER: url}, closers=[close])


FIXTURES: dict[str, Callable[[dict[str, Any]], Prepared]] = {
    "conversation": _conversation,
    "redis": _redis,
    "redis-cluster": _redis_cluster,
    "cli-emulator": _cli_emulator,
}
