"""What a replayed engine start costs, per target: the user's figure, else the starts the
database timed, else the target's engine logs read back, else the estimate (said so)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crossover.analysis.schema import EngineStart
from crossover.decide.starts import START_S, estimated_start, start_costs
from crossover.engines import registry
from crossover.errors import UsageError

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def _logs(tmp_path: Path) -> Path:
    d = tmp_path / "engines"
    d.mkdir()
    shutil.copy(LOGS / "vllm-0.26-h200-vllm.log", d / "vllm.log")  # ready after 96 s
    # an earlier start of the same target, kept under its time; a replica's log is not it
    shutil.copy(LOGS / "vllm-0.26-h200-vllm-fp8.log", d / "vllm.20261201T101010.log")  # 103 s
    shutil.copy(LOGS / "vllm-0.26-h200-vllm-eager.log", d / "vllm-r1.log")
    shutil.copy(LOGS / "llama-server-cpu-gemma3-270m.log", d / "cpu.log")
    return d


def test_each_source_in_its_order(tmp_path: Path) -> None:
    recorded = [
        EngineStart(target="cpu", started_at="2026-12-05T08:00:00+00:00", ready_s=2.0, stop_s=0.5),
        EngineStart(target="cpu", started_at="2026-12-05T08:10:00+00:00", ready_s=4.0),
    ]
    costs = start_costs(["vllm", "cpu", "other"], recorded, _logs(tmp_path))
    # the database first: (2 + 0.5 + 4) / 2, one without its stop said so
    assert costs["cpu"].seconds == pytest.approx(3.25) and costs["cpu"].measured == 2
    assert "1 without its stop" in costs["cpu"].source
    # the logs next: the target's own two (not its replica's), mean of 96 and 103
    assert costs["vllm"].seconds == pytest.approx(99.5) and costs["vllm"].measured == 2
    assert "2 logs in" in costs["vllm"].source
    # nothing measured: the estimate
    assert costs["other"].seconds == START_S and costs["other"].measured == 0
    assert "estimated" in costs["other"].source
    # the user's figure over everything
    assert {c.seconds for c in start_costs(["vllm", "cpu"], recorded, None, 30.0).values()} == {
        30.0
    }


def test_nothing_measured_is_estimated_per_engine(tmp_path: Path) -> None:
    """Where neither the database nor a log times a start, its engine's median start in
    this project's results stands in, named as an estimate; an engine without one 105 s."""
    costs = start_costs(
        ["q8", "v", "x"], [], None, engines={"q8": "llamacpp", "v": "vllm", "x": "trtllm"}
    )
    assert costs["q8"].seconds == 4.0  # llama.cpp's measured_starts
    assert costs["q8"].source.startswith("estimated: the median of the 23 llama-server starts")
    assert costs["v"].seconds == 107.0
    assert (costs["x"].seconds, costs["x"].measured) == (START_S, 0)
    assert estimated_start(None).seconds == START_S


def test_the_per_engine_estimates_are_the_committed_logs(tmp_path: Path) -> None:
    """Each engine spec's ``measured_starts`` says what the engine logs under docs/results
    show (read again here: each figure from starts that are there, its median within 10%
    of theirs)."""
    from crossover.engines.effective import log_ready, read_log

    results = Path(__file__).parents[2] / "docs" / "results"
    found: dict[str, list[float]] = {}
    for path in sorted(results.rglob("engines/*.log*")):
        engine, ready = log_ready(read_log(path))
        if engine is not None and ready is not None:
            found.setdefault(str(engine), []).append(ready.seconds)
    measured = {n: s for n in registry.names() if (s := registry.get(n).measured_starts)}
    assert set(measured) == {"vllm", "sglang", "llamacpp"}
    for engine, e in measured.items():
        xs = sorted(found[engine])
        mid = (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2
        assert e.count <= len(xs), engine
        assert min(xs) - 0.5 <= e.low_s <= e.median_s <= e.high_s <= max(xs) + 0.5, engine
        assert abs(e.median_s - mid) <= 0.1 * mid, (engine, mid)


def test_a_missing_logs_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--engine-logs .*: no such folder"):
        start_costs(["vllm"], [], tmp_path / "nowhere")
