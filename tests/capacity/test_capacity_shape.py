"""``capacity`` takes the workload shapes too: each level's runs draw the same lengths."""

from __future__ import annotations

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
