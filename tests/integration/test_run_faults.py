"""Each fault the problem codes name is reported with the right code and verdict,
and every request sent is recorded (none lost)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import TRANSPORT, calib, codes, problems, run_against

#: every fault on each transport: both must report the same
pytestmark = pytest.mark.usefixtures("each_transport")


def test_honest_server_is_valid(tmp_path: Path) -> None:
    out, store = run_against(calib(), tmp_path)
    s = out.summary
    assert s.verdict == "valid", s.problems
    assert s.requests.matched == 16
    assert s.load.transport == TRANSPORT[0]  # the summary names the client that sent them
    assert problems(out) == []
    assert len(store.records(out.run_id)) == s.requests.sent == 16


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("short_completion", "short_completion"),
        ("long_completion", "long_completion"),
        ("finish_reason", "finish_reason"),
        ("cut", "stream_truncated"),
        ("malformed_json", "malformed_event"),
        ("http_500:0.25", "http_error"),
        ("http_429:0.5", "http_error"),
    ],
)
def test_fault_makes_run_invalid_with_its_code(tmp_path: Path, fault: str, code: str) -> None:
    out, store = run_against(calib(fault), tmp_path)
    assert out.summary.verdict == "invalid"
    assert codes(out)[code] == "error"
    assert len(store.records(out.run_id)) == out.summary.requests.sent == 16


def test_reset_mid_stream(tmp_path: Path) -> None:
    out, _ = run_against(calib("reset"), tmp_path)
    assert out.summary.verdict == "invalid"
    assert {"stream_truncated", "connection_error"} & codes(out).keys()


def test_failures_within_the_allowed_budget(tmp_path: Path) -> None:
    out, _ = run_against(calib("http_500:0.25"), tmp_path, allowed_failures=4)
    assert out.summary.requests.failed == 4
    assert out.summary.verdict == "valid"
    assert codes(out)["http_error"] == "warning"


def test_usage_missing_is_unverified(tmp_path: Path) -> None:
    out, _ = run_against(calib("usage_missing"), tmp_path, text=False)
    assert out.summary.verdict == "unverified"
    assert "usage_missing" in codes(out)
    assert out.summary.tpot_ms.count == 0  # chunks are never counted as tokens


def test_usage_missing_counted_with_the_tokenizer_is_still_unverified(tmp_path: Path) -> None:
    out, store = run_against(calib("usage_missing"), tmp_path)
    s = out.summary
    assert s.verdict == "unverified"
    assert "counted with the tokenizer" in next(
        p.message for p in s.problems if p.code == "usage_missing"
    )
    assert s.tpot_ms.count == 16
    stored = store.records(out.run_id)
    assert {r.count_source for r in stored} == {"tokenizer"}
    assert {r.completion_tokens for r in stored} == {16}


def test_usage_mismatch(tmp_path: Path) -> None:
    out, _ = run_against(calib("usage_mismatch", usage_mismatch_delta=-3), tmp_path)
    assert out.summary.verdict == "invalid"
    assert "usage_mismatch" in codes(out)


def test_prompt_tokens_mismatch(tmp_path: Path) -> None:
    out, _ = run_against(calib("prompt_tokens_mismatch:0.5"), tmp_path, tokenizer=None)
    assert "prompt_tokens_mismatch" in codes(out) or out.summary.prompt_tokens.max != (
        out.summary.prompt_tokens.min
    )


def test_role_only_chunk_does_not_start_ttft(tmp_path: Path) -> None:
    out, _ = run_against(calib("role_chunk", role_chunk_delay_ms=40), tmp_path, endpoint="chat")
    s = out.summary
    assert s.verdict == "valid", s.problems
    assert s.ttft_ms.min is not None and s.ttft_ms.min >= 40


@pytest.mark.parametrize(("text", "engine_metrics"), [(True, True), (True, False), (False, True)])
def test_multi_token_chunks_confirmed_by_a_second_witness(
    tmp_path: Path, text: bool, engine_metrics: bool
) -> None:
    out, _ = run_against(
        calib(tokens_per_chunk=4, itl_ms=2.0), tmp_path, text=text, engine_metrics=engine_metrics
    )
    s = out.summary
    assert s.verdict == "valid", s.problems
    assert codes(out) == {"multi_token_chunks": "info"}
    assert s.chunk_gap_ms.p50 == pytest.approx(8.0, rel=0.25)
    assert s.itl_ms.p50 == pytest.approx(2.0, rel=0.25)


def test_multi_token_chunks_without_a_second_witness_are_unverified(tmp_path: Path) -> None:
    """usage > chunks could be several tokens per chunk, or usage over-reporting: with
    neither the text nor the engine's counter to tell, the run is not valid."""
    out, _ = run_against(
        calib(tokens_per_chunk=4, itl_ms=2.0), tmp_path, text=False, engine_metrics=False
    )
    assert out.summary.verdict == "unverified"
    assert codes(out) == {"multi_token_chunks": "warning"}


def test_stall_past_the_gap_timeout(tmp_path: Path) -> None:
    out, _ = run_against(calib("stall:0.25", stall_s=3.0), tmp_path, timeouts={"gap_s": 0.5})
    assert codes(out)["timeout"] == "error"
    assert out.summary.requests.failed == 4


def test_never_answer_hits_first_token_timeout(tmp_path: Path) -> None:
    out, _ = run_against(calib("never_answer:0.25"), tmp_path, timeouts={"first_token_s": 0.5})
    assert codes(out)["timeout"] == "error"
    assert out.summary.requests.failed == 4


def test_connection_close_after_every_response_is_survived(tmp_path: Path) -> None:
    out, _ = run_against(calib("connection_close"), tmp_path)
    assert out.summary.verdict == "valid", out.summary.problems


def test_split_events_with_crlf_and_comments(tmp_path: Path) -> None:
    out, _ = run_against(calib("split_events"), tmp_path)
    assert out.summary.verdict == "valid", out.summary.problems


def test_slow_headers_count_in_ttft(tmp_path: Path) -> None:
    out, _ = run_against(calib("slow_headers", slow_headers_s=0.2), tmp_path, requests=4)
    assert out.summary.verdict == "valid"
    assert out.summary.ttft_ms.min is not None and out.summary.ttft_ms.min >= 200


def test_open_loop_rate(tmp_path: Path) -> None:
    out, store = run_against(calib(), tmp_path, concurrency=None, rate_rps=50.0, requests=20)
    s = out.summary
    assert s.verdict == "valid"
    assert s.load.mode == "rate" and s.queue_ms.count == 20
    assert len(store.records(out.run_id)) == 20


def test_refused_connection(tmp_path: Path) -> None:
    import asyncio

    from crossover.config import RunConfig
    from crossover.measure import execute
    from crossover.records.store import Store

    store = Store(tmp_path / "r.db")
    cfg = RunConfig(
        url="http://127.0.0.1:9",
        model="m",
        engine="vllm",
        concurrency=2,
        requests=4,
        output_tokens=4,
        warmup_requests=0,
        transport=TRANSPORT[0],
    )
    out = asyncio.run(execute(cfg, store))
    assert out.summary.verdict == "invalid"
    assert codes(out)["connection_error"] == "error"
    assert len(store.records(out.run_id)) == 4


def test_honest_figures_match_the_configured_latencies(tmp_path: Path) -> None:
    """Server in its own process: TTFT and TPOT within a few percent of the truth."""
    import asyncio

    from crossover.calibration.server import spawn
    from crossover.config import RunConfig
    from crossover.measure import execute
    from crossover.records.store import Store

    cfg = calib(ttft_ms=30.0, itl_ms=10.0)
    with spawn(cfg) as url:
        run = RunConfig(
            url=url,
            model="calibration",
            engine="vllm",
            concurrency=4,
            requests=16,
            output_tokens=32,
            input_tokens=20,
            warmup_requests=4,
            transport=TRANSPORT[0],
        )
        out = asyncio.run(execute(run, Store(tmp_path / "r.db")))
    s = out.summary
    assert s.verdict == "valid"
    # never earlier than configured; later only by the loops' timer granularity (~1-3 ms)
    assert s.ttft_ms.min is not None and s.ttft_ms.min >= 29.5
    assert s.ttft_ms.p50 is not None and s.ttft_ms.p50 <= 30.0 * 1.15
    assert s.tpot_ms.p50 == pytest.approx(10.0, rel=0.03)
    assert s.itl_ms.mean == pytest.approx(10.0, rel=0.03)
    assert s.load.achieved_concurrency == pytest.approx(4.0, rel=0.05)
    # 4 streams, one token each per 10 ms: ~400 output tokens/s in the steady window
    assert s.throughput.output_tokens_per_s == pytest.approx(
        4 * 32 / (30 + 31 * 10) * 1000, rel=0.08
    )
