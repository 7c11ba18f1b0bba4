"""``bench/capacity_search.py``, the script the README cites for the search against a grid:
it imports against the current package and its closed-form capacity is the committed one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_capacity_search_bench_imports_and_knows_the_committed_truth() -> None:
    spec = importlib.util.spec_from_file_location(
        "capacity_search", ROOT / "bench" / "capacity_search.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads((ROOT / "docs/results/capacity_search.json").read_text())
    slo_ms = float(committed["slo"].split("<=")[1])
    assert round(module.truth_rps(slo_ms), 3) == committed["truth_rps"]
