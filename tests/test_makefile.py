"""``make lint`` covers every folder of the repository that holds Python: a folder left
out of its ruff lines is a folder no check ever reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: folders of Python that are not the project's (beside the hidden ones): build trees
NOT_OURS = {"build", "dist"}


def _recipe(target: str) -> list[str]:
    """The command lines of ``target``'s rule, its variables expanded."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    variables = dict(re.findall(r"^(\w+)\s*:?=\s*(.*)$", text, re.MULTILINE))
    rule = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.MULTILINE)
    assert rule is not None, f"no {target} rule in the Makefile"
    lines = [ln.strip() for ln in rule.group(1).splitlines()]
    for _ in range(3):  # variables naming variables
        lines = [re.sub(r"\$\((\w+)\)", lambda m: variables.get(m[1], m[0]), ln) for ln in lines]
    return lines


def test_lint_reads_every_folder_of_python() -> None:
    folders = {
        d.name
        for d in ROOT.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")  # .venv, .git, caches
        and d.name not in NOT_OURS
        and next(d.rglob("*.py"), None) is not None
    }
    assert {"src", "tests", "bench", "scripts"} <= folders
    lines = _recipe("lint")
    for command in ("ruff check", "ruff format --check"):
        line = next((ln for ln in lines if f"/{command} " in ln), None)
        assert line is not None, (command, lines)
        assert folders <= set(line.split()), (command, sorted(folders - set(line.split())))
