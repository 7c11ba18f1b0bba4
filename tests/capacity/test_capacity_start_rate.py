"""A start rate above ``--max-rate`` (or below ``--min-rate``) is refused with one line
and exit 2, never clamped: a default beyond it starts at it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.cli.app import main

BASE = ["capacity", "--url", "http://127.0.0.1:9", "--model", "m", "--slo", "ttft_ms.p99=500"]


def _refusal(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*BASE, *args]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1, captured.err
    return lines[0]


def test_a_start_rate_above_the_maximum_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refusal(["--output-tokens", "4", "--start-rate", "4", "--max-rate", "1"], capsys)
    assert line == "error: the start rate 4 is above the maximum rate 1: give a start rate at or below it"  # fmt: skip


def test_a_default_start_above_the_maximum_starts_at_it(tmp_path: Path) -> None:
    """Only a start the user gave is refused: the default (1 request/s, or a trace's own
    rate) under a lower --max-rate starts the search at that maximum."""
    from crossover.capacity.runner import CapacityConfig
    from crossover.spec.slo import parse_slo

    slo = parse_slo("ttft_ms.p99=500")
    cfg = CapacityConfig(url="http://127.0.0.1:9", model="m", output_tokens=4, slo=slo, max_rps=0.5)  # type: ignore[call-arg]  # fmt: skip
    assert cfg.start_rps == 0.5
    rows = [{"timestamp": 200 * k, "input_length": 16, "output_length": 4} for k in range(40)]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = CapacityConfig(url="http://127.0.0.1:9", model="m", trace=trace, slo=slo, max_rps=2)  # type: ignore[call-arg]  # fmt: skip
    assert cfg.start_rps == 2


def test_a_start_at_the_maximum_is_accepted() -> None:
    from crossover.capacity.runner import CapacityConfig
    from crossover.spec.slo import parse_slo

    cfg = CapacityConfig(url="http://127.0.0.1:9", model="m", output_tokens=4, slo=parse_slo("ttft_ms.p99=500"), start_rps=2, max_rps=2)  # type: ignore[call-arg]  # fmt: skip
    assert cfg.start_rps == cfg.max_rps == 2


def test_a_start_rate_below_the_minimum_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refusal(["--output-tokens", "4", "--start-rate", "0.1", "--min-rate", "0.5"], capsys)
    assert line == "error: the start rate 0.1 is below the minimum rate 0.5: give a start rate at or above it"  # fmt: skip


def test_a_default_start_below_the_minimum_starts_at_it() -> None:
    from crossover.capacity.runner import CapacityConfig
    from crossover.spec.slo import parse_slo

    cfg = CapacityConfig(url="http://127.0.0.1:9", model="m", output_tokens=4, slo=parse_slo("ttft_ms.p99=500"), min_rps=3)  # type: ignore[call-arg]  # fmt: skip
    assert cfg.start_rps == 3


def test_a_level_lasts_long_enough_for_its_arrivals() -> None:
    """--duration-s-per-level is a floor: at a rate too low for a few arrivals in it the
    level runs MIN_LEVEL_ARRIVALS arrivals' time (at 0.05/s, 160 s instead of an empty 10 s)."""
    from crossover.capacity.runner import MIN_LEVEL_ARRIVALS, CapacityConfig
    from crossover.spec.slo import parse_slo

    cfg = CapacityConfig(url="http://127.0.0.1:9", model="m", output_tokens=4, slo=parse_slo("ttft_ms.p99=500"))  # type: ignore[call-arg]  # fmt: skip
    assert cfg.level_seconds(2.0) == cfg.duration_s_per_level == 10.0
    assert cfg.level_seconds(0.05) == MIN_LEVEL_ARRIVALS / 0.05 == 160.0
    assert cfg.run_config(0.05, 0).duration_s == 160.0
    assert cfg.run_config(2.0, 0).duration_s == 10.0
