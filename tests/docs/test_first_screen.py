"""The README's first screen works on a fresh machine, and documented numbers are the code's.

* The first ```` ```python ```` block runs as pasted in a fresh interpreter (no API key, no base URL
  in the environment, another working directory) and prints exactly the output block under it.
* The README opens with the install + demo and test commands, and ``.ci/run`` runs that test
  command verbatim.
* Every glossary link of the README and the docs names an anchor ``docs/glossary.md`` has.
* The size of a 1,000-turn session's state quoted by the README and ``docs/sessions.md`` is what
  ``tests/sessions/test_state.py``'s conversation measures (the demo table: ``tests/demo``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions import SessionState
from telos_wrap.sessions.turns.turn import run_turn

from ..sessions.test_state import _long_conversation

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    return [(match[1], match[2]) for match in _BLOCK.finditer(README)]


def test_the_first_script_runs_as_pasted_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    blocks = _blocks()
    first = next(i for i, (language, _) in enumerate(blocks) if language == "python")
    script, (language, shown) = blocks[first][1], blocks[first + 1]
    assert language == "", "the script's output follows it"
    (tmp_path / "before_after.py").write_text(script, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TELOS_WRAP_"))}

    result = subprocess.run(
        [sys.executable, "before_after.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == shown
    assert result.stderr == ""
    before, after = (int(re.search(r"(\d+)%", line)[1]) for line in shown.splitlines())
    assert before == 100 and after < 50


def test_the_readme_opens_with_the_two_commands_ci_runs() -> None:
    commands = [line.strip() for line in README.splitlines()[:20] if line.startswith("    ")]
    assert commands == [
        "python -m pip install -e . && telos-wrap demo",
        "python -m pip install -e '.[test]' && python -m pytest -q",
    ]
    # .ci/run quiets pip (`pip install -q`), nothing else.
    assert commands[1].replace("pip install", "pip install -q") in (ROOT / ".ci" / "run").read_text()
    assert README.splitlines()[2].startswith("**"), "a one-line pitch under the title"


def test_every_glossary_link_has_its_anchor() -> None:
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', glossary))
    texts = [README, *(path.read_text(encoding="utf-8") for path in (ROOT / "docs").glob("*.md"))]
    linked = {anchor for text in texts for anchor in re.findall(r"glossary\.md#([\w-]+)", text)}
    assert linked, "the README links its terms to the glossary"
    assert linked <= anchors, sorted(linked - anchors)


def test_the_documented_state_size_is_measured() -> None:
    body = _long_conversation(1000)
    options = PrepareOptions(engine="anthropic", session_id="big")
    state = SessionState(session_id="big")
    for now in (1.0, 2.0):
        state = run_turn(state, "anthropic", body, options, pins={}, now=now).state
    measured_kb = len(state.dumps().encode()) / 1000
    sessions = (ROOT / "docs" / "sessions.md").read_text(encoding="utf-8")
    for text in (README, sessions):
        (quoted,) = re.findall(r"([\d.]+) KB", text[text.index("1,000-turn") :][:400])[:1]
        assert abs(float(quoted) - measured_kb) < 0.5, (quoted, measured_kb)
