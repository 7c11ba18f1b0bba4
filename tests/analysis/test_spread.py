"""A sweep's repeat spread (``crossover.analysis.spread``) and the report's section on it:
the committed H100 grid (repeats back to back on one engine start) against the same YAML
with each repeat on its own start (docs/results/h100/moe-warm-restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.analysis.schema import SweepFile
from crossover.analysis.spread import level_spreads, own_starts, repeat_spreads
from crossover.report import load_sweep, write_report

H100 = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100"


def test_the_restart_sweep_spreads_as_its_readme_says() -> None:
    sweep = load_sweep(H100 / "moe-warm-restart")
    assert own_starts(sweep)
    by = {x.metric: x for x in repeat_spreads(sweep)}
    assert list(by) == ["total_tokens_per_s", "ttft_ms.p50", "itl_ms.p50"]
    tps = by["total_tokens_per_s"]
    assert tps.levels == 14 and tps.median == pytest.approx(0.003, abs=0.0005)
    assert (tps.where(), round(100 * tps.largest, 1)) == ("vllm c=8", 1.8)
    assert by["ttft_ms.p50"].median == pytest.approx(0.068, abs=0.0005)


def test_one_start_spreads_less_than_own_starts_on_the_same_levels() -> None:
    grid = load_sweep(H100 / "moe-warm-grid")
    assert not own_starts(grid)
    restart = load_sweep(H100 / "moe-warm-restart")

    def median(sweep: SweepFile, metric: str) -> float:
        found = [x for x, t, c in level_spreads(sweep, metric) if t != "llamacpp-q8" and c <= 64]
        return sorted(found)[len(found) // 2]

    for metric in ("total_tokens_per_s", "ttft_ms.p50"):
        assert median(grid, metric) < median(restart, metric)


def test_a_level_measured_once_has_no_spread() -> None:
    sweep = load_sweep(H100 / "moe-warm-restart")
    once = sweep.model_copy(update={"runs": [r for r in sweep.runs if r.repeat == 0]})
    assert repeat_spreads(once) == []
    assert level_spreads(once, "total_tokens_per_s") == []


def test_the_report_shows_the_spread_and_what_it_holds(tmp_path: Path) -> None:
    restart = write_report(
        H100 / "moe-warm-restart",
        load_sweep(H100 / "moe-warm-restart"),
        tmp_path / "restart.html",
    ).read_text()
    assert '<h2 id="repeat-spread">Repeat spread</h2>' in restart
    assert "Each repeat was measured on its own engine start" in restart
    assert '1.8% <span class="muted">(vllm c=8)</span>' in restart
    grid = write_report(
        H100 / "moe-warm-grid", load_sweep(H100 / "moe-warm-grid"), tmp_path / "grid.html"
    ).read_text()
    assert "ran back to back on one engine start" in grid
    assert "Each repeat was measured on its own engine start" not in grid
