"""``crossover sweep --tie-margin M``: the sweep runner reads every level with the margin
(its crossovers in sweep.json, the findings it prints, ``--refine``'s levels), records it
in sweep.db and sweep.json, and a resume without the flag keeps it; ``--tie-margin 0``
takes it back. Two calibration servers whose token gaps are 2% apart: level at 3%."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.analysis import SweepFile, analyze_sweep
from crossover.analysis.crossovers import findings_to_schema
from crossover.cli.app import main
from crossover.records.store import Store

from .conftest import Linear, servers, target_flags

pytestmark = pytest.mark.slow

A = Linear(a_ms=5.0, b_ms=0.0, ttft_ms=5.0)
B = Linear(a_ms=5.1, b_ms=0.0, ttft_ms=5.0)


def _argv(urls: list[str], out: Path, *more: str) -> list[str]:
    return [
        "sweep", *target_flags({"A": urls[0], "B": urls[1]}), "--concurrency", "1,2",
        "--repeats", "2", "--output-tokens", "8", "--input-tokens", "16",
        "--duration-s-per-level", "0.3", "--warmup", "0", "--out", str(out), "--no-report",
        *more,
    ]  # fmt: skip


def _read(out: Path) -> SweepFile:
    return SweepFile.read(out / "sweep.json")


def _read_with(sweep: SweepFile, tie_rel: float) -> tuple[list[object], list[object]]:
    xs, inc = findings_to_schema(analyze_sweep(sweep, tie_rel=tie_rel))
    return list(xs), list(inc)


def test_the_margin_is_the_sweeps_own_and_kept_on_resume(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    with servers(A, B) as urls:
        assert main(_argv(urls, out, "--tie-margin", "0.03")) == 0
        sweep = _read(out)
        assert sweep.tie_margin == 0.03
        # what sweep.json keeps is the runner's own reading with the margin
        assert (list(sweep.crossovers), list(sweep.inconclusive)) == _read_with(sweep, 0.03)
        store = Store(out / "sweep.db")
        try:
            assert store.get_meta("tie_margin") == 0.03
        finally:
            store.close()
        # resumed without the flag (every level done): read as it was measured
        assert main(_argv(urls, out)) == 0
        again = _read(out)
        assert again.tie_margin == 0.03
        assert (list(again.crossovers), list(again.inconclusive)) == _read_with(again, 0.03)
        # --tie-margin 0 takes it back: no margin recorded, the plain reading
        assert main(_argv(urls, out, "--tie-margin", "0")) == 0
        plain = _read(out)
        assert plain.tie_margin is None
        assert (list(plain.crossovers), list(plain.inconclusive)) == _read_with(plain, 0.0)
