"""Every ``$ crossover advise ...`` example in the README and docs/advise-plan.md is what the
command prints today: advise reads no GPU and measures nothing (profiles, formats and
models are committed data), so its output is exact, and a change to the estimates, caps
or wording that moves it fails here until the doc is re-run."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from crossover.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", ROOT / "docs" / "advise-plan.md")
PROMPT = "$ crossover advise "


def examples() -> list[tuple[str, str, list[str]]]:
    """(doc, command, the lines printed under it up to the code block's end)."""
    out = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for i, line in enumerate(lines):
            if not line.startswith(PROMPT):
                continue
            shown = []
            for after in lines[i + 1 :]:
                if after.startswith("```") or after.startswith("$ "):
                    break
                shown.append(after)
            out.append((doc.relative_to(ROOT).as_posix(), line[2:], shown))
    return out


def test_the_docs_hold_advise_examples() -> None:
    # the README's two-4090 MoE example and the plan doc's, at least
    assert len(examples()) >= 3


@pytest.mark.parametrize(("doc", "command", "shown"), examples(), ids=lambda v: str(v)[:60])
def test_an_advise_example_prints_what_its_doc_shows(
    doc: str, command: str, shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(shlex.split(command)[1:])
    printed = capsys.readouterr().out.rstrip("\n").splitlines()
    assert rc == 0, printed
    assert printed == shown, f"{doc}: re-run `{command}` and paste its output"
