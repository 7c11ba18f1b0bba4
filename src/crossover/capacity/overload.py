"""Recognising an overloaded open-loop level while it runs.

Under a sustainable rate the requests in flight rise to about rate x request time
(Little's law) within one request time and then hover there; past the server's
capacity they keep rising for as long as the level lasts. The detector reads the
in-flight count over time and calls the level overloaded when, after the first
completions (the rise every level has), the count has grown steadily: the means of
the three thirds of that span increase, and the last is well above the first
(``growth`` times it, plus ``slack`` requests, so a light level's noise never counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OverloadDetector:
    #: judge only once this much time has passed since the first completion
    min_span_s: float = 1.5
    growth: float = 1.5
    slack: float = 4.0
    min_samples: int = 9
    samples: list[tuple[float, int]] = field(default_factory=list)
    settled_at_s: float | None = None

    def add(self, t_s: float, in_flight: int, completed: int) -> bool:
        """One reading at ``t_s`` (seconds into the level); True once overloaded."""
        if self.settled_at_s is None:
            if completed == 0:
                return False
            self.settled_at_s = t_s
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
