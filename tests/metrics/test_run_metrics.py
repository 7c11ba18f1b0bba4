"""Run metrics, steady window, verification and verdict on hand-made records."""

from __future__ import annotations

import pytest

from crossover.metrics.run import RunContext, stats, summarize
from crossover.metrics.summary import ClientFloor, EngineInfo
from crossover.metrics.window import steady_window
from crossover.records.model import RequestRecord

MS = 1_000_000
S = 1_000_000_000


def ctx(**kw: object) -> RunContext:
    base: dict[str, object] = {
        "mode": "concurrency",
        "concurrency": 2,
        "output_tokens": 3,
        "endpoint": "completions",
        "engine": EngineInfo(name="x", url="http://h", model="m"),
        "started_at": "now",
        "input_tokens": 10,
    }
    base.update(kw)
    return RunContext.model_validate(base)


def good(
    index: int, send_s: float, first_s: float, gap_s: float, n: int = 3, **kw: object
) -> RequestRecord:
    arrivals = [int((first_s + i * gap_s) * S) for i in range(n)]
    base: dict[str, object] = {
        "index": index,
        "expected_output_tokens": 3,  # what ctx() asked for; n is what came
        "expected_prompt_tokens": 10,
        "t_send_ns": int(send_s * S),
        "t_first_ns": arrivals[0],
        "t_last_ns": arrivals[-1],
        "t_done_ns": arrivals[-1] + 1,
        "chunk_arrival_ns": arrivals,
        "chunk_chars": [1] * n,
        "completion_tokens": n,
        "prompt_tokens": 11,
        "count_source": "usage",
        "finish_reason": "length",
        "saw_done": True,
    }
    base.update(kw)
    return RequestRecord.model_validate(base)


def test_window_is_where_target_concurrency_is_in_flight() -> None:
    # A: 0..4 s, B: 1..5 s, C: 5.5..7 s. Two in flight from 1 s to 4 s.
    recs = [
        good(0, 0, 1, 1.5),  # tokens 1, 2.5, 4 ; done 4 s
        good(1, 1, 2, 1.5),  # tokens 2, 3.5, 5 ; done 5 s
        good(2, 5.5, 6, 0.5),  # tokens 6, 6.5, 7
    ]
    w = steady_window(recs, 2)
    assert w is not None and w.steady
    assert w.start_ns == 1 * S
    assert w.end_ns == pytest.approx(4 * S, abs=2)
    assert w.achieved_concurrency == pytest.approx(2.0, abs=1e-6)
    s = summarize(recs, ctx())
    # in [1, 4] s: output tokens at 1, 2.5, 2, 3.5, (4 is A's last, at 4 s: inside) = 5
    # prompt tokens: A's first token at 1 s (inside) and B's at 2 s: 22
    assert s.window.duration_s == pytest.approx(3.0)
    assert s.throughput.output_tokens_per_s == pytest.approx(5 / 3)
    assert s.throughput.total_tokens_per_s == pytest.approx((5 + 22) / 3)
    assert s.throughput.requests_per_s == pytest.approx(1 / 3)
    assert s.load.achieved_concurrency == pytest.approx(2.0)
    assert s.verdict == "valid"
    assert s.requests.matched == 3
    assert s.ttft_ms.p50 == pytest.approx(1000)
    assert s.tpot_ms.min == pytest.approx(500) and s.tpot_ms.max == pytest.approx(1500)
    # whole run: 9 output tokens over 0..7 s
    assert s.whole_run.output_tokens_per_s == pytest.approx(9 / 7, rel=1e-6)


def test_window_extends_to_the_last_moment_at_target() -> None:
    # C starts before B ends: two are in flight again until B ends at 5 s
    recs = [good(0, 0, 1, 1.5), good(1, 1, 2, 1.5), good(2, 4.5, 5, 0.5)]
    w = steady_window(recs, 2)
    assert w is not None
    assert (w.start_ns, w.end_ns) == (1 * S, 5 * S + 1)


def test_stats_percentiles_and_none() -> None:
    st = stats([1.0, 2.0, 3.0, 4.0, None])
    assert (st.mean, st.p50, st.min, st.max, st.count) == (2.5, 2.5, 1.0, 4.0, 4)
    assert st.p90 == pytest.approx(3.7)
    empty = stats([])
    assert empty.count == 0 and empty.p50 is None and empty.mean is None


def test_short_completion_makes_the_run_invalid() -> None:
    recs = [good(0, 0, 1, 0.1), good(1, 0, 1, 0.1, n=2, finish_reason="stop")]
    s = summarize(recs, ctx())
    codes = {p.code: p for p in s.problems}
    assert s.verdict == "invalid"
    assert codes["short_completion"].count == 1
    assert codes["finish_reason"].count == 1
    assert s.requests.matched == 1
    # one request: it reads "1 request", not "1 requests"
    assert codes["short_completion"].message.startswith("1 request generated fewer than 3 tokens")
    assert codes["finish_reason"].message.startswith("1 request ended with finish_reason stop")


def test_long_completion() -> None:
    s = summarize([good(0, 0, 1, 0.1, n=4)], ctx(concurrency=1))
    assert s.verdict == "invalid"
    assert [p.code for p in s.problems if p.severity == "error"] == ["long_completion"]
    assert [p.message for p in s.problems if p.code == "long_completion"] == [
        "1 request generated more than 3 tokens"
    ]


def test_missing_usage_is_unverified() -> None:
    r = good(0, 0, 1, 0.1, completion_tokens=None, count_source=None, prompt_tokens=None)
    s = summarize([r], ctx(concurrency=1))
    assert s.verdict == "unverified"
    assert [p.code for p in s.problems] == ["usage_missing"]
    assert s.tpot_ms.count == 0  # never count chunks as tokens


def test_usage_lower_than_chunks_is_a_mismatch() -> None:
    r = good(0, 0, 1, 0.1, completion_tokens=2)
    s = summarize([r], ctx(concurrency=1, output_tokens=2))
    assert "usage_mismatch" in {p.code for p in s.problems}
    assert s.verdict == "invalid"


def test_prompt_token_offsets() -> None:
    same = [good(i, 0, 1, 0.1, prompt_tokens=11) for i in range(3)]
    assert "prompt_tokens_mismatch" not in {p.code for p in summarize(same, ctx()).problems}
    varied = [good(i, 0, 1, 0.1, prompt_tokens=11 + 2 * i) for i in range(3)]
    p = {p.code: p for p in summarize(varied, ctx()).problems}["prompt_tokens_mismatch"]
    assert p.severity == "error"
    templ = [good(i, 0, 1, 0.1, prompt_tokens=25) for i in range(3)]
    # completions have no template: 15 more than the prompt is over-reporting
    p = {p.code: p for p in summarize(templ, ctx()).problems}["prompt_tokens_inflated"]
    assert p.severity == "error"
    # chat with a template the tokenizer could not count: a warning
    chat = ctx(endpoint="chat")
    p = {p.code: p for p in summarize(templ, chat).problems}["prompt_tokens_mismatch"]
    assert p.severity == "warning"


def test_failures_over_budget_are_errors_within_budget_warnings() -> None:
    bad = RequestRecord(
        index=1,
        expected_output_tokens=3,
        t_send_ns=0,
        t_done_ns=5,
        status=500,
        error_kind="http_error",
        error="HTTP 500: boom",
    )
    recs = [good(0, 0, 1, 0.1), bad]
    s = summarize(recs, ctx())
    assert s.verdict == "invalid"
    assert s.requests.failed == 1 and s.requests.succeeded == 1
    s2 = summarize(recs, ctx(allowed_failures=1))
    assert s2.verdict == "valid"
    assert {p.code: p.severity for p in s2.problems}["http_error"] == "warning"


def test_warmup_records_are_left_out() -> None:
    recs = [good(0, 0, 1, 0.1, warmup=True, n=1), good(0, 2, 3, 0.1)]
    s = summarize(recs, ctx(concurrency=1))
    assert s.requests.sent == 1 and s.requests.warmup == 1
    assert s.verdict == "valid"


def test_goodput_counts_requests_meeting_every_slo() -> None:
    recs = [good(0, 0, 0.1, 0.01), good(1, 0, 0.5, 0.01)]
    s = summarize(recs, ctx(slo={"ttft_ms": 200}))
    assert s.goodput is not None and s.goodput.fraction == pytest.approx(0.5)


def test_open_loop_window_counts_what_was_served_as_goodput_does() -> None:
    """An open loop at 10 requests/s for 2 s, each request taking 0.5 s: every arrival
    is served, so requests/s, goodput (every request meets the SLO) and the arrivals are
    one rate, and output tokens/s is that rate times the output length. A window from
    the first send to the last counted 15 of 20 completions there: 7.9 requests/s."""
    recs = [good(i, i / 10, i / 10 + 0.1, 0.2) for i in range(21)]  # done 0.5 s after send
    s = summarize(recs, ctx(mode="rate", concurrency=None, rate_rps=10.0, slo={"e2e_ms": 600}))
    assert s.window.opened_by == "first_completion" and s.window.steady
    assert (s.window.start_s, s.window.end_s) == (pytest.approx(0.5), pytest.approx(2.5))
    assert s.load.arriving_rps == pytest.approx(10.0)
    assert s.throughput.requests_per_s == pytest.approx(10.0, rel=1e-6)
    assert s.throughput.output_tokens_per_s == pytest.approx(30.0, rel=1e-6)
    assert s.goodput is not None and s.goodput.fraction == 1.0
    assert s.goodput.requests_per_s == s.throughput.requests_per_s
    # half of them too slow for the SLO: goodput half of what was served
    slow = [good(i, i / 10, i / 10 + 0.1, 0.2 if i % 2 else 0.3) for i in range(21)]
    s = summarize(slow, ctx(mode="rate", concurrency=None, rate_rps=10.0, slo={"e2e_ms": 600}))
    assert s.goodput is not None and s.goodput.requests_per_s is not None
    assert s.throughput.requests_per_s is not None
    # the window: from the first completion (request 1 at 0.6 s) to the last (2.7 s); the
    # 20 completions after the first, 9 of them (odd) in time
    assert s.throughput.requests_per_s == pytest.approx(20 / 2.1, rel=1e-6)
    assert s.goodput.requests_per_s == pytest.approx(9 / 2.1, rel=1e-6)
    # a closed loop keeps the window where its target is in flight
    assert summarize(recs, ctx()).window.opened_by == "target_in_flight"


def test_client_floor_flags_latencies_near_the_client_overhead() -> None:
    recs = [good(0, 0, 0.1, 0.0005), good(1, 0, 0.1, 0.0005)]
    floor = ClientFloor(delivery_p50_ms=0.3, source="test")
    s = summarize(recs, ctx(client_floor=floor))
    assert "client_floor" in {p.code for p in s.problems}
    s2 = summarize([good(0, 0, 0.1, 0.01), good(1, 0, 0.1, 0.01)], ctx(client_floor=floor))
    assert "client_floor" not in {p.code for p in s2.problems}


def test_open_loop_queue_time() -> None:
    r = good(0, 0.5, 1, 0.1, t_scheduled_ns=0)
    s = summarize([r], ctx(mode="rate", concurrency=None, rate_rps=1.0))
    assert s.queue_ms.p50 == pytest.approx(500)


def test_summary_json_shape_follows_the_contract() -> None:
    d = summarize([good(0, 0, 1, 0.1)], ctx(concurrency=1)).to_json_dict()
    assert d["schema"] == "crossover.run/1"
    for key in (
        "verdict",
        "problems",
        "requests",
        "load",
        "throughput",
        "ttft_ms",
        "tpot_ms",
        "itl_ms",
        "chunk_gap_ms",
        "e2e_ms",
        "queue_ms",
        "engine",
        "workload",
        "started_at",
        "duration_s",
    ):
        assert key in d
    assert set(d["ttft_ms"]) == {"mean", "p50", "p90", "p95", "p99", "min", "max", "count"}
    assert d["queue_ms"]["p50"] is None  # missing is None, never 0


def test_records_of_two_nodes_are_timed_each_by_its_own_clock() -> None:
    """Load workers on two Ray nodes: node b's clock reads 10^6 s more than a's. Each node
    gets its own window; the throughputs add up, as if both clocks were one."""
    a = [good(i, i * 4.0, i * 4.0 + 1, 1.0, node="a") for i in range(3)]
    shift = 1e6
    b = [good(10 + i, shift + i * 4.0, shift + i * 4.0 + 1, 1.0, node="b") for i in range(3)]
    one = ctx(concurrency=1)
    alone = summarize(a, one)
    both = summarize(a + b, ctx(concurrency=2))
    assert alone.throughput.total_tokens_per_s is not None
    assert both.throughput.total_tokens_per_s == pytest.approx(
        2 * alone.throughput.total_tokens_per_s
    )
    assert both.window.duration_s == pytest.approx(alone.window.duration_s)
    assert both.duration_s == pytest.approx(alone.duration_s)  # not 10^6 s
    assert alone.waves is not None and both.waves is None  # which sends were first: unknowable
    # the same records on one clock would span the shift: what per-node timing avoids
    merged = summarize([r.model_copy(update={"node": None}) for r in a + b], ctx(concurrency=2))
    assert merged.duration_s > shift


def test_waves_split_ttft_by_when_requests_were_sent() -> None:
    # c=2: requests 0 and 1 sent together at 0 s (the first wave), 2 and 3 at 4 and 4.5 s
    recs = [
        good(0, 0, 1.0, 0.5),
        good(1, 0, 2.0, 0.5),
        good(2, 4, 4.2, 0.5),
        good(3, 4.5, 4.8, 0.5),
    ]
    s = summarize(recs, ctx())
    w = s.waves
    assert w is not None
    assert (w.first_requests, w.later_requests) == (2, 2)
    assert w.first_ttft_ms.p50 == pytest.approx(1500)  # 1000 and 2000 ms
    assert w.later_ttft_ms.p50 == pytest.approx(250)  # 200 and 300 ms
    assert w.later_sent_over_s == pytest.approx(0.5)
    assert s.ttft_ms.p50 == pytest.approx(650)  # pooled: 200, 300, 1000, 2000
    # no later wave, or no waves at all (open loop): none
    assert summarize(recs[:2], ctx()).waves is None
    assert summarize(recs, ctx(mode="rate", concurrency=None, rate_rps=1.0)).waves is None
