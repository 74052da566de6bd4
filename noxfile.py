"""Developer sessions: ``nox -s tests lint typecheck tests_sdk integrations_each integrations_instructor``
(and ``pythons``).

Every session but ``pythons`` uses the machine's ``python3``; ``pythons`` runs the SDK-driving tests
on each Python the package supports (3.10 to 3.13, pyproject's ``requires-python`` and classifiers).
Venvs are made with ``uv`` when it is installed (much faster for the framework environments), else
with virtualenv.

``tests_sdk`` runs the whole suite on the oldest release of each supported major SDK line, paired
so both SDKs share one HTTP library (the suite's mock transports are built from it): anthropic 0.x
with openai 2.x (``httpx``), anthropic 1.x with openai 3.x (``httpx2``); ``tests`` covers the newest
releases. Cassettes hold the bytes the newest SDK sends (an older SDK orders a request's keys
differently), so the older lines re-record them against the live emulator into a scratch directory
and check the same assertions on what was sent.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile

import nox
import tomllib

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"

PYTHON = "python3"
#: The Pythons the package supports (pyproject's classifiers): ``nox -s pythons`` runs on each.
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


def _pythons_on_path() -> None:
    """Put pyenv's build of each supported Python on PATH where no ``pythonX.Y`` outside pyenv's shims
    is: as a link in ``.nox/pythons``, so only ``pythonX.Y`` is added (not that build's ``python3``,
    which would change what every other session runs).

    pyenv's shims answer for every version it holds but run only the selected ones (the others exit
    127, "command not found"), and ``uv python install`` needs the network, so a machine with pyenv's
    builds under ``$PYENV_ROOT/versions`` (``~/.pyenv`` by default) would otherwise skip versions it
    has.
    """
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    shims = os.path.join(root, "shims")
    links = os.path.abspath(os.path.join(".nox", "pythons"))
    added = False
    for version in PYTHONS:
        on_path = shutil.which(f"python{version}")
        if on_path and os.path.dirname(on_path) not in (shims, links):
            continue
        # The newest patch release pyenv holds of this minor version, e.g. versions/3.12.1/bin.
        builds = glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}"))
        builds.sort(key=lambda path: [int(p) for p in path.split(os.sep)[-3].split(".") if p.isdigit()])
        if builds:
            os.makedirs(links, exist_ok=True)
            link = os.path.join(links, f"python{version}")
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(builds[-1], link)
            added = True
    if added:
        os.environ["PATH"] = os.pathsep.join([links, os.environ.get("PATH", "")])


_pythons_on_path()

# The oldest release of each supported line; keep the first in step with pyproject's floors.
SDK_LINES = {
    "0x": ["anthropic==0.93.0", "openai==2.0.0"],  # httpx; instructor's anthropic pin
    "1x": ["anthropic==1.0.0", "openai==3.0.0"],  # httpx2
}
OLDEST_OTHERS = ["wrapt==2.0.0", "pydantic==2.7.0"]
# openai-agents needs openai >= 3 and pydantic >= 2.12: left out where the pins predate those (its
# test is then skipped by importorskip).
WITHOUT = {"0x": ("openai-agents",), "1x": (), "oldest": ("openai-agents",)}


def _test_extra(without: tuple[str, ...] = ()) -> list[str]:
    """pyproject's ``test`` extra, minus the packages named in ``without``."""
    with open("pyproject.toml", "rb") as file:
        extra = tomllib.load(file)["project"]["optional-dependencies"]["test"]
    return [req for req in extra if not req.startswith(without)] if without else list(extra)


def _tests(session: nox.Session, *pins: str, rerecord: bool = False, without: tuple[str, ...] = ()) -> None:
    session.install("-e", ".", *_test_extra(without), *pins)
    args = list(session.posargs)
    env = {}
    if rerecord:
        env["TELOS_CASSETTE_DIR"] = tempfile.mkdtemp(prefix="telos-cassettes-")
        args.append("--record-mode=all")
    session.run("python", "-m", "pytest", *args, env=env)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite against the newest SDK releases."""
    _tests(session)


#: What ``pythons`` runs: the tests that drive both SDKs end to end through ``patch()`` (sync and async
#: clients, streams, the raw-response and parse entry points, the SDKs' private names in
#: ``private_api``), and the three layers' tables (lift, bridge, engines). Left to ``tests``: the
#: hypothesis runs over the planner (test_anthropic_plan_incremental, ~65 s alone) and the replays of
#: recorded traces (~25 s), long pure-Python loops that the other tests already reach.
PYTHONS_TESTS = [
    "tests/anthropic",
    "tests/openai",
    "tests/lift",
    "tests/bridge",
    "tests/engines",
    "tests/patch",
    "tests/test_private_api.py",
    "--ignore=tests/engines/test_anthropic_plan_incremental.py",
    "--ignore=tests/anthropic/test_trace_replay.py",
    "--ignore=tests/openai/test_replay_trace.py",
]


@nox.session(python=PYTHONS)
def pythons(session: nox.Session) -> None:
    """The SDK-driving tests on Python 3.10 to 3.13 (``nox -s pythons-3.10``); arguments after ``--``
    replace the selection. A version that is not installed is skipped (nox says so)."""
    session.install("-e", ".", *_test_extra())
    session.run("python", "-m", "pytest", "-q", *(session.posargs or PYTHONS_TESTS))


@nox.session(python=PYTHON)
@nox.parametrize("line", list(SDK_LINES))
def tests_sdk(session: nox.Session, line: str) -> None:
    """The test suite against the oldest release of an older SDK line (``tests_sdk(line='0x')``)."""
    _tests(session, *SDK_LINES[line], rerecord=True, without=WITHOUT[line])


@nox.session(python=PYTHON)
def tests_sdk_oldest(session: nox.Session) -> None:
    """pyproject's floors: anthropic 0.93, openai 2.0, wrapt 2.0, pydantic 2.7."""
    _tests(session, *SDK_LINES["0x"], *OLDEST_OTHERS, rerecord=True, without=WITHOUT["oldest"])


#: Each framework in a venv of its own, so it resolves the SDK versions it would in a user's app:
#: ``{session name: (its extras, its test modules)}``. Frameworks whose pins meet share one venv (each
#: venv's install is most of its time in CI).
FRAMEWORKS = {
    "langchain": (
        "integrations-langchain",
        ["tests/integrations/test_langchain.py", "tests/integrations/test_langgraph.py"],
    ),
    "pydantic_ai": ("integrations-pydantic-ai", ["tests/integrations/test_pydantic_ai.py"]),
    "litellm": ("integrations-litellm", ["tests/integrations/test_litellm.py"]),
    # The anthropic 0.x / openai 2.x line: LlamaIndex's and AutoGen's Anthropic clients need
    # anthropic<1, LlamaIndex's OpenAI LLM and CrewAI openai<3 (pyproject's extras say why).
    "llamaindex_autogen_crewai": (
        "integrations-llamaindex,integrations-autogen,integrations-crewai",
        [
            "tests/integrations/test_llamaindex.py",
            "tests/integrations/test_autogen.py",
            "tests/integrations/test_crewai.py",
        ],
    ),
    # The newest SDKs and LiteLLM.
    "dspy_smolagents": (
        "integrations-dspy,integrations-smolagents",
        ["tests/integrations/test_dspy.py", "tests/integrations/test_smolagents.py"],
    ),
}
#: Test-extra packages an environment cannot take beside its framework's pins: openai-agents needs
#: openai>=3 (its tests are skipped by importorskip there).
FRAMEWORK_WITHOUT = {"llamaindex_autogen_crewai": ("openai-agents",)}


@nox.session(python=PYTHON)
def integrations(session: nox.Session) -> None:
    """tests/integrations with LangChain, LangGraph, pydantic-ai and LiteLLM in one venv (quick local run)."""
    session.install("-e", ".[test,integrations]")
    session.run("python", "-m", "pytest", "tests/integrations", *session.posargs)


@nox.session(python=PYTHON)
@nox.parametrize("framework", list(FRAMEWORKS))
def integrations_each(session: nox.Session, framework: str) -> None:
    """One framework's integration tests in its own venv (``integrations_each(framework='litellm')``)."""
    extra, paths = FRAMEWORKS[framework]
    without = FRAMEWORK_WITHOUT.get(framework, ())
    if without:
        session.install("-e", f".[{extra}]", *_test_extra(without))
    else:
        session.install("-e", f".[test,{extra}]")
    session.run("python", "-m", "pytest", *paths, *session.posargs)


@nox.session(python=PYTHON)
def integrations_instructor(session: nox.Session) -> None:
    """tests/integrations with instructor, whose pins (jiter<0.15, anthropic==0.93) need their own venv."""
    session.install("-e", ".[test,integrations-instructor]")
    session.run("python", "-m", "pytest", "tests/integrations", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (style, banned json.dumps outside the canonicalizer) and import-linter (the three layers)."""
    session.install("-e", ".", "ruff>=0.6", "import-linter>=2.0")
    session.run("ruff", "check", "src", "tests", "benchmarks")
    session.run("ruff", "format", "--check", "src", "tests", "benchmarks")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy: --strict on src/, and tests/ as pyproject's ``tests.*`` override says."""
    # The packages src/ and tests/ import where they are installed: the test extra (redis, typed since
    # 5.0; pytest and vcrpy for the pytest plugin; the SDKs' HTTP library for tests/sdk_http.py).
    session.install("-e", ".[test]", "mypy>=1.11")
    session.run("mypy")


#: The SDK lines whose own suites ``sdk_suites`` runs: the newest releases (what ``tests`` installs)
#: and the 0.x line's oldest (anthropic 0.93 + openai 2.0).
SUITE_LINES = {"newest": ["anthropic", "openai"], "0x": SDK_LINES["0x"]}
#: The suites' own test dependencies (their pyproject's dev group, less the type checkers and
#: linters), and the SDKs' extras their tests import.
SUITE_DEPS = [
    "respx",
    "pytest-asyncio",
    "time-machine",
    "dirty-equals>=0.6.0",
    "importlib-metadata",
    "rich",
    "hypothesis",
    "inline-snapshot>=0.28.0",
    "griffe",
    "http-snapshot[httpx]",
    "packaging",
    "opentelemetry-sdk",
    "trio",
    "Pillow",
    "nest_asyncio",
    "standardwebhooks",
    "boto3",
    "google-auth[requests]",
    "azure-identity",
    "aiohttp",
    "httpx_aiohttp",
    "pip",
    # A per-test deadline (the session passes --timeout): a test that hangs fails, the run goes on.
    "pytest-timeout",
]
#: Per line, the SDK extras its suite imports at collection: openai 3.x's realtime and websocket
#: tests import ``websockets`` (its ``realtime`` extra), its microphone helper test ``numpy``
#: (without them 38 modules fail to collect and pytest stops before running anything).
SUITE_LINE_DEPS = {"newest": ["websockets>=13,<16", "numpy"], "0x": []}
#: The per-test deadline of the suites' runs (seconds): their slowest test takes ~7 s here.
SUITE_TEST_TIMEOUT = 300


def _their_addopts(pyproject: str) -> str:
    """The suite's own pytest ``addopts`` without pytest-xdist's options (one process here)."""
    with open(pyproject, "rb") as file:
        addopts = tomllib.load(file)["tool"]["pytest"]["ini_options"].get("addopts", "")
    words, kept = addopts.split(), []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in ("-n", "--dist"):
            skip = True
        elif not word.startswith(("-n=", "--dist=", "--numprocesses")):
            kept.append(word)
    return " ".join(kept)


@nox.session(python=PYTHON)
@nox.parametrize("line", list(SUITE_LINES))
def sdk_suites(session: nox.Session, line: str) -> None:
    """The anthropic and openai SDKs' own test suites, from the sdists of the installed versions,
    under ``telos_wrap.patch()`` (``tests/sdk_suites``: the plugin and the known exceptions with
    their reasons). ``TELOS_SUITE_PATCH=0`` runs the baseline without patching;
    ``TELOS_SUITE_SDKS=anthropic`` runs one SDK's suite. Arguments after ``--`` go to pytest instead
    of the default selection (everything but ``tests/api_resources``, which needs a Prism mock
    server): a test path of the suites, or ``-x``."""
    import os
    import tarfile

    session.install("-e", ".", *SUITE_LINES[line], *SUITE_DEPS, *SUITE_LINE_DEPS[line])
    work = tempfile.mkdtemp(prefix="telos-sdk-suites-")
    plugin_dir = os.path.abspath("tests/sdk_suites")
    failed = []
    for sdk in os.environ.get("TELOS_SUITE_SDKS", "anthropic,openai").split(","):
        installed = session.run(
            "python", "-c", f"import importlib.metadata as m; print(m.version({sdk!r}))", silent=True
        )
        version = str(installed).strip().splitlines()[-1]
        session.run(
            "python", "-m", "pip", "download", "-q", f"{sdk}=={version}",
            "--no-binary", ":all:", "--no-deps", "-d", work,
        )  # fmt: skip
        with tarfile.open(os.path.join(work, f"{sdk}-{version}.tar.gz")) as sdist:
            sdist.extractall(work, filter="data")
        root = os.path.join(work, f"{sdk}-{version}")
        addopts = _their_addopts(os.path.join(root, "pyproject.toml"))
        args = session.posargs or ["tests", "--ignore=tests/api_resources"]
        with session.chdir(root):
            try:
                session.run(
                    "python", "-m", "pytest", "-o", f"addopts={addopts}", "-p", "telos_under_patch",
                    "-p", "no:cacheprovider", "-q", "-rfEs", f"--timeout={SUITE_TEST_TIMEOUT}", *args,
                    env={"PYTHONPATH": plugin_dir},
                )  # fmt: skip
            except nox.command.CommandFailed:
                failed.append(f"{sdk} {version}")
    if failed:
        session.error(f"failures under patch() in the suites of {', '.join(failed)}")
