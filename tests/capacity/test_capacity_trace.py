"""``crossover capacity --trace``: the search runs over the trace's speed factor, every
level replaying the trace from its first line (its lengths, blocks and times), against a
calibration server whose TTFT grows with the requests in flight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.calibration.server import build_config, spawn
from crossover.capacity.runner import CapacityConfig
from crossover.cli.app import main
from crossover.records.store import Store
from crossover.spec.slo import parse_slo
from crossover.workload.trace import read_trace

pytestmark = pytest.mark.slow


def _trace(path: Path) -> Path:
    """40 requests 200 ms apart (5 requests/s), three lengths in turn, two shared blocks."""
    rows = [
        {"timestamp": 200 * k, "input_length": 16 + 8 * (k % 3), "output_length": 4 + k % 3,
         "hash_ids": [k % 2]}
        for k in range(40)
    ]  # fmt: skip
    lines = [json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_trace_sets_the_lengths_the_start_and_the_speed_of_each_level(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.jsonl")
    cfg = CapacityConfig(url="http://127.0.0.1:1", model="m", trace=trace, slo=parse_slo("ttft_ms.p99=500"))  # type: ignore[call-arg]  # fmt: skip
    assert cfg.start_rps == pytest.approx(5.0)  # the trace's own rate: speed 1
    assert (cfg.output_tokens, cfg.input_tokens) == (5, 24)  # its mean lengths
    run = cfg.run_config(12.5, 0, level=3)
    assert run.trace_speed == pytest.approx(2.5) and run.rate_rps == pytest.approx(12.5)
    assert run.seed == 3  # the level's own texts: no cache left by the level before
    assert run.workload_shape()["trace"] == f"{trace} x2.5"
    with pytest.raises(ValueError, match="a trace sets every request's lengths"):
        CapacityConfig(url="http://127.0.0.1:1", model="m", trace=trace, shared_prefix="2x8", slo=parse_slo("ttft_ms.p99=500"))  # type: ignore[call-arg, arg-type]  # fmt: skip


def test_capacity_searches_the_traces_speed(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.jsonl")
    tr = read_trace(trace)
    out = tmp_path / "cap.json"
    with spawn(build_config(ttft_ms=10.0, ttft_per_stream_ms=40.0, itl_ms=10.0)) as url:
        rc = main(
            ["capacity", "--url", url, "--engine", "vllm", "--model", "calibration",
             "--trace", str(trace), "--trace-block-tokens", "8", "--slo", "ttft_ms.mean=66.8",
             "--precision", "0.5", "--duration-s-per-level", "3", "--warmup", "2",
             "--json", str(out), "--out", str(tmp_path / "db")]
        )  # fmt: skip
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["workload"]["arrivals"] == "trace"
    assert data["workload"]["trace"] == str(trace)
    assert data["workload"]["trace_block_tokens"] == "8"
    levels = data["levels"]
    assert levels[0]["rate_rps"] == pytest.approx(5.0)  # the trace as recorded first
    for lv in levels:
        assert lv["trace_speed"] == pytest.approx(lv["rate_rps"] / 5.0)
        assert lv["summary"]["workload"]["shape"]["trace"] == f"{trace} x{lv['trace_speed']:g}"
    # past 1 / 40 ms = 25 requests/s the server's queue grows without bound
    assert data["verdict"] == "found"
    lo, hi = data["interval"]
    assert 5.0 <= lo < hi <= 40.0
    with Store(tmp_path / "db" / "capacity.db") as store:
        for lv in levels[:2]:
            recs = sorted(store.records(lv["run_id"], include_warmup=False), key=lambda r: r.index)
            assert len(recs) >= 14
            # request i is line i of the trace at line i's time, at this level's speed
            lines = [tr.requests[i % 40] for i in range(len(recs))]
            assert [r.expected_output_tokens for r in recs] == [t.output_length for t in lines]
            assert [r.expected_prompt_tokens for r in recs] == [t.input_length for t in lines]
            assert all(r.completion_tokens == r.expected_output_tokens for r in recs if r.ok)
            t0 = recs[0].t_scheduled_ns or 0
            want = tr.offsets_ns(lv["trace_speed"])
            assert [(r.t_scheduled_ns or 0) - t0 for r in recs[:40]] == want[: min(40, len(recs))]


SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "trace-sample.jsonl"


def test_mixed_lengths_a_batched_server_sustains_are_not_called_overloaded(
    tmp_path: Path,
) -> None:
    """The sample trace (17- to 386-token replies) at 14.6 requests/s against a batched
    server (every request served at once, 6 ms a token plus 0.05 ms for each other in
    flight: about 21 in flight, no queue) was stopped as overloaded after 1.8 s: the
    in-flight count climbs until the longest reply (2.7 s) has had time to finish, and
    the detector judged from the first completion. It now waits that ramp out."""
    out = tmp_path / "cap.json"
    rate = 14.6
    with spawn(build_config(ttft_ms=40.0, itl_ms=6.0, itl_per_stream_ms=0.05)) as url:
        rc = main(
            ["capacity", "--url", url, "--engine", "vllm", "--model", "calibration",
             "--trace", str(SAMPLE), "--slo", "ttft_ms.p99=5000", "--start-rate", str(rate),
             "--max-rate", str(rate), "--duration-s-per-level", "7", "--warmup", "0",
             "--json", str(out), "--out", str(tmp_path / "db")]
        )  # fmt: skip
    assert rc == 0
    data = json.loads(out.read_text())
    level = data["levels"][0]
    assert level["rate_rps"] == pytest.approx(rate)
    assert not level["overloaded"], level["summary"]["problems"]
    assert level["met"] and data["verdict"] == "above_max_rate"
    assert len(data["levels"]) == 1
    # the level ran out its time (not stopped early) and served what arrived
    assert level["seconds"] >= 7
    counts = level["summary"]["requests"]
    assert counts["failed"] == 0 and counts["succeeded"] >= 0.8 * rate * 7
