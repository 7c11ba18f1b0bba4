"""What the decide policy reads and says: the question, what was measured, what to do next.

* :class:`Question`: who leads (``lead``, at given levels), where targets cross
  (``crossover``), or which target has the most capacity under an SLO (``capacity``);
* :class:`Observation`: one measured (part of a) level of one target, one repeat, reduced
  to its metric values by :func:`crossover.decide.observe.observe` from its per-request
  records, with the requests it took and the measuring time they cost;
* :class:`Measure`: the next measurement (target, level, repeat, how many requests);
* :class:`Decision`: the answer, with its confidence and what was not measured and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from crossover.analysis.crossovers import Finding, axis_unit
from crossover.errors import UsageError
from crossover.spec.load import Axis
from crossover.spec.slo import SloTerm

QuestionKind = Literal["lead", "crossover", "capacity"]

#: the throughput metric a curve's saturation is judged on
SATURATION_METRIC = "total_tokens_per_s"

#: a level on the question's axis: a concurrency (an ``int``, as a sweep's key holds it)
#: or an arrival rate in requests/s (a ``float``, ``0.5`` as well as ``2``)
LevelNum = float


def fmt_level(level: float) -> str:
    """A level as given: ``4`` for a concurrency, ``2.5`` for a rate (``1`` for 1.0)."""
    return f"{level:g}"


def fmt_levels(levels: Sequence[float]) -> str:
    """``1,4,16`` (``none`` where empty)."""
    return ",".join(fmt_level(c) for c in levels) or "none"


#: a capacity question is not asked along rates (one line, exit 2)
CAPACITY_ON_RATES = (
    "--question capacity works along concurrency levels; this sweep has rates (an open "
    "loop's capacity under an SLO: crossover capacity)"
)
#: the advisor's forecast is keyed by concurrency: no prior along rates (one line, exit 2)
PRIOR_ON_RATES = (
    "--prior: the advisor's forecast predicts per concurrency level, not per arrival rate; "
    "a question along rates takes no prior"
)


@dataclass(frozen=True)
class Question:
    """What is asked, over which targets and which levels (increasing) along ``axis``:
    concurrency (closed loop, ``int`` levels) or arrival rate (open loop, requests/s).

    ``levels`` are the levels the grid would measure (the sweep's); a ``lead`` question
    measures only ``at`` (default: all of them) and places no level between them.
    ``any_level`` lets refinement measure a level the grid does not hold (live: yes;
    replay: only the recorded levels exist). ``group_targets``: measure a target's levels
    together (each switch to another target is an engine start); where no target starts
    an engine (servers already up) the first pass goes level by level instead.
    """

    kind: QuestionKind
    targets: tuple[str, ...]
    levels: tuple[LevelNum, ...]
    metrics: tuple[str, ...] = ("total_tokens_per_s", "ttft_ms.p50")
    at: tuple[LevelNum, ...] = ()
    #: a capacity question's limit: one SLO term on a compared metric (``ttft_ms.p99``)
    slo: SloTerm | None = None
    repeats: int = 2
    any_level: bool = False
    group_targets: bool = True
    #: a target's own levels where the sweep gives it some (YAML ``concurrency:`` under the
    #: target): it is measured at no level outside their range
    target_levels: Mapping[str, tuple[LevelNum, ...]] = field(default_factory=dict)
    #: the measured requests a level is planned with, where known (the sweep's; a replay:
    #: the recorded runs'): a sequential level whose stop would leave none unsent is
    #: measured whole (:func:`crossover.decide.coarse.stop_saves`)
    requests: Mapping[LevelNum, int] = field(default_factory=dict)
    #: the levels' axis: ``concurrency`` (closed loop) or ``rate`` (open loop, requests/s;
    #: levels run whole, docs/decide.md "Along rates")
    axis: Axis = "concurrency"

    def __post_init__(self) -> None:
        if len(self.targets) < 2:
            raise ValueError("a decision needs at least two targets")
        if not self.levels:
            raise ValueError("a decision needs at least one level")
        if self.kind == "capacity" and self.slo is None:
            raise ValueError("a capacity question needs an SLO (metric and limit)")
        if self.repeats < 1:
            raise ValueError("repeats must be at least 1")
        if self.kind == "capacity" and self.axis == "rate":
            raise ValueError("a capacity question works along concurrency levels")

    @property
    def unit(self) -> str:
        """How the levels are named in a line (the analysis's own words)."""
        return axis_unit(self.axis)

    def covers(self, target: str, level: LevelNum) -> bool:
        """Whether ``target`` may be measured at ``level``."""
        own = self.target_levels.get(target)
        if not own:
            return True
        if level in own:
            return True
        return self.any_level and min(own) < level < max(own)

    @property
    def grid(self) -> tuple[LevelNum, ...]:
        """The levels this question may measure (sorted)."""
        return tuple(sorted(set(self.at or self.levels)))


@dataclass(frozen=True)
class Observation:
    """One measured level of one repeat, or its part up to a time budget (``requests`` of
    its ``planned`` finished by then; the values are then read from how far every request
    got: throughput from the tokens received, TTFT of a request still waiting counted as
    at least the time it waited)."""

    target: str
    level: LevelNum
    repeat: int
    values: Mapping[str, float | None]
    requests: int
    planned: int
    seconds: float
    valid: bool = True
    #: a part cut at a time budget (``observe(budget_s=...)``): its latencies are lower
    #: bounds of the level's (a sequential level's part is its own finished requests)
    budget_cut: bool = False
    #: an open-loop level the analysis calls overloaded (served under 80% of what
    #: arrived, ``crossover.analysis.overload.is_overloaded``); ``None``: a closed-loop
    #: level, or one not judged
    overloaded: bool | None = None
    #: an open-loop level too short for a steady state and not overloaded
    #: (``crossover.analysis.short``): its throughputs are ramp-up and drain, so throughput
    #: comparisons leave its level out, as the sweep's analysis does; ``None``: a
    #: closed-loop level, or one not judged
    short: bool | None = None
    #: a short level's arrivals should have lasted this long for a steady state
    #: (``crossover.metrics.window.needed_sending_s``); ``None`` where it was not short or
    #: cannot say
    short_needed_s: float | None = None
    #: why a short level was: its arrivals lasted under ``SHORT_LEVEL_REQUEST_TIMES``
    #: request times (``crossover.metrics.window.under_request_times``); ``None``: not said
    short_by_request_times: bool | None = None
    #: why a short level was: its window served this share of its arrivals, over
    #: ``SERVED_OVER_ARRIVING`` (``crossover.metrics.window.served_over``); ``None``: it
    #: did not, or not said
    short_served_share: float | None = None
    #: an open-loop level whose steady window served its arrivals
    #: (``crossover.analysis.overload.kept_up``): where both targets of a pair kept up,
    #: their throughputs are the arrivals' and the level is a tie on them; ``None``: a
    #: closed-loop level, or one not judged (a part cut at a budget)
    kept_up: bool | None = None

    @property
    def complete(self) -> bool:
        return self.requests >= self.planned

    def value(self, metric: str) -> float | None:
        return self.values.get(metric)


@dataclass(frozen=True)
class Measure:
    """Measure ``target`` at ``level``, repeat ``repeat``: the level's requests until
    ``budget_s`` seconds of measuring have passed (sequential measurement within the level:
    what finished by then, and how far the rest got), or the whole level (``None``: also
    the rest of a level measured in part before: live, the level measured again whole).
    ``why`` says what for."""

    target: str
    level: LevelNum
    repeat: int
    budget_s: float | None
    why: str
    #: sequential within the level: stop sending once what finished settles the level's
    #: comparison with every other target measured there (``coarse.part_settled``), else
    #: run to the level's planned requests (live; a replay with ``--live-levels``)
    sequential: bool = False
    #: the targets whose comparison with ``target`` this measurement is for (empty: every
    #: other target)
    concerns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skip:
    """Levels of ``target`` not measured, and the reason (an inference states its
    assumption, and ``checked`` what was measured to support it)."""

    target: str
    levels: tuple[LevelNum, ...]
    reason: str
    assumption: str = ""
    checked: str = ""


@dataclass(frozen=True)
class Deferred:
    """A measurement the decision wanted and did not make within its time budget: what it
    was for, its estimated cost, and the comparisons it would have settled."""

    target: str
    level: LevelNum
    repeat: int
    seconds: float
    why: str
    concerns: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    """The settled answer.

    ``findings`` are the analysis's own (:func:`crossover.analysis.crossovers.compare_pair`)
    over what was measured, for the question's metrics and pairs; ``capacity`` holds each
    target's capacity bracket (last level meeting the SLO, first level failing it, ``None``
    where it never failed) for a capacity question; ``leader`` is that question's answer
    (``None``: none meets the SLO, or a tie).
    """

    question: Question
    findings: tuple[Finding, ...]
    confidence: float
    skipped: tuple[Skip, ...] = ()
    capacity: Mapping[str, tuple[LevelNum | None, LevelNum | None]] = field(default_factory=dict)
    leader: str | None = None
    notes: tuple[str, ...] = ()
    #: measurements not made within the time budget (``PolicyConfig.budget``)
    deferred: tuple[Deferred, ...] = ()
    #: the budget: (seconds allowed, the grid's measuring time as estimated), if any
    budget: tuple[float, float] | None = None

    def unsettled(self, a: str, b: str) -> list[Deferred]:
        """The deferred measurements that would have settled ``a`` vs ``b`` further."""
        return [
            d
            for d in self.deferred
            if (d.target == a and b in d.concerns) or (d.target == b and a in d.concerns)
        ]


Step = Measure | Decision


def check_at(at: Sequence[float], levels: Sequence[float]) -> None:
    """``--at`` names levels of the sweep (live, its config's; replayed, its database's):
    a replay asked about another level answered "levels none" and exited 0."""
    bad = [c for c in at if c not in levels]
    if bad:
        raise UsageError(f"--at {fmt_levels(bad)}: not a level of the sweep ({fmt_levels(levels)})")
