"""docs/decide.md's replay of the committed H200 MoE grid is what the command prints today
(the replay reads committed records only, so its output is exact): a change to the policy,
the analysis or the wording that moves it fails here until the doc is re-run."""

from __future__ import annotations

import lzma
import shlex
from pathlib import Path

import pytest

from crossover.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "decide.md"
COMMAND = "crossover decide --replay /tmp/moe.db --engine-logs docs/results/h200/moe/engines"


def shown() -> list[str]:
    """The lines the doc shows under the command, up to its code block's end."""
    lines = DOC.read_text().splitlines()
    at = lines.index(f"$ {COMMAND}")
    out: list[str] = []
    for line in lines[at + 1 :]:
        if line.startswith("```"):
            return out
        out.append(line)
    raise AssertionError("the example's code block never ends")


def test_the_moe_replay_prints_what_decide_md_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "moe.db"
    db.write_bytes(lzma.decompress((ROOT / "docs/results/h200/moe/sweep.db.xz").read_bytes()))
    monkeypatch.chdir(ROOT)  # the engine logs' path as the doc gives it
    args = [str(db) if a == "/tmp/moe.db" else a for a in shlex.split(COMMAND)[1:]]
    assert main(args) == 0
    printed = capsys.readouterr().out.replace(str(db), "/tmp/moe.db")
    assert printed.rstrip("\n").splitlines() == shown(), f"re-run `{COMMAND}` into docs/decide.md"
