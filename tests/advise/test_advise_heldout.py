"""Issue 39 item 8: the advisor's error on every committed H200 sweep it was not fitted to,
from one command, under 15% or named with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.advise import heldout

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs/results/h200"


@pytest.fixture(scope="module")
def report() -> heldout.HeldOut:
    return heldout.held_out(H200)


def test_every_held_out_sweep_is_checked(report: heldout.HeldOut) -> None:
    sweeps = {t.sweep for t in report.targets}
    # the MoE sweep, the prefix sweep, workload B and SGLang's target left out of the fit
    assert {"moe", "prefix", "vllm-b", "sglang-a"} <= sweeps
    fitted = {tuple(f.split(":")) for f in report.fitted_to}
    assert all((t.sweep, t.target) not in fitted for t in report.targets)
    assert ("sglang-a", "sglang-incremental") in {(t.sweep, t.target) for t in report.targets}
    # the prefix sweep is predicted with its shared prefix from the cache (vLLM and
    # SGLang within 5%; without the prefix term vLLM was 72% low at 64 streams)
    by = {(t.sweep, t.target): t for t in report.targets}
    assert by[("prefix", "vllm")].mean_abs_error_pct < 10
    assert by[("prefix", "vllm-nocache")].mean_abs_error_pct < 10


def test_under_the_limit_or_named_exactly(report: heldout.HeldOut) -> None:
    over = {(t.sweep, t.target) for t in report.targets if not t.within}
    assert over == set(heldout.EXCEPTIONS), (
        "the held-out targets over the limit must be exactly the named exceptions: "
        f"unexplained {sorted(over - set(heldout.EXCEPTIONS))}, "
        f"stale {sorted(set(heldout.EXCEPTIONS) - over)}"
    )
    assert not report.unexplained and not report.stale
    for t in report.targets:
        if t.within:
            assert t.mean_abs_error_pct <= heldout.LIMIT_PCT


def test_the_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "heldout.json"
    assert heldout.main(["--results-dir", str(H200), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "limit 15%" in text
    for sweep, target in heldout.EXCEPTIONS:
        line = next(x for x in text.splitlines() if x.split()[:2] == [sweep, target])
        assert "over: " in line
    data = json.loads(out.read_text())
    assert data["limit_pct"] == 15.0 and data["targets"]
    assert heldout.main(["--results-dir", str(tmp_path)]) == 2
    assert "no */sweep.json" in capsys.readouterr().err
