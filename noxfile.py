"""Developer sessions: ``nox -s tests lint typecheck tests_sdk_oldest``.

Every session uses the one interpreter on the machine (``python3``); the SDK floors tested by
``tests_sdk_oldest`` are the lower bounds declared in pyproject.toml.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "python3"
# Keep in step with the lower bounds in pyproject.toml [project.dependencies].
OLDEST = ["anthropic==2.11.0", "openai==3.53.0", "wrapt==2.0.0", "pydantic==2.7.0"]


def _tests(session: nox.Session, *pins: str) -> None:
    session.install("-e", ".[test]")
    if pins:
        session.install(*pins)
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite against the newest SDK releases."""
    _tests(session)


@nox.session(python=PYTHON)
def tests_sdk_oldest(session: nox.Session) -> None:
    """The test suite against the oldest anthropic/openai/wrapt/pydantic releases we support."""
    _tests(session, *OLDEST)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (style, banned json.dumps outside the canonicalizer) and import-linter (the three layers)."""
    session.install("-e", ".", "ruff>=0.6", "import-linter>=2.0")
    session.run("ruff", "check", "src", "tests", "benchmarks")
    session.run("ruff", "format", "--check", "src")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on src/."""
    session.install("-e", ".", "mypy>=1.11", "types-redis")
    session.run("mypy")
