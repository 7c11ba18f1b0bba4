"""An open-loop level too short for a steady state is told from its own records: its
window is then not steady and says why; a long one is left as it was."""

from __future__ import annotations

import math

import pytest

from crossover.metrics.run import RunContext, summarize
from crossover.metrics.summary import EngineInfo, ShortLevel, Window
from crossover.metrics.window import (
    SERVED_AIM,
    SERVED_OVER_ARRIVING,
    SHORT_LEVEL_REQUEST_TIMES,
    needed_sending_s,
    served_over,
    short_level,
    under_request_times,
)
from crossover.records.model import RequestRecord

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
    return RunContext.model_validate({**base, **kw})


def good(index: int, send_s: float, first_s: float, gap_s: float) -> RequestRecord:
    """A succeeded request of three chunks, ``gap_s`` apart from ``first_s``."""
    arrivals = [int((first_s + i * gap_s) * S) for i in range(3)]
    return RequestRecord.model_validate(
        {
            "index": index,
            "expected_output_tokens": 3,
            "expected_prompt_tokens": 10,
            "t_send_ns": int(send_s * S),
            "t_first_ns": arrivals[0],
            "t_last_ns": arrivals[-1],
            "t_done_ns": arrivals[-1] + 1,
            "chunk_arrival_ns": arrivals,
            "chunk_chars": [1] * 3,
            "completion_tokens": 3,
            "prompt_tokens": 11,
            "count_source": "usage",
            "finish_reason": "length",
            "saw_done": True,
        }
    )


def open_loop(
    rate: float, seconds: float, first_e2e_s: float, last_e2e_s: float
) -> list[RequestRecord]:
    """Evenly spaced arrivals at ``rate`` for ``seconds``, the request time going from
    ``first_e2e_s`` (the first arrival) to ``last_e2e_s`` (the last): three chunks each."""
    n = int(rate * seconds) + 1
    out = []
    for i in range(n):
        send = i / rate
        e2e = first_e2e_s + (last_e2e_s - first_e2e_s) * i / (n - 1)
        out.append(good(i, send, send + 0.1, (e2e - 0.1) / 2))
    return out


def rate_ctx(rate: float) -> RunContext:
    return ctx(mode="rate", concurrency=None, rate_rps=rate)


def test_a_16_s_level_of_10_s_requests_has_no_steady_state() -> None:
    """20 requests/s for 16 s, the request time falling from 11.5 s to 6.8 s (a batch
    filling, then draining after the last send: docs/results/h100/moe-open): the
    completions come squeezed into 11.3 s, 28 requests/s "served" of 20 arriving."""
    s = summarize(open_loop(20.0, 16.0, 11.5, 6.8), rate_ctx(20.0))
    assert s.load.arriving_rps == pytest.approx(20.0)
    assert s.throughput.requests_per_s is not None and s.throughput.requests_per_s > 27.0
    assert not s.window.steady and s.window.opened_by == "first_completion"
    short = s.window.short
    assert short is not None
    assert short.sending_s == pytest.approx(16.0)
    assert short.e2e_p50_s == pytest.approx(9.15, abs=0.01)
    assert short.needed_s == pytest.approx(SHORT_LEVEL_REQUEST_TIMES * short.e2e_p50_s)
    assert short.served_share is not None and short.served_share > SERVED_OVER_ARRIVING
    assert short.reason.startswith("arrivals lasted 16.0 s, under 3x the request time")
    assert "requests/s done of 20 arriving" in short.reason
    # the throughputs are kept as counted, marked by the window
    assert s.throughput.output_tokens_per_s == pytest.approx(3 * s.throughput.requests_per_s)


def test_a_120_s_level_of_2_s_requests_is_steady() -> None:
    s = summarize(open_loop(2.0, 120.0, 2.0, 2.0), rate_ctx(2.0))
    assert s.window.steady and s.window.short is None
    assert s.throughput.requests_per_s == pytest.approx(2.0, rel=1e-6)
    # a closed loop is never judged by the open loop's rule
    assert summarize(open_loop(2.0, 10.0, 8.0, 8.0), ctx()).window.short is None


def test_the_rule_either_way() -> None:
    # long enough, but its window served more than arrived: no steady state
    over = short_level(60.0, 2.0, served_rps=12.0, arriving_rps=10.0)
    assert over is not None and over.reason.startswith("its window counted 12 requests/s done")
    assert short_level(60.0, 2.0, served_rps=10.5, arriving_rps=10.0) is None
    # exactly K request times is long enough; under it is not
    assert short_level(SHORT_LEVEL_REQUEST_TIMES * 5.0, 5.0) is None
    assert short_level(SHORT_LEVEL_REQUEST_TIMES * 5.0 - 0.1, 5.0) is not None
    assert short_level(None, 5.0) is None and short_level(10.0, None) is None


def test_a_window_stored_before_the_rule_loads() -> None:
    w = Window.model_validate({"duration_s": 12.3, "steady": True, "opened_by": "first_completion"})
    assert w.short is None and w.steady


def test_how_long_a_level_should_send() -> None:
    """The request times' bound, or the served share's where the window served more than
    ``SERVED_OVER_ARRIVING`` of the arrivals: the gap D = S (1 - 1/share) taken as the
    same at a longer level, the share kept under the aim (1.05). SGLang at 20 requests/s
    for 40 s served 111% (docs/results/h100/moe-open-decide-freeze): D 3.96 s, 83.2 s,
    where 3 x its E2E p50 (11.2 s) is 33.6 s, under the 40 s it already sent."""
    assert math.isclose(SERVED_AIM, 1.05)
    served = ShortLevel(sending_s=40.0, e2e_p50_s=11.2, served_share=1.11, needed_s=33.6)
    assert needed_sending_s(served) == pytest.approx(40.0 * (1 - 1 / 1.11) * 21.0)
    assert math.ceil(needed_sending_s(served) or 0.0) == 84
    assert served_over(served) and not under_request_times(served)
    # the request times alone: K x E2E p50, a share within the allowance adds nothing
    timed = ShortLevel(sending_s=16.0, e2e_p50_s=9.0, served_share=1.08, needed_s=27.0)
    assert needed_sending_s(timed) == pytest.approx(SHORT_LEVEL_REQUEST_TIMES * 9.0)
    assert under_request_times(timed) and not served_over(timed)
    # both: the longer (16 s at 137%: D 4.3 s, 90 s against 30 s)
    both = ShortLevel(sending_s=16.0, e2e_p50_s=10.0, served_share=1.37)
    assert needed_sending_s(both) == pytest.approx(16.0 * (1 - 1 / 1.37) * 21.0)
    # a stored summary's needed_s where it has no E2E p50; nothing to go on: None
    assert needed_sending_s(ShortLevel(sending_s=16.0, needed_s=30.0)) == 30.0
    assert needed_sending_s(ShortLevel(sending_s=16.0)) is None


def test_a_level_that_served_too_much_is_sized_on_its_share() -> None:
    """A short level's summary from its records: 40 s of arrivals of 2 s requests at 10
    requests/s, the first taking 6 s and the last 2 s (its window 4 s shorter than the
    sends, so served / arriving = 40 / 36): long enough by the request times, not by its
    window's count."""
    s = summarize(open_loop(10.0, 40.0, 6.0, 2.0), rate_ctx(10.0))
    short = s.window.short
    assert short is not None and short.served_share is not None
    assert short.served_share == pytest.approx(40.0 / 36.0, rel=0.01)
    assert not under_request_times(short) and served_over(short)
    assert needed_sending_s(short) == pytest.approx(4.0 * 21.0, rel=0.02)
