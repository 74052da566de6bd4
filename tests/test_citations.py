"""Comments cite the project's own docs, and every ``docs/vendor-facts.md §N`` they cite exists.

The facts the code relies on live in ``docs/`` (the brief's rule: nothing outside the repository is
shipped, so a comment pointing there points at nothing for a reader of the package).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = re.compile(r"vendor-cache-rules|peers-patching|aesthetics\.md|shared/reference|/work/shared")
CITED = re.compile(r"§(\d+(?:\.\d+)?)")


def _sources() -> list[Path]:
    files = [*ROOT.glob("src/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/**/*.py")]
    files += [*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "CONTRIBUTING.md"]
    return [path for path in files if path.is_file() and path != Path(__file__).resolve()]


def test_nothing_cites_a_file_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not found, f"cite docs/ instead of a file outside the repository: {found}"


def test_every_cited_vendor_fact_section_exists() -> None:
    facts = (ROOT / "docs/vendor-facts.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,3} §(\d+(?:\.\d+)?) ", facts, re.M))
    cited: dict[str, str] = {}
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        if "vendor-facts" not in text or path.name == "vendor-facts.md":
            continue
        for section in CITED.findall(text):
            cited.setdefault(section, str(path.relative_to(ROOT)))
    assert cited, "no module cites docs/vendor-facts.md"
    missing = {section: where for section, where in cited.items() if section not in headings}
    assert not missing, f"sections cited but not in docs/vendor-facts.md: {missing}"
