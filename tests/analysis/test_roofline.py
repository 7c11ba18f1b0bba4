from __future__ import annotations

from typing import Any

import pytest

from crossover.analysis import RooflineFacts, SweepFile, check_roofline, check_sweep
from crossover.analysis.roofline import bytes_per_token, decode_bound_tokens_per_s

from .synthetic_servers import summary


def _run(
    target: str, tpot: float | None, c: int = 1, verdict: str = "valid", **extra: Any
) -> dict[str, Any]:
    s = summary(verdict, tpot_ms=tpot, output=150.0, concurrency=c, **extra)
    return {"target": target, "concurrency": c, "summary": s}


def test_worked_example_from_gpu_recipes() -> None:
    # 16.07 GB of weights at a 4.3 TB/s copy rate: 3.7 ms; llama.cpp's 5.3 ms is ~70%
    bound = decode_bound_tokens_per_s(4300.0, bytes_per_token(16.07e9))
    assert 1000.0 / bound == pytest.approx(3.737, abs=0.001)
    sweep = SweepFile.model_validate(
        {
            "runs": [_run("llamacpp", 5.3)],
            "roofline": {"target": "llamacpp", "model_bytes": 16.07e9, "bandwidth_gb_s": 4300.0},
        }
    )
    (check,) = check_sweep(sweep)
    assert check.status == "ok"
    assert check.fraction == pytest.approx(0.705, abs=0.002)
    assert check.measured_from == "1/TPOT p50"
    assert "71% of roofline" in check.describe()


def test_kv_cache_adds_to_bytes_read() -> None:
    assert bytes_per_token(1e9, 1e5, 2000) == pytest.approx(1.2e9)


def test_far_below_names_cuda_graphs_from_settings() -> None:
    facts = RooflineFacts(target="trt", model_bytes=8e9, bandwidth_gb_s=3350.0)
    runs = SweepFile.model_validate({"runs": [_run("trt", 12.6)]}).runs  # bound is 2.39 ms
    check = check_roofline(facts, runs, {"cuda_graphs": False})
    assert check.status == "far_below"
    assert check.fraction == pytest.approx(0.19, abs=0.01)
    assert check.causes[0].startswith("CUDA graphs are off")
    assert "far below" in check.describe()
    generic = check_roofline(facts, runs, {})
    assert "CUDA graphs off" in generic.causes
    # graphs known to be on (transformers serve --cb-use-cuda-graph at 11% of roofline):
    # not among the suspects; the host's per-step work is
    graphs_on = check_roofline(facts, runs, {"cuda_graphs": True})
    assert graphs_on.status == "far_below"
    assert not any("graphs" in c.lower() for c in graphs_on.causes), graphs_on.causes
    assert any(c.startswith("host work per decode step") for c in graphs_on.causes)


def test_client_floor_problem_is_named() -> None:
    facts = RooflineFacts(target="t", model_bytes=8e9, bandwidth_gb_s=3350.0)
    runs = SweepFile.model_validate(
        {
            "runs": [
                _run(
                    "t",
                    12.6,
                    problems=[
                        {"code": "client_floor", "severity": "warning", "count": 1, "message": "x"}
                    ],
                )
            ]
        }
    ).runs
    assert any("client_floor" in c for c in check_roofline(facts, runs).causes)


def test_invalid_runs_and_other_levels_are_ignored() -> None:
    facts = RooflineFacts(target="t", model_bytes=8e9, bandwidth_gb_s=3350.0)
    runs = SweepFile.model_validate(
        {"runs": [_run("t", 3.0, verdict="invalid"), _run("t", 3.0, c=2)]}
    ).runs
    check = check_roofline(facts, runs)
    assert check.status == "no_data"
    assert "no valid decode figure" in check.describe()


def test_falls_back_to_output_tokens_and_flags_above_bound() -> None:
    facts = RooflineFacts(target="t", model_bytes=1e9, bandwidth_gb_s=100.0)  # 100 tok/s bound
    runs = SweepFile.model_validate({"runs": [_run("t", None)]}).runs
    check = check_roofline(facts, runs)
    assert check.measured_from == "output tokens/s"
    assert check.status == "above_bound"
