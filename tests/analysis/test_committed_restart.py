"""The H100 sweep with each repeat on its own engine start (docs/results/h100/moe-warm-restart)
states what its commands print: ``scripts/h200/repeat_spread.py``'s spreads and conclusions
(the README holds its whole output) and ``crossover compare``'s counts against the grid and
the decision measured from the same YAML. A change to the analysis, the summaries or compare
that moves any of them fails here, and the README must be re-run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from crossover.report.compare import compare_paths
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "docs" / "results" / "h100"
RESTART = H100 / "moe-warm-restart"
FOLDERS = [
    f"docs/results/h100/{f}" for f in ("moe-warm-grid", "moe-warm-decide", "moe-warm-restart")
]


def _script() -> ModuleType:
    return load_script(ROOT / "scripts" / "h200" / "repeat_spread.py", "repeat_spread", True)


def _readme() -> str:
    return (RESTART / "README.md").read_text("utf-8")


def _flagged(cmp: Any) -> list[Any]:
    return [r for r in cmp.rows if r.change in ("better", "worse")]


def test_the_readme_holds_what_the_spread_script_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the README's command runs from the repository root
    args = [*FOLDERS, "--targets", "vllm,sglang", "--max-level", "64", "--tie-margin", "0.03"]
    assert _script().main(args) == 0
    out = capsys.readouterr().out
    assert out.strip() in _readme()
    # what the README's table and prose read from it
    assert "TTFT p50: vllm vs sglang: crossover vllm below / sglang above (1.0-27.9)" in out
    assert out.count("TTFT p50: vllm vs sglang: inconclusive") == 2


def test_restart_repeats_spread_wider_than_repeats_on_one_start(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert _script().main([*FOLDERS, "--max-level", "64"]) == 0
    out = capsys.readouterr().out
    medians: dict[str, dict[str, float]] = {}
    folder = ""
    for line in out.splitlines():
        if line.startswith("  docs/"):
            folder = line.strip().rsplit("/", 1)[-1]
        m = re.match(r"    (total tokens/s|TTFT p50|ITL p50)\s+([\d.]+)%", line)
        if m and folder:
            medians.setdefault(folder, {})[m[1]] = float(m[2])
    restart, grid = medians["moe-warm-restart"], medians["moe-warm-grid"]
    assert restart["total tokens/s"] > grid["total tokens/s"]
    assert restart["TTFT p50"] > grid["TTFT p50"]
    # yet a start moves throughput by well under the A/A pair's largest shift (4.4%)
    assert restart["total tokens/s"] < 1.0


def test_the_restart_sweep_records_a_start_per_repeat() -> None:
    sweep = json.loads((RESTART / "sweep.json").read_text("utf-8"))
    starts = [s["target"] for s in sweep["engine_starts"]]
    assert sorted(starts) == ["sglang", "sglang", "vllm", "vllm"]
    assert len(sweep["runs"]) == 28
    readme = _readme()
    for s in sweep["engine_starts"]:
        assert f"{s['ready_s']:.1f} s" in readme


def test_the_compare_counts_the_readme_states() -> None:
    grid = compare_paths(H100 / "moe-warm-grid", RESTART)
    assert len([r for r in grid.rows if r.ratio is not None]) == 42
    assert len(_flagged(grid)) == 3
    assert _flagged(compare_paths(H100 / "moe-warm-grid", RESTART, tie_rel=0.03)) == []

    decision = compare_paths(H100 / "moe-warm-decide", RESTART)
    assert len(_flagged(decision)) == 24
    assert len(_flagged(compare_paths(H100 / "moe-warm-decide", RESTART, tie_rel=0.03))) == 4
    readme = _readme()
    assert "| grid → this sweep | **3**" in readme and "| **0** |" in readme
    assert "| decision → this sweep | **24**" in readme and "| **4** (" in readme
