"""Recognising an overloaded open-loop level while it runs.

Under a sustainable rate the requests in flight rise to about rate x request time
(Little's law) and then hover there; past the server's capacity they keep rising for as
long as the level lasts. The rise every level has lasts as long as its longest request:
requests of one length are all in flight by the first completion, but with mixed lengths
the short ones come and go while the long ones pile up, and the count still climbs until
the longest has had time to finish (the sample trace's 17- to 309-token replies at a
rate a batched server sustains read as an unbounded queue 1.8 s in, judged from the
first completion).

So the detector waits out that ramp before it reads anything: it begins at the first
reading that comes after the first completion (the floor, the rule it had before) and
after ``ramp_s``, the longest expected request's time: the completed requests' mean TTFT,
then the most output tokens any request sent so far asks for, each after the mean gap
between output tokens the completed requests showed. The gap, not a request's whole time
per token: a queue's wait lengthens the TTFT of a server that cannot keep up, and counted
in every token it would push the judging back as fast as the level runs. With one length
the estimate is the completed requests' mean time, which has passed by the first reading
after a completion, so such levels are judged as they were. From the reading it begins
at (fixed from then on) it keeps the in-flight count over time and calls the level
overloaded when the count has grown steadily: the means of the three thirds of the
readings increase, and the last is well above the first (``growth`` times it, plus
``slack`` requests, so a light level's noise never counts), once ``min_span_s`` has passed.

Pure: ``sent`` and ``done`` tell it of requests, ``add`` of readings; no clock of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OverloadDetector:
    #: judge only once this much time has passed since judging began
    min_span_s: float = 1.5
    growth: float = 1.5
    slack: float = 4.0
    min_samples: int = 9
    #: readings since judging began: (seconds into the level, requests in flight)
    samples: list[tuple[float, int]] = field(default_factory=list)
    #: when judging began (None: not yet)
    settled_at_s: float | None = None
    #: the most output tokens any request sent so far asks for
    longest_tokens: int = 0
    #: the completed requests' TTFTs, summed, and how many
    ttft_s: float = 0.0
    ttfts: int = 0
    #: their seconds from the first token to the last, summed, and the gaps in them
    #: (output tokens - 1 each)
    decode_s: float = 0.0
    gaps: int = 0

    def sent(self, output_tokens: int) -> None:
        """A request asking for ``output_tokens`` was sent."""
        self.longest_tokens = max(self.longest_tokens, output_tokens)

    def done(self, ttft_s: float, seconds: float, output_tokens: int) -> None:
        """A request completed: its first token ``ttft_s`` after it was sent, its last
        ``seconds`` after, ``output_tokens`` in all (one without tokens tells nothing)."""
        if output_tokens < 1:
            return
        self.ttft_s += max(ttft_s, 0.0)
        self.ttfts += 1
        self.decode_s += max(seconds - ttft_s, 0.0)
        self.gaps += output_tokens - 1

    @property
    def seconds_per_token(self) -> float | None:
        """Seconds from one output token to the next, over the completed requests (None:
        none has two tokens yet)."""
        return self.decode_s / self.gaps if self.gaps else None

    @property
    def ramp_s(self) -> float:
        """How long the longest request sent so far is expected to take: the completed
        requests' mean TTFT, then a token's time for each of its other tokens (0: no
        request completed yet)."""
        if not self.ttfts:
            return 0.0
        return self.ttft_s / self.ttfts + max(self.longest_tokens - 1, 0) * (
            self.seconds_per_token or 0.0
        )

    def add(self, t_s: float, in_flight: int, completed: int) -> bool:
        """One reading at ``t_s`` (seconds into the level); True once overloaded."""
        if self.settled_at_s is None:
            if completed == 0 or t_s < self.ramp_s:
                return False
            self.settled_at_s = t_s  # fixed from here: a slower server judged, not waited on
        self.samples.append((t_s, in_flight))
        return self.overloaded()

    def overloaded(self) -> bool:
        if self.settled_at_s is None or len(self.samples) < self.min_samples:
            return False
        if self.samples[-1][0] - self.settled_at_s < self.min_span_s:
            return False
        k = len(self.samples) // 3
        thirds = [self.samples[:k], self.samples[k : 2 * k], self.samples[2 * k :]]
        m = [sum(v for _, v in part) / len(part) for part in thirds]
        return m[0] < m[1] < m[2] and m[2] > self.growth * m[0] + self.slack
