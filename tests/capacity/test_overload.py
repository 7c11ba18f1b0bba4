"""The overload detector fed a simulated level: arrivals, the server's finish times and
every request's TTFT, read every 0.2 s as the runner reads them (no server, no clock)."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from crossover.capacity import OverloadDetector
from crossover.workload.trace import read_trace

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "trace-sample.jsonl"
#: the sample trace's output lengths, 17 to 386 tokens, in its order
TRACE_LENGTHS = [r.output_length for r in read_trace(SAMPLE).requests]
#: a lone request's TTFT and the gap between its tokens (the batched calibration server's)
TTFT_S, GAP_S = 0.04, 0.007


@dataclass
class Level:
    sends: list[float]
    lengths: list[int]
    ttfts: list[float]
    ends: list[float]


def simulate(
    rate: float, lengths: list[int], slots: int | None, seed: int, seconds: float = 10.0
) -> Level:
    """Poisson arrivals at ``rate`` for ``seconds``, request i asking for
    ``lengths[i % len]`` tokens. ``slots=None``: a batched server that serves every
    request at once, each at the lone request's pace (sustains any rate); else a server
    of ``slots`` slots taking requests first come, first served (the rest wait)."""
    r = random.Random(seed)
    sends: list[float] = []
    t = r.expovariate(rate)
    while t < seconds:
        sends.append(t)
        t += r.expovariate(rate)
    ns = [lengths[i % len(lengths)] for i in range(len(sends))]
    free = [0.0] * (slots or 1)
    ttfts, ends = [], []
    for s, n in zip(sends, ns, strict=True):
        start = s
        if slots is not None:
            start = max(heapq.heappop(free), s)
        end = start + TTFT_S + (n - 1) * GAP_S
        if slots is not None:
            heapq.heappush(free, end)
        ttfts.append(start - s + TTFT_S)
        ends.append(end)
    return Level(sends, ns, ttfts, ends)


def first_alarm(level: Level, detector: OverloadDetector, told: bool = True) -> float | None:
    """When ``detector`` calls the level overloaded, read every 0.2 s (None: never);
    ``told=False``: it hears of no request, only the readings (the rule it had before)."""
    by_end = sorted(range(len(level.ends)), key=lambda i: level.ends[i])
    sent = done = 0
    for k in range(1, int(level.sends[-1] / 0.2) + 1):
        t = 0.2 * k
        while sent < len(level.sends) and level.sends[sent] <= t:
            if told:
                detector.sent(level.lengths[sent])
            sent += 1
        while done < len(by_end) and level.ends[by_end[done]] <= t:
            i = by_end[done]
            if told:
                detector.done(level.ttfts[i], level.ends[i] - level.sends[i], level.lengths[i])
            done += 1
        if detector.add(t, sent - done, done):
            return t
    return None


@pytest.mark.parametrize("seed", range(3))
def test_a_sustained_level_of_mixed_lengths_is_not_called_overloaded(seed: int) -> None:
    # the audit's case: the sample trace's lengths at 14.6 requests/s against a batched
    # server that keeps up; the in-flight count climbs for as long as the longest
    # request (386 tokens: 2.7 s), and judged from the first completion that read as growth
    level = simulate(14.6, TRACE_LENGTHS, slots=None, seed=seed)
    assert first_alarm(level, OverloadDetector(), told=False) is not None  # the old rule
    detector = OverloadDetector()
    assert first_alarm(level, detector) is None
    # judged from the ramp's end on, not before
    assert detector.settled_at_s is not None
    assert detector.settled_at_s >= TTFT_S + (max(TRACE_LENGTHS) - 1) * GAP_S


@pytest.mark.parametrize("seed", range(4))
def test_a_server_that_cannot_keep_up_with_mixed_lengths_is_still_caught(seed: int) -> None:
    # 8 slots of 1.4 s mean requests serve 5.6 requests/s: at 14.6 the queue grows 9 a
    # second. The waits lengthen the TTFTs the ramp's estimate reads, not its per-token
    # gap, so the judging is not pushed back as the queue grows
    level = simulate(14.6, TRACE_LENGTHS, slots=8, seed=seed)
    detector = OverloadDetector()
    alarm = first_alarm(level, detector)
    assert alarm is not None and alarm < 8.0
    assert detector.settled_at_s is not None and detector.settled_at_s < 4.0


@pytest.mark.parametrize(
    ("rate", "tokens", "slots", "overloaded"),
    [
        (60.0, 4, 1, True),  # the calibration tests' overload: 4 tokens, far past capacity
        (20.0, 200, 16, True),  # 16 slots of 1.43 s serve 11.2 requests/s
        (10.0, 200, None, False),  # batched, kept up with
        (10.0, 200, 16, False),  # 16 slots, kept up with
    ],
)
@pytest.mark.parametrize("seed", range(3))
def test_one_length_is_judged_as_before(
    rate: float, tokens: int, slots: int | None, overloaded: bool, seed: int
) -> None:
    # with one length the ramp's estimate is the completed requests' mean time, which has
    # passed by the first reading after a completion: the same readings, the same alarm
    level = simulate(rate, [tokens], slots=slots, seed=seed)
    before = first_alarm(level, OverloadDetector(), told=False)
    now = first_alarm(level, OverloadDetector())
    assert now == before
    assert (now is not None) == overloaded


def test_the_ramp_is_the_longest_request_sent_at_the_pace_seen() -> None:
    d = OverloadDetector()
    assert d.ramp_s == 0.0 and d.seconds_per_token is None
    d.sent(17)
    d.sent(309)
    d.sent(100)
    assert d.longest_tokens == 309
    d.done(0.05, 0.05 + 16 * 0.01, 17)  # 16 gaps of 10 ms
    d.done(0.03, 0.03 + 3 * 0.02, 4)  # 3 gaps of 20 ms
    d.done(0.5, 0.5, 0)  # no tokens: tells nothing
    assert d.seconds_per_token == pytest.approx((0.16 + 0.06) / 19)
    assert d.ramp_s == pytest.approx(0.04 + 308 * (0.22 / 19))
    # nothing judged before the ramp's end, though a request completed
    assert not d.add(1.0, 30, completed=2)
    assert d.settled_at_s is None and d.samples == []
    assert not d.add(3.8, 30, completed=2)
    assert d.settled_at_s == 3.8 and d.samples == [(3.8, 30)]


def test_without_a_token_count_the_first_completion_is_the_floor() -> None:
    # requests that complete without tokens (or none told of): judged from the first
    # completion, as before
    d = OverloadDetector()
    d.sent(300)
    assert not d.add(0.2, 5, completed=0)
    assert not d.add(0.4, 6, completed=1)
    assert d.settled_at_s == 0.4
