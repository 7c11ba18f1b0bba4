"""``capacity`` takes the workload shapes too: each level's runs draw the same lengths."""

from __future__ import annotations

from pathlib import Path

from crossover.capacity.runner import CapacityConfig
from crossover.spec.slo import parse_slo


def test_capacity_levels_carry_the_shape() -> None:
    cfg = CapacityConfig(
        url="http://127.0.0.1:1", model="m", output_tokens="lognormal:64,32,8-256",  # type: ignore[arg-type]
        input_tokens="uniform:32-512", shared_prefix="2x1024",  # type: ignore[arg-type]
        slo=parse_slo("ttft_ms.p99=500"),
    )  # fmt: skip
    assert (cfg.output_tokens, cfg.input_tokens) == (64, 272)
    run = cfg.run_config(4.0, 0)
    assert run.rate_rps == 4.0
    assert run.workload_shape() == {
        "input_lengths": "uniform:32-512",
        "output_lengths": "lognormal:64,32,8-256",
        "shared_prefix": "2x1024",
    }


def test_the_capacity_command_takes_length_distributions(tmp_path: Path) -> None:
    """``crossover capacity --output-tokens uniform:2-6`` as ``run`` and ``sweep`` take it
    (it was an integer option: "Input should be a valid integer")."""
    import json

    from crossover.calibration.config import CalibrationConfig
    from crossover.calibration.server import spawn
    from crossover.cli.app import main

    out = tmp_path / "cap.json"
    with spawn(CalibrationConfig(ttft_ms=1.0, itl_ms=1.0)) as url:
        rc = main(["capacity", "--url", url, "--model", "calibration", "--engine", "vllm",
                   "--output-tokens", "uniform:2-6", "--input-tokens", "uniform:8-16",
                   "--slo", "ttft_ms.p99=5000", "--start-rate", "4", "--max-rate", "4",
                   "--duration-s-per-level", "1", "--warmup", "0", "--json", str(out)])  # fmt: skip
    assert rc == 0
    workload = json.loads(out.read_text())["workload"]
    assert workload["output_lengths"] == "uniform:2-6"
    assert workload["input_lengths"] == "uniform:8-16"
