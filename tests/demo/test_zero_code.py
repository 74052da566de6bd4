"""Zero-code adoption and the CLI around it, in subprocesses over real HTTP.

* ``telos-wrap run -- python app.py`` patches an application that never imports telos_wrap: the
  served emulator receives telos' rewrite (tools in a stable order, ``cache_control`` breakpoints),
  where the same app started plainly sends its request as built; ``--print-env`` gives a process
  manager the same start-up; a bad option in the environment leaves the app running unpatched and
  says why; an application's own ``sitecustomize`` still runs.
* ``telos-wrap emulator`` serves the emulator for any client; ``telos-wrap check`` against it prints
  predicted == reported on every request.
* ``--version``, and help text on every command and argument.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.cli import _parser, main
from telos_wrap.emulator import Emulator, serve

#: An application that knows nothing of telos: an Anthropic call whose tools come in a careless order
#: and whose system prompt carries a clock. It prints which of its modules' names start with "telos".
APP = """
import sys
import anthropic

client = anthropic.Anthropic(api_key="x", base_url=sys.argv[1], max_retries=0)
tools = [
    {"name": n, "description": "Look records up. " * 300, "input_schema": {"type": "object"}}
    for n in ("b_tool", "a_tool")
]
message = client.messages.create(
    model="claude-opus-5",
    max_tokens=16,
    system="You are terse.\\nCurrent time: 10:00:01",
    tools=tools,
    messages=[{"role": "user", "content": "hi"}],
)
print("loaded:", sorted({name.split(".")[0] for name in sys.modules if name.startswith("telos")}))
print("reply:", message.content[0].text)
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    path = tmp_path / "app.py"
    path.write_text(APP, encoding="utf-8")
    assert "import telos" not in APP
    return path


@pytest.fixture
def served() -> Iterator[tuple[Emulator, str]]:
    emulator = Emulator()
    with serve(emulator) as url:
        yield emulator, url


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "telos_wrap.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def _plain_env() -> dict[str, str]:
    """This environment without any telos start-up variable (as a fresh shell has it)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TELOS_WRAP_")}


def _sent_tools(emulator: Emulator) -> list[str]:
    (record,) = emulator.requests
    return [tool["name"] for tool in record.body["tools"]]


def _markers(emulator: Emulator) -> int:
    return str(emulator.requests[-1].body).count("cache_control")


def test_run_patches_an_app_that_never_imports_telos_wrap(app: Path, served: tuple[Emulator, str]) -> None:
    emulator, url = served
    plain = subprocess.run(
        [sys.executable, str(app), url], capture_output=True, text=True, timeout=120, env=_plain_env()
    )
    assert plain.returncode == 0, plain.stderr
    assert "loaded: []" in plain.stdout
    assert _sent_tools(emulator) == ["b_tool", "a_tool"] and _markers(emulator) == 0
    emulator.reset()

    patched = _cli("run", "--", sys.executable, str(app), url, env=_plain_env())

    assert patched.returncode == 0, patched.stderr
    assert "loaded: ['telos_wrap']" in patched.stdout and "reply:" in patched.stdout
    assert _sent_tools(emulator) == ["a_tool", "b_tool"], "telos' stable tool order went out"
    assert _markers(emulator) >= 1, "and its cache breakpoints"
    assert patched.stderr == ""


def test_print_env_patches_a_process_started_by_a_manager(app: Path, served: tuple[Emulator, str]) -> None:
    emulator, url = served
    printed = _cli("run", "--strict", "--engine", f"{url}/vllm/v1=vllm", "--print-env", env=_plain_env())
    assert printed.returncode == 0, printed.stderr
    env = _plain_env()
    for line in printed.stdout.splitlines():
        name, _, value = line.partition("=")
        (env[name],) = shlex.split(value)
    assert env["TELOS_WRAP_PATCH"] == "1"
    assert '"strict":true' in env["TELOS_WRAP_OPTIONS"]

    started = subprocess.run(
        [sys.executable, str(app), url], capture_output=True, text=True, env=env, timeout=120
    )

    assert started.returncode == 0, started.stderr
    assert _sent_tools(emulator) == ["a_tool", "b_tool"]


def test_a_bad_option_in_the_environment_runs_the_app_unpatched(
    app: Path, served: tuple[Emulator, str]
) -> None:
    emulator, url = served
    env = telos_wrap.autopatch.environment({}, base=_plain_env())
    env["TELOS_WRAP_OPTIONS"] = '{"engines": {"http://gpu-box:8000/v1": "vllmm"}}'

    started = subprocess.run(
        [sys.executable, str(app), url], capture_output=True, text=True, env=env, timeout=120
    )

    assert started.returncode == 0, started.stderr
    assert "telos-wrap: not patched:" in started.stderr and "did you mean 'vllm'" in started.stderr
    assert _sent_tools(emulator) == ["b_tool", "a_tool"], "the app's own request went out"


def test_run_refuses_a_bad_option_before_starting(app: Path) -> None:
    result = _cli("run", "--engine", "http://gpu-box:8000/v1=vllmm", "--", sys.executable, str(app), "x")
    assert result.returncode == 1
    assert "no engine named 'vllmm'" in result.stderr and "did you mean 'vllm'" in result.stderr
    assert "loaded:" not in result.stdout, "the command was not started"
    missing = _cli("run", "--", "no-such-command-for-telos")
    assert missing.returncode == 1 and "cannot start 'no-such-command-for-telos'" in missing.stderr
    empty = _cli("run")
    assert empty.returncode == 1 and "no command given" in empty.stderr


def test_the_applications_own_sitecustomize_still_runs(
    app: Path, served: tuple[Emulator, str], tmp_path: Path
) -> None:
    emulator, url = served
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("print('own sitecustomize ran')\n", encoding="utf-8")
    env = {**_plain_env(), "PYTHONPATH": str(own)}

    result = _cli("run", "--", sys.executable, str(app), url, env=env)

    assert result.returncode == 0, result.stderr
    assert "own sitecustomize ran" in result.stdout
    assert _sent_tools(emulator) == ["a_tool", "b_tool"]


# -- telos-wrap emulator and telos-wrap check ----------------------------------------------------------


@contextlib.contextmanager
def _emulator_process() -> Iterator[str]:
    """``telos-wrap emulator`` in a subprocess; yields the base URL it prints, stops it after."""
    with subprocess.Popen(
        [sys.executable, "-m", "telos_wrap.cli", "emulator"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_plain_env(),
    ) as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.startswith("telos-wrap emulator serving on http://127.0.0.1:"), first
            yield first.split()[4]
        finally:
            process.terminate()
            process.wait(timeout=30)


def _check(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(["check", *argv])
        except SystemExit as exited:
            raise AssertionError(f"check failed: {exited.code}") from None
    return code, out.getvalue()


@pytest.mark.parametrize(("vendor", "path"), [("anthropic", ""), ("openai", "/openai/v1")])
def test_check_against_the_served_emulator_predicts_every_read(vendor: str, path: str) -> None:
    with _emulator_process() as url:
        code, printed = _check(vendor, "--base-url", url + path)

    assert code == 0, printed
    rows = [line for line in printed.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 4
    assert all(row.rstrip().endswith("=") for row in rows), printed
    reads = [int(row.split()[4].replace(",", "")) for row in rows]
    assert reads[0] == 0 and all(read > 1000 for read in reads[1:]), "the session reads its prefix"
    assert printed.rstrip().endswith("predicted == reported on every request (4)")
    assert not telos_wrap.is_patched(), "check leaves the process as it found it"


def test_check_json_and_a_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prediction that is off is reported as such, with exit status 1 (the verdict can fail)."""
    from telos_wrap import check

    with _emulator_process() as url:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["check", "anthropic", "--base-url", url, "--turns", "2", "--json"]) == 0
        data: dict[str, Any] = __import__("json").loads(out.getvalue())
        assert data["agrees"] and [r["exact"] for r in data["requests"]] == [True, True]

        real = check._Predictor.__call__

        def predicts_no_read(self: Any, request: Any) -> None:
            real(self, request)
            last = self.usage[-1]
            self.usage[-1] = type(last)(last.engine, last.total_input, 0, 0, 0)

        monkeypatch.setattr(check._Predictor, "__call__", predicts_no_read)
        code, printed = _check("anthropic", "--base-url", url, "--turns", "2")
    assert code == 1, printed
    assert "predicted and reported differ on request(s) 1, 2" in printed


# -- the command line itself -------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"telos-wrap {telos_wrap.__version__}"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_command_and_argument_has_help() -> None:
    parser = _parser()
    commands = _subparsers(parser)
    assert set(commands) == {"demo", "replay", "run", "emulator", "check", "dashboard"}
    for name, command in commands.items():
        assert command.description, f"{name} has no description"
        for action in command._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
    (choices,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert all(item.help for item in choices._choices_actions)
