"""A start rate above ``--max-rate`` is refused with one line and exit 2, never clamped:
given, defaulted (1 request/s) or a trace's own rate alike."""

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


def test_the_default_start_above_the_maximum_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = _refusal(["--output-tokens", "4", "--max-rate", "0.5"], capsys)
    assert "the default start rate 1 is above the maximum rate 0.5" in line


def test_a_traces_own_rate_above_the_maximum_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"timestamp": 200 * k, "input_length": 16, "output_length": 4} for k in range(40)]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = _refusal(["--trace", str(trace), "--max-rate", "2"], capsys)
    assert "the default start rate (the trace's own) 5 is above the maximum rate 2" in line


def test_a_start_at_the_maximum_is_accepted() -> None:
    from crossover.capacity.runner import CapacityConfig
    from crossover.spec.slo import parse_slo

    cfg = CapacityConfig(url="http://127.0.0.1:9", model="m", output_tokens=4, slo=parse_slo("ttft_ms.p99=500"), start_rps=2, max_rps=2)  # type: ignore[call-arg]  # fmt: skip
    assert cfg.start_rps == cfg.max_rps == 2
