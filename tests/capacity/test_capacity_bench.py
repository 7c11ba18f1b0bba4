"""``bench/capacity_search.py``, the script the README cites for the search against a grid:
it imports against the current package and its closed-form capacity is the committed one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_capacity_search_bench_imports_and_knows_the_committed_truth() -> None:
    module = load_script(ROOT / "bench" / "capacity_search.py", "capacity_search")
    committed = json.loads((ROOT / "docs/results/capacity_search.json").read_text())
    slo_ms = float(committed["slo"].split("<=")[1])
    assert round(module.truth_rps(slo_ms), 3) == committed["truth_rps"]
