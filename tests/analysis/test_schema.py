from __future__ import annotations

import json
from pathlib import Path

from crossover.analysis.schema import SweepFile, SweepRun, summary_value

from .synthetic_servers import summary


def test_minimal_contract_file_round_trips(tmp_path: Path) -> None:
    raw = {
        "schema": "crossover.sweep/1",
        "runs": [{"target": "A", "concurrency": 4, "repeat": 0, "summary": summary()}],
        "crossovers": [
            {
                "metric": "total_tokens_per_s",
                "below": "A",
                "above": "B",
                "concurrency": 12.4,
                "interval": [10.8, 14.1],
            }
        ],
    }
    sweep = SweepFile.model_validate(raw)
    path = tmp_path / "sweep.json"
    sweep.write(path)
    back = json.loads(path.read_text())
    assert back["schema"] == "crossover.sweep/1"
    assert back["crossovers"][0]["interval"] == [10.8, 14.1]
    assert back["runs"][0]["summary"]["schema"] == "crossover.run/1"
    assert back["runs"][0]["summary"]["verdict"] == "valid"
    assert SweepFile.read(path) == sweep
    assert not list(tmp_path.glob("*.tmp"))


def test_optional_parts_and_single_roofline_object() -> None:
    sweep = SweepFile.model_validate(
        {
            "schema": "crossover.sweep/1",
            "targets": [{"name": "B", "engine": "vllm", "settings": {"enforce_eager": True}}],
            "runs": [
                {
                    "target": "A",
                    "concurrency": 1,
                    "summary": summary("invalid"),
                    "gpu": [{"t_s": 0.5, "util_pct": 90.0}],
                    "server_metrics": [{"t_s": 0.5, "values": {"vllm:num_requests_running": 1}}],
                },
            ],
            "roofline": {"target": "B", "model_bytes": 1e9, "bandwidth_gb_s": 100},
        }
    )
    assert sweep.target_names() == ["B", "A"]
    assert sweep.roofline[0].target == "B"
    run = sweep.runs[0]
    assert run.repeat == 0
    assert run.verdict == "invalid"
    assert not run.is_valid


def test_summary_value_is_none_for_missing_or_non_numbers() -> None:
    s = {"ttft_ms": {"p50": 12, "p99": None, "p90": "fast", "p95": True}, "x": 3}
    assert summary_value(s, "ttft_ms.p50") == 12.0
    assert summary_value(s, "ttft_ms.p99") is None
    assert summary_value(s, "ttft_ms.p90") is None
    assert summary_value(s, "ttft_ms.p95") is None
    assert summary_value(s, "itl_ms.p50") is None
    assert summary_value(s, "x.y") is None
    problem = {"code": "timeout", "severity": "error", "count": 2, "message": "m"}
    run = SweepRun.model_validate(
        {"target": "a", "concurrency": 1, "summary": summary(problems=[problem], total=5.0)}
    )
    assert run.problems[0].code == "timeout"
    assert run.engine.name == "test"
    assert run.value("throughput.total_tokens_per_s") == 5.0
    assert run.value("throughput.nope") is None
    assert run.value("ttft_ms.p50") is None
