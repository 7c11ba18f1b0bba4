"""A level's records reduced to what the policy reads, whole or stopped at a time budget."""

from __future__ import annotations

from crossover.decide.observe import cut_values, observe, span_s
from crossover.records.model import RequestRecord

MS = 1_000_000  # ns


def record(i: int, send_ms: int, first_ms: int, gap_ms: int, tokens: int) -> RequestRecord:
    """A request of ``tokens`` one-token chunks, the first ``first_ms`` after sending."""
    t0 = send_ms * MS
    arrivals = [t0 + (first_ms + k * gap_ms) * MS for k in range(tokens)]
    return RequestRecord(
        index=i,
        expected_output_tokens=tokens,
        t_send_ns=t0,
        t_first_ns=arrivals[0],
        t_last_ns=arrivals[-1],
        t_done_ns=arrivals[-1],
        chunk_arrival_ns=arrivals,
        chunk_chars=[4] * tokens,
        chunk_tokens=[1] * tokens,
        status=200,
        finish_reason="length",
        saw_done=True,
        prompt_tokens=10,
        completion_tokens=tokens,
        count_source="usage",
    )


# a closed loop of 2: two waves of two requests, 10 tokens each, 100 ms TTFT, 10 ms gaps
LEVEL = [
    record(0, 0, 100, 10, 10),
    record(1, 0, 100, 10, 10),
    record(2, 190, 100, 10, 10),
    record(3, 190, 100, 10, 10),
]


def test_the_whole_level_is_its_summary_and_its_span() -> None:
    summary = {"verdict": "valid", "throughput": {"total_tokens_per_s": 123.0}}
    o = observe("t", 2, 0, LEVEL, summary)
    assert o.complete and o.valid
    assert o.value("total_tokens_per_s") == 123.0
    assert o.seconds == span_s(LEVEL) == 0.38


def test_a_level_stopped_by_time_reads_how_far_it_got() -> None:
    summary = {"verdict": "valid"}
    o = observe("t", 2, 0, LEVEL, summary, budget_s=0.25)
    assert not o.complete
    assert (o.requests, o.planned) == (2, 4)
    assert o.seconds == 0.25
    # by 250 ms: the first wave's 20 tokens and 20 prompt tokens, and the second wave's
    # prompts not yet answered (their first tokens come at 290 ms)
    tput = o.value("total_tokens_per_s")
    assert tput is not None and abs(tput - 40 / 0.25) < 1e-6
    # TTFT p50: 100, 100, then the second wave waited 60 ms each: a lower bound
    assert o.value("ttft_ms.p50") == 80.0


def test_the_ttft_bound_counts_requests_not_yet_sent_as_zero() -> None:
    # at 150 ms only the first wave was sent: the other two count 0 ms, so the bound is
    # the median of (100, 100, 0, 0), not the first wave's 100 ms
    values = cut_values(LEVEL, 150 * MS)
    assert values["ttft_ms.p50"] == 50.0
    whole = sorted([100.0] * 4)
    assert values["ttft_ms.p50"] <= whole[1]


def test_a_budget_past_the_level_is_the_whole_level() -> None:
    o = observe("t", 2, 0, LEVEL, {"verdict": "valid"}, budget_s=5.0)
    assert o.complete
    assert o.seconds == span_s(LEVEL)
