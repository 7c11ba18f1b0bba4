"""A live decision's lines and JSON name the levels it measured past an engine's KV
capacity (``crossover.analysis.kv``), for the question's targets."""

from __future__ import annotations

from pathlib import Path

from crossover.decide.live import LiveResult
from crossover.decide.model import Decision, Question
from crossover.decide.timing import live_json, live_lines
from crossover.report.load import load_sweep

GRID = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100" / "moe-warm-grid"


def _result(targets: tuple[str, ...]) -> tuple[LiveResult, Question]:
    q = Question(kind="crossover", targets=targets, levels=(1, 256, 512))
    decision = Decision(question=q, findings=(), confidence=0.95)
    return LiveResult(decision, [], {}, load_sweep(GRID), 0), q


def test_the_live_answer_names_the_full_kv_levels(tmp_path: Path) -> None:
    result, q = _result(("vllm", "sglang"))
    kv = [line for line in live_lines(result, q, tmp_path) if line.startswith("KV full")]
    assert kv == [
        "KV full: vllm at c=512 (repeats 0, 1): KV usage up to 1.00, up to 314 requests "
        "waiting: the engine's KV cache was full: requests waited for room, so TTFT there "
        "counts that wait",
        "KV full: sglang at c=256 (repeats 0, 1): KV usage up to 1.00, up to 115 requests "
        "waiting: the engine's KV cache was full: requests waited for room, so TTFT there "
        "counts that wait",
    ]
    data = live_json(result, q, tmp_path)
    rows = [(x["target"], x["level"], x["repeat"]) for x in data["kv_full"]]
    assert rows == [("vllm", 512, 0), ("vllm", 512, 1), ("sglang", 256, 0), ("sglang", 256, 1)]
    first = data["kv_full"][2]
    assert first["peak_usage"] == 1.0 and first["peak_waiting"] == 57.0
    assert first["usage_series"] == "sglang:token_usage"
    assert first["waiting_series"] == "sglang:num_queue_reqs"


def test_only_the_questions_targets(tmp_path: Path) -> None:
    result, q = _result(("vllm", "llamacpp-q8"))
    assert {x["target"] for x in live_json(result, q, tmp_path)["kv_full"]} == {"vllm"}
    result, q = _result(("llamacpp-q8", "calibration"))  # neither has a KV gauge
    assert live_json(result, q, tmp_path)["kv_full"] == []
    assert not any(line.startswith("KV full") for line in live_lines(result, q, tmp_path))
