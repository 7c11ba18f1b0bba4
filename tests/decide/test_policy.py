"""The decide policy on curves known in closed form: what it measures, what it skips, what
it concludes. Every measurement is a value from the model (with a fixed, seeded noise), so
each test can say what the right answer is."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crossover.analysis.gc import GcPause, GcRun
from crossover.decide.coarse import coarse_levels, prior_crossings, target_order
from crossover.decide.model import Decision, Measure, Observation, Question
from crossover.decide.policy import next_step
from crossover.decide.state import PolicyConfig
from crossover.decide.text import decision_json, decision_lines
from crossover.spec.slo import SloTerm

GRID = (1, 2, 4, 8, 16, 32, 64, 128)
#: a curve: level -> (total tokens/s, TTFT p50 ms, seconds the level takes)
Curve = Callable[[int], tuple[float, float, float]]


def scaling(per_stream: float, cap: float, ttft: float) -> Curve:
    """Throughput ``per_stream x c`` up to ``cap``; TTFT grows with the queue past it."""

    def f(c: int) -> tuple[float, float, float]:
        tput = min(per_stream * c, cap)
        queue = max(0.0, per_stream * c / cap - 1.0)
        return tput, ttft * (1.0 + queue), 2.0 + c * 100.0 / tput

    return f


def run(
    q: Question,
    curves: dict[str, Curve],
    cfg: PolicyConfig | None = None,
    noise: float = 0.01,
    prior: dict[str, dict[int, float]] | None = None,
) -> tuple[Decision, list[Measure]]:
    rng = random.Random(7)
    obs: list[Observation] = []
    steps: list[Measure] = []
    for _ in range(500):
        step = next_step(q, obs, cfg, prior)
        if isinstance(step, Decision):
            return step, steps
        steps.append(step)
        tput, ttft, secs = curves[step.target](step.level)
        jitter = 1.0 + rng.uniform(-noise, noise)
        values = {"total_tokens_per_s": tput * jitter, "ttft_ms.p50": ttft / jitter}
        obs.append(Observation(step.target, step.level, step.repeat, values, 10, 10, secs))
    raise AssertionError("the policy did not settle in 500 steps")


def crossover_question(**kw: object) -> Question:
    base: dict[str, object] = {
        "kind": "crossover",
        "targets": ("fast", "batched"),
        "levels": GRID,
        "metrics": ("total_tokens_per_s",),
    }
    base.update(kw)
    return Question(**base)  # type: ignore[arg-type]


# fast: 1,000 tok/s per stream up to 6,000 (saturated from c = 6); batched: 400 per
# stream up to 40,000. They cross where fast's 6,000 = 400 c: c = 15.
FAST = scaling(1000.0, 6000.0, 20.0)
BATCHED = scaling(400.0, 40000.0, 40.0)
TRUTH = 15.0


def test_finds_a_crossover_inside_its_interval() -> None:
    q = crossover_question(any_level=True, group_targets=False)
    d, steps = run(q, {"fast": FAST, "batched": BATCHED})
    xs = [f for f in d.findings if f.kind == "crossover"]
    assert len(xs) == 1
    x = xs[0]
    assert (x.below, x.above) == ("fast", "batched")
    assert x.interval is not None
    assert x.interval[0] <= TRUTH <= x.interval[1]
    # fewer measurements than the grid's 2 targets x 8 levels x 2 repeats
    assert len(steps) < 2 * len(GRID) * 2 / 2


def test_skips_a_saturated_target_far_behind_and_says_why() -> None:
    slow = scaling(100.0, 300.0, 80.0)  # saturated by 4, 20x behind at 64
    d, steps = run(
        crossover_question(targets=("fast", "slow"), metrics=("total_tokens_per_s", "ttft_ms.p50")),
        {"fast": BATCHED, "slow": slow},
    )
    measured_slow = {s.level for s in steps if s.target == "slow"}
    assert max(measured_slow) < 64
    skip = next(s for s in d.skipped if s.target == "slow")
    assert 128 in skip.levels
    assert "saturated" in skip.reason
    assert "fast leads it there by 20% or more" in skip.reason
    assert "and is ahead on" in skip.reason
    assert "the leader's not falling" in skip.checked
    assert "does not fall" in skip.assumption
    assert skip.checked
    # the answer still names the leader over the levels both were measured at
    f = next(f for f in d.findings if f.metric == "total_tokens_per_s")
    assert f.kind == "none"
    assert f.leader == "fast"


def test_a_skip_names_several_leaders_in_the_plural() -> None:
    slow = scaling(100.0, 300.0, 80.0)
    d, _ = run(
        crossover_question(targets=("fast", "fast2", "slow")),
        {"fast": BATCHED, "fast2": BATCHED, "slow": slow},
    )
    skip = next(s for s in d.skipped if s.target == "slow")
    assert "fast, fast2 lead it there" in skip.reason
    assert "and are ahead on" in skip.reason
    assert "the leaders' not falling" in skip.checked


def test_no_skip_while_the_trailing_target_still_gains() -> None:
    # behind, but still scaling: a crossover may lie ahead, so its levels are measured
    late = scaling(300.0, 100000.0, 80.0)
    _, steps = run(
        crossover_question(targets=("a", "late")),
        {"a": scaling(1000.0, 8000.0, 20.0), "late": late},
    )
    assert max(s.level for s in steps if s.target == "late") == 128


def test_repeats_only_where_the_sign_is_uncertain() -> None:
    near = scaling(1020.0, 6100.0, 20.0)  # within 2% of FAST: a close pair
    far = scaling(100.0, 150.0, 90.0)  # far behind both everywhere
    d, steps = run(
        crossover_question(targets=("fast", "near", "far")),
        {"fast": FAST, "near": near, "far": far},
    )
    repeated = {(s.target, s.level) for s in steps if s.repeat == 1}
    assert any(t == "near" for t, _ in repeated)
    assert not any(t == "far" for t, _ in repeated)  # far behind: one repeat settles it
    close = next(f for f in d.findings if (f.a, f.b) == ("fast", "near"))
    assert close.kind != "crossover"


def test_groups_a_targets_levels_where_engines_start() -> None:
    _, steps = run(crossover_question(), {"fast": FAST, "batched": BATCHED})
    first_pass = [s.target for s in steps if s.why.startswith("first pass")]
    switches = sum(1 for a, b in itertools.pairwise(first_pass) if a != b)
    assert switches == 1  # every level of one target, then the other's


def test_level_by_level_where_no_engine_starts() -> None:
    _, steps = run(crossover_question(group_targets=False), {"fast": FAST, "batched": BATCHED})
    first = [(s.target, s.level) for s in steps if s.why.startswith("first pass")]
    assert first[:4] == [("fast", 1), ("batched", 1), ("fast", 4), ("batched", 4)]


def test_a_lead_question_measures_only_its_levels() -> None:
    q = crossover_question(kind="lead", at=(1, 64))
    d, steps = run(q, {"fast": FAST, "batched": BATCHED})
    assert {s.level for s in steps} == {1, 64}
    per_level = {lv.concurrency: lv.lead for f in d.findings for lv in f.per_level}
    assert per_level == {1.0: "fast", 64.0: "batched"}
    # the answer is said at those levels, nothing placed between them (it read "fast leads
    # below 4.9 concurrent requests (1.0-64.0), batched above")
    answer = decision_lines(d)
    assert any(x.startswith("  total tokens/s at 1: fast leads batched (99") for x in answer)
    assert any(x.startswith("  total tokens/s at 64: batched leads fast (25,") for x in answer)
    assert not any("leads below" in line for line in answer)
    at = decision_json(d)["findings"][0]["at_levels"]
    assert at[0].startswith("total tokens/s at 1: fast leads batched")


def test_capacity_under_an_slo() -> None:
    # TTFT grows with the queue past saturation: fast meets 50 ms up to c = 15
    # (20 x c / 6 <= 50), batched up to c = 125 (40 x c / 100 <= 50)
    q = Question(
        "capacity",
        ("fast", "batched"),
        GRID,
        ("ttft_ms.p50",),
        slo=SloTerm(metric="ttft_ms", stat="p50", limit=50.0),
        any_level=True,
    )
    d, steps = run(q, {"fast": FAST, "batched": BATCHED})
    assert d.leader == "batched"
    assert d.confidence > 0
    lo, hi = d.capacity["fast"]
    assert lo is not None and hi is not None
    assert lo <= 15 < hi
    lo, hi = d.capacity["batched"]
    assert lo is not None and hi is not None
    assert lo <= 125 < hi
    # fast is not narrowed once batched meets the SLO where fast fails it
    assert max(s.level for s in steps if s.target == "fast") <= 64


def test_targets_meeting_the_slo_up_to_the_same_level_are_a_tie() -> None:
    """Both meeting the SLO at every level measured: no target leads (the first in the
    YAML was named the answer, "not surely", with nothing to put it ahead)."""
    q = Question(
        "capacity",
        ("fast", "batched"),
        GRID,
        ("ttft_ms.p50",),
        slo=SloTerm(metric="ttft_ms", stat="p50", limit=1e6),
        any_level=True,
    )
    d, _ = run(q, {"fast": FAST, "batched": BATCHED})
    assert d.capacity["fast"] == d.capacity["batched"] == (128, None)
    assert d.leader is None
    assert d.confidence == 0
    lines = decision_lines(d)
    assert "answer: no target leads: fast, batched meet it up to 128 alike" in lines
    assert decision_json(d)["leader"] is None


def test_a_target_failing_the_slo_at_its_first_level_says_where() -> None:
    """Measured at its lowest level alone (failing there, another meeting it), a target
    is said to fail at that level, not "at every level"."""
    q = Question(
        "capacity",
        ("fast", "batched"),
        GRID,
        ("ttft_ms.p50",),
        slo=SloTerm(metric="ttft_ms", stat="p50", limit=30.0),
        any_level=True,
    )
    d, steps = run(q, {"fast": FAST, "batched": BATCHED})
    assert {s.level for s in steps if s.target == "batched"} == {1}
    assert "  batched: fails it at 1, the lowest level measured" in decision_lines(d)


def test_prior_orders_targets_and_looks_where_it_predicts_a_crossing() -> None:
    q = crossover_question()
    prior = {
        "fast": {c: FAST(c)[0] for c in GRID},
        "batched": {c: BATCHED(c)[0] for c in GRID},
    }
    assert target_order(q, prior) == ["batched", "fast"]
    assert prior_crossings(q, prior) == [8, 16]
    coarse = coarse_levels(q.grid, 4.0, prior_crossings(q, prior))
    assert {8, 16} <= set(coarse)
    d, _ = run(q, {"fast": FAST, "batched": BATCHED}, prior=prior)
    x = next(f for f in d.findings if f.kind == "crossover")
    assert x.bracket == (8.0, 16.0)


def test_a_level_stopped_by_time_is_completed_when_it_leaves_a_lead_open() -> None:
    q = crossover_question(group_targets=False)
    first = Observation("fast", 1, 0, {"total_tokens_per_s": 1000.0}, 4, 4, 5.0)
    part = Observation("batched", 1, 0, {"total_tokens_per_s": 950.0}, 1, 4, 10.0)
    step = next_step(q, [first], None)
    assert isinstance(step, Measure)
    assert (step.target, step.level) == ("batched", 1)
    assert step.budget_s == pytest.approx(10.0)  # twice the first target's time there
    step = next_step(q, [first, part], None)
    assert isinstance(step, Measure)
    assert (step.target, step.level, step.budget_s) == ("batched", 1, None)
    far = Observation("batched", 1, 0, {"total_tokens_per_s": 100.0}, 1, 4, 10.0)
    step = next_step(q, [first, far], None)
    assert isinstance(step, Measure)
    assert step.level != 1  # a 10x gap is settled by the part


def test_a_live_first_pass_level_is_sequential_and_stops_only_when_settled() -> None:
    from crossover.decide.coarse import part_settled

    q = crossover_question(group_targets=False, metrics=("total_tokens_per_s", "ttft_ms.p50"))
    live = PolicyConfig(budget_factor=0.0, sequential=True)
    first = Observation("fast", 1, 0, {"total_tokens_per_s": 1000.0, "ttft_ms.p50": 20.0},
                        16, 16, 5.0)  # fmt: skip
    step = next_step(q, [], live)
    assert isinstance(step, Measure) and not step.sequential  # the reference: whole
    step = next_step(q, [first], live)
    assert isinstance(step, Measure)
    assert (step.target, step.level, step.budget_s, step.sequential) == ("batched", 1, None, True)
    # every metric 25% or more away from every target measured there: settled
    far = {"total_tokens_per_s": 400.0, "ttft_ms.p50": 60.0}
    why = part_settled(q, [first], live, "batched", 1, far)
    assert why is not None and "fast" in why
    # one metric close (TTFT within 10%), or nothing measured there: go on
    assert part_settled(q, [first], live, "batched", 1, {**far, "ttft_ms.p50": 21.0}) is None
    assert part_settled(q, [first], live, "batched", 4, far) is None
    # read back as a part that settled it, it is not measured again; one that does not is
    part = Observation("batched", 1, 0, far, 4, 16, 2.0)
    step = next_step(q, [first, part], live)
    assert isinstance(step, Measure) and step.level != 1
    close = Observation("batched", 1, 0, {**far, "total_tokens_per_s": 950.0}, 4, 16, 2.0)
    step = next_step(q, [first, close], live)
    assert isinstance(step, Measure)
    assert (step.target, step.level, step.sequential) == ("batched", 1, False)


def test_a_part_stops_only_past_the_margin_its_repeat_rule_asks() -> None:
    """A first run's part is not stopped where the repeat rule would call its sign
    uncertain and measure the level again whole (before any spread is known, under 50%):
    on the calibration servers a part stopped 47% away was then measured whole, "a close
    difference". With one repeat asked there is no such rule: 25% settles it."""
    from crossover.decide.coarse import part_settled

    q = crossover_question(group_targets=False, metrics=("total_tokens_per_s", "ttft_ms.p50"))
    live = PolicyConfig(budget_factor=0.0, sequential=True)
    first = Observation("fast", 4, 0, {"total_tokens_per_s": 5897.0, "ttft_ms.p50": 21.4},
                        16, 16, 5.0)  # fmt: skip
    gap = {"total_tokens_per_s": 3965.0, "ttft_ms.p50": 42.1}  # 49% and 97% away
    assert part_settled(q, [first], live, "batched", 4, gap) is None
    once = replace(q, repeats=1)
    why = part_settled(once, [first], live, "batched", 4, gap)
    assert why is not None and why.endswith("(a 25% margin settles it)")
    wide = {"total_tokens_per_s": 3000.0, "ttft_ms.p50": 42.1}  # 97% and 97%
    why = part_settled(q, [first], live, "batched", 4, wide)
    assert why is not None and why.endswith("(a 50% margin settles it)")
    # read back, the part that settled it is not measured again whole
    part = Observation("batched", 4, 0, wide, 7, 16, 2.0)
    step = next_step(q, [first, part], live)
    assert not (isinstance(step, Measure) and (step.target, step.level) == ("batched", 4))
    # the reference's repeats taken while its engine was up: batched will still hold one
    # run there, so the repeat rule still asks its margin (a third behind is not settled)
    again = Observation("fast", 4, 1, {"total_tokens_per_s": 5900.0, "ttft_ms.p50": 21.5},
                        16, 16, 5.0)  # fmt: skip
    third = {"total_tokens_per_s": 4400.0, "ttft_ms.p50": 30.0}  # 34% and 40% away
    assert part_settled(q, [first, again], live, "batched", 4, third) is None
    part = Observation("batched", 4, 0, third, 7, 16, 2.0)
    step = next_step(q, [first, again, part], live)
    assert isinstance(step, Measure) and step.why == "a close difference"


def test_a_sequential_level_stops_only_at_a_wave_s_end() -> None:
    """A level may first stop at its first wave's end, at least 4 requests, on a multiple
    of its streams (6 at 3 streams), and the plan's first stop counts the same way."""
    from crossover.decide.coarse import earliest_stop, first_stop, may_stop_at

    assert [first_stop(c) for c in (1, 2, 3, 4, 5, 16)] == [4, 4, 6, 4, 5, 16]
    assert [n for n in range(1, 14) if may_stop_at(n, 3, None)] == [6, 9, 12]
    assert [n for n in range(1, 14) if may_stop_at(n, 4, 16)] == [4, 8]  # 12 + 4 leaves none
    assert earliest_stop(3, None) == 8 and earliest_stop(3, 8) is None
    assert not any(may_stop_at(n, 3, 8) for n in range(1, 9))


def test_bad_questions_are_refused() -> None:
    with pytest.raises(ValueError, match="two targets"):
        Question("crossover", ("a",), GRID)
    with pytest.raises(ValueError, match="SLO"):
        Question("capacity", ("a", "b"), GRID)
    with pytest.raises(ValueError, match="first"):
        PolicyConfig(budget_factor=-1.0)


def test_coarse_levels_step_and_keep_the_last() -> None:
    assert coarse_levels(GRID, 4.0) == [1, 4, 16, 64, 128]
    assert coarse_levels((1, 4, 16, 64, 128, 256, 512), 4.0) == [1, 4, 16, 64, 256, 512]
    assert math.isclose(coarse_levels((3,), 4.0)[0], 3)


def test_a_time_budget_defers_what_would_pass_it_and_says_what_it_was_for() -> None:
    q = crossover_question()
    free, _ = run(q, {"fast": FAST, "batched": BATCHED})
    assert free.budget is None and not free.deferred
    d, steps = run(q, {"fast": FAST, "batched": BATCHED}, cfg=PolicyConfig(budget=0.15))
    assert d.budget is not None and d.deferred
    allowed, grid = d.budget
    assert allowed == pytest.approx(0.15 * grid)
    assert len(steps) < len(run(q, {"fast": FAST, "batched": BATCHED})[1])
    for x in d.deferred:
        assert x.seconds > 0 and x.why
        assert x.concerns == (("batched",) if x.target == "fast" else ("fast",))
    assert d.unsettled("fast", "batched")
    # a budget the whole decision fits in defers nothing
    roomy, _ = run(q, {"fast": FAST, "batched": BATCHED}, cfg=PolicyConfig(budget=1.0))
    assert not roomy.deferred


def test_a_part_cut_by_time_never_shows_a_latency_lead() -> None:
    """A part cut at a time budget bounds its TTFT p50 from below: a bound under the
    other target's shows nothing (the rest is measured), one over it shows the target
    behind (settled)."""
    q = crossover_question(group_targets=False, metrics=("total_tokens_per_s", "ttft_ms.p50"))
    first = Observation("fast", 1, 0, {"total_tokens_per_s": 1000.0, "ttft_ms.p50": 50.0},
                        4, 4, 5.0)  # fmt: skip
    ahead = Observation("batched", 1, 0, {"total_tokens_per_s": 100.0, "ttft_ms.p50": 10.0},
                        1, 4, 10.0, budget_cut=True)  # fmt: skip
    step = next_step(q, [first, ahead], None)
    assert isinstance(step, Measure)
    assert (step.target, step.level, step.budget_s) == ("batched", 1, None)
    behind = Observation("batched", 1, 0, {"total_tokens_per_s": 100.0, "ttft_ms.p50": 90.0},
                         1, 4, 10.0, budget_cut=True)  # fmt: skip
    step = next_step(q, [first, behind], None)
    assert isinstance(step, Measure) and step.level != 1


def _level(t: str, c: int, tput: float, secs: float, done: int = 10) -> Observation:
    return Observation(t, c, 0, {"total_tokens_per_s": tput}, done, 10, secs)


def test_under_a_budget_each_target_keeps_to_its_part_of_what_is_left() -> None:
    """Three targets, engines started one after another: the second may spend up to its
    equal part of what was left when it started (shared with the third, still waiting);
    a level past it is deferred so the third is measured at all."""
    q = crossover_question(targets=("a", "b", "c"), repeats=1)
    cfg = PolicyConfig(budget=0.5, grid_s=100.0)  # 50 s
    obs = [_level("a", c, 1000.0 * c, 2.0) for c in (1, 4, 16, 64, 128)]  # 10 s
    obs += [_level("b", 1, 950.0, 10.0), _level("b", 4, 3800.0, 10.0)]  # 30 s spent
    # b's part: (50 - 10) / 2 = 20 s from the 10 s spent before it started, so up to 30 s;
    # its level 16 (at least 4 s: twice a's time there) would pass it
    step = next_step(q, obs, cfg)
    assert isinstance(step, Measure)
    assert (step.target, step.level) == ("c", 1)
    # with no target left waiting, the whole budget is open to b's levels again
    obs += [_level("c", 1, 900.0, 2.0)]
    step = next_step(q, obs, cfg)
    assert isinstance(step, Measure) and step.target in ("b", "c")
    # without a budget b's next level comes first, as before
    step = next_step(q, obs[:7], PolicyConfig())
    assert isinstance(step, Measure) and (step.target, step.level) == ("b", 16)


def test_under_a_budget_a_level_is_measured_whole_where_the_part_below_left_a_gap_open() -> None:
    q = crossover_question(repeats=1)
    obs = [_level("fast", c, 1000.0 * c, 2.0) for c in (1, 4, 16, 64, 128)]
    obs += [_level("batched", 1, 900.0, 2.0)]
    part = Observation("batched", 4, 0, {"total_tokens_per_s": 3500.0}, 3, 10, 4.0,
                       budget_cut=True)  # fmt: skip
    obs += [part, _level("batched", 4, 3600.0, 6.0)]  # its rest was wanted: gap under 25%
    free = next_step(q, obs, PolicyConfig())
    assert isinstance(free, Measure) and (free.target, free.level) == ("batched", 16)
    assert free.budget_s is not None  # without a budget: a part first, as before
    step = next_step(q, obs, PolicyConfig(budget=1.0, grid_s=1000.0))
    assert isinstance(step, Measure) and (step.target, step.level) == ("batched", 16)
    assert step.budget_s is None and "whole" in step.why
    # a level below whose gap a part settled (25% or more) keeps the part
    settled = Observation("batched", 4, 0, {"total_tokens_per_s": 2000.0}, 3, 10, 4.0,
                          budget_cut=True)  # fmt: skip
    far = [*obs[:6], settled]
    step = next_step(q, far, PolicyConfig(budget=1.0, grid_s=1000.0))
    assert isinstance(step, Measure) and step.budget_s is not None


def test_a_budget_says_the_repeat_behind_a_lead_found_on_one_run() -> None:
    """Where the budget ends the decision, a level lead that rests on one run of a side
    (the grid repeats) is said with the repeat that would confirm it."""
    q = crossover_question(repeats=2)
    obs = [_level("fast", 1, 2000.0, 2.0), _level("batched", 1, 1000.0, 2.0)]
    d = next_step(q, obs, PolicyConfig(budget=0.1, grid_s=10.0))
    assert isinstance(d, Decision) and d.deferred
    ones = {(x.target, x.level, x.repeat, x.concerns) for x in d.deferred if "one run" in x.why}
    assert ones == {("fast", 1, 1, ("batched",)), ("batched", 1, 1, ("fast",))}
    assert d.unsettled("fast", "batched")


def test_each_target_start_weighs_what_it_was_measured_to_cost() -> None:
    """A budget counts an engine start at its own target's cost where one was measured
    (``start_s_of``: vLLM's start 159 s, llama.cpp's 7 s on the H200), else ``start_s``."""
    from crossover.decide.budget import measure_cost, spent_seconds
    from crossover.decide.state import State

    q = crossover_question(targets=("slow", "quick"), repeats=1)
    cfg = PolicyConfig(budget=0.5, start_s=50.0, start_s_of={"slow": 159.0, "quick": 7.0})
    assert cfg.start_cost("slow") == 159.0 and cfg.start_cost("other") == 50.0
    obs = [
        _level("slow", 1, 100.0, 2.0),
        _level("quick", 1, 90.0, 3.0),
        _level("slow", 4, 400.0, 4.0),
    ]
    # slow started twice, quick once: 9 s measuring + 159 + 7 + 159
    assert spent_seconds(obs, cfg) == pytest.approx(9.0 + 159.0 + 7.0 + 159.0)
    # the engine up (slow's) costs no start; the other pays its own
    s = State(q, obs, cfg)
    assert measure_cost(s, Measure("slow", 4, 0, None, "")) == pytest.approx(4.0)
    cheap = measure_cost(s, Measure("quick", 4, 0, None, ""))
    dear = measure_cost(
        State(q, obs, PolicyConfig(budget=0.5, start_s=159.0)), Measure("quick", 4, 0, None, "")
    )
    assert dear - cheap == pytest.approx(159.0 - 7.0)


def test_a_resumed_level_measured_in_part_then_whole_is_one_measurement(
    tmp_path: Path,
) -> None:
    """A live decision run again reads back both runs of a level first measured in part
    (sequential) and then whole under the same key (the part stays stored): the policy
    weighs one measurement per target, level and repeat, the whole, which supersedes the
    part (``State`` keeps the latest, the database gives them in the order made), not two
    repeats of the level. Only the time spent counts both."""

    from crossover.decide.budget import spent_seconds
    from crossover.decide.live import observations_in
    from crossover.decide.state import State, pair_findings
    from crossover.records.model import RequestRecord
    from crossover.records.store import Store
    from crossover.sweep.driver import SEQUENTIAL_STOP

    def records(n: int) -> list[RequestRecord]:
        ms = 1_000_000
        return [
            RequestRecord(index=i, expected_output_tokens=4, t_send_ns=i * ms,
                          t_first_ns=(i + 1) * ms, t_last_ns=(i + 4) * ms,
                          t_done_ns=(i + 4) * ms, chunk_arrival_ns=[(i + 1) * ms],
                          chunk_chars=[4], status=200, completion_tokens=4,
                          count_source="usage")
            for i in range(n)
        ]  # fmt: skip

    def stored(store: Store, key: str, tput: float, n: int, planned: int | None) -> None:
        run_id = f"{key}:{n}"
        store.create_run(run_id, {}, key)
        store.add_records(run_id, records(n))
        if planned is not None:
            store.add_sample(run_id, SEQUENTIAL_STOP, 0.0, {"planned": planned, "why": "x"})
        summary = {"verdict": "valid", "throughput": {"total_tokens_per_s": tput}}
        store.finish_run(run_id, "done", summary)

    q = crossover_question(levels=(1, 4), group_targets=False)
    live = PolicyConfig(budget_factor=0.0, sequential=True)
    with Store(tmp_path / "sweep.db") as store:
        stored(store, "fast|c=1|r=0", 1000.0, 16, None)
        stored(store, "batched|c=1|r=0", 400.0, 4, 16)  # the part: far behind
        stored(store, "batched|c=1|r=0", 990.0, 16, None)  # the whole: level with fast
        obs = observations_in(store, q.targets)
    # the input holds both runs of the key, the part first
    assert [(o.target, o.level, o.complete) for o in obs] == [
        ("fast", 1, True), ("batched", 1, False), ("batched", 1, True),
    ]  # fmt: skip
    part, whole = obs[1], obs[2]
    s = State(q, obs, live)
    assert len(s.runs) == 2 and s.run("batched", 1) is whole
    assert s.repeats("batched", 1) == [whole]
    assert s.values("batched", "total_tokens_per_s") == {1.0: [990.0]}  # not [400, 990]
    assert ("batched", 1, 0) in s.rest_measured
    # the policy's findings and next step are those of the whole alone
    alone = [obs[0], whole]
    assert pair_findings(s) == pair_findings(State(q, alone, live))
    assert next_step(q, obs, live) == next_step(q, alone, live)
    # the time spent counts both: the part took its seconds too
    assert spent_seconds(obs, live) == pytest.approx(spent_seconds(alone, live) + part.seconds)


def test_a_sequential_level_stops_only_while_a_stop_leaves_requests_unsent() -> None:
    """A closed loop keeps a request in flight on each stream, and those finish whatever the
    stop: a level of two waves, from its first wave on, has nothing left to send, so a stop
    there saves nothing and would make the level a part (measured again whole where the
    drained part leaves a gap open: the H100 replay's SGLang at 256, 510 of 512 sent, then
    all 512 again). Four waves stop after the first."""
    from crossover.decide.coarse import stop_saves
    from crossover.decide.live import SequentialWatch
    from crossover.records.model import RequestRecord

    assert stop_saves(4, 4, 16) and stop_saves(4, 4, None)
    assert not stop_saves(4, 4, 8) and not stop_saves(5, 4, 8)
    q = crossover_question(levels=(1, 4))
    cfg = PolicyConfig(budget_factor=0.0, sequential=True)
    # fast measured at 4: 1000 tokens/s, 10 ms TTFT; batched's requests far behind on both
    fast = Observation("fast", 4, 0, {"total_tokens_per_s": 1000.0, "ttft_ms.p50": 10.0}, 8, 8, 1.0)
    ms = 1_000_000

    def record(i: int) -> RequestRecord:
        return RequestRecord(index=i, expected_output_tokens=4, t_send_ns=0,
                             t_first_ns=100 * ms, t_last_ns=1000 * ms, t_done_ns=1000 * ms,
                             chunk_arrival_ns=[1000 * ms], chunk_chars=[4], status=200,
                             completion_tokens=4, count_source="usage")  # fmt: skip

    def stops_at(planned: int) -> int | None:
        watch = SequentialWatch(q, [fast], cfg, "batched", 4, planned)
        for i in range(planned):
            if watch(record(i)) is not None:
                return i + 1
        return None

    assert stops_at(16) == 4  # one wave finished: 8 more to send
    assert stops_at(8) is None  # two waves: the second is in flight, nothing to save


def test_a_sequential_first_pass_level_that_no_stop_could_shorten_says_it_is_measured_whole() -> (
    None
):
    """Where the question knows a level's requests and a stop after its first wave would
    leave none unsent (two waves: the second is in flight from the first's end), the level
    is measured whole, and its reason says so (the deferred lines and the JSON print it)
    rather than that it stops once it settles. Four waves: sequential, as before; a level
    whose requests are not known: sequential too (a stop may save)."""
    fast = Observation("fast", 4, 0, {"total_tokens_per_s": 1000.0}, 8, 8, 1.0)
    live = PolicyConfig(budget_factor=0.0, sequential=True)

    def step(requests: dict[int, int]) -> Measure:
        q = crossover_question(levels=(4,), requests=requests, group_targets=False)
        m = next_step(q, [fast], live)
        assert isinstance(m, Measure) and (m.target, m.level) == ("batched", 4)
        return m

    two = step({4: 8})
    assert not two.sequential and "stopped once" not in two.why
    assert two.why.startswith("first pass, whole: a stop would save nothing")
    assert "8 requests on 4 streams" in two.why
    for requests in ({4: 16}, {}):
        four = step(requests)
        assert four.sequential and "stopped once it settles" in four.why


def _single_run_side(b16: float, a4: tuple[float, float]) -> list[Observation]:
    """a and b on TTFT p50 at 1, 4 and 16: level at 1 and 4 (a's repeats at 4 as ``a4``),
    b measured once at 16 (``b16``) against a's two runs of 100 ms."""

    def ob(t: str, c: int, r: int, v: float) -> Observation:
        return Observation(t, c, r, {"ttft_ms.p50": v}, 10, 10, 5.0)

    return [
        ob("a", 1, 0, 100.0), ob("a", 1, 1, 102.0), ob("a", 4, 0, a4[0]), ob("a", 4, 1, a4[1]),
        ob("a", 16, 0, 100.0), ob("a", 16, 1, 101.0),
        ob("b", 1, 0, 101.0), ob("b", 1, 1, 100.0), ob("b", 4, 0, 118.0), ob("b", 4, 1, 117.0),
        ob("b", 16, 0, b16),
    ]  # fmt: skip


def test_a_side_resting_on_one_run_is_repeated_where_the_metric_moves() -> None:
    """The H100 decision B (docs/results/h100/moe-warm-decide-b): SGLang's one run at 256,
    TTFT p50 1,250 ms against vLLM's 444 and 526, alone made vLLM's side of a crossover the
    grid does not have (its two runs there: 708 and 527). The median spread calls such a gap
    certain; where the metric's repeats have moved by more than 10% at some level, a side one
    run alone shows is repeated before it is concluded."""
    q = Question("crossover", ("a", "b"), (1, 4, 16), ("ttft_ms.p50",))
    obs = _single_run_side(b16=300.0, a4=(100.0, 135.0))  # a's repeats at 4: 30% apart
    step = next_step(q, obs)
    assert isinstance(step, Measure), step
    assert (step.target, step.level, step.repeat) == ("b", 16, 1)
    assert "alone, on one run of b" in step.why
    # measured: the side has its two runs, the policy settles
    obs.append(Observation("b", 16, 1, {"ttft_ms.p50": 290.0}, 10, 10, 5.0))
    assert isinstance(next_step(q, obs), Decision)
    # repeats that never moved more than 10%: one run is as the median spread judges it
    steady = _single_run_side(b16=300.0, a4=(100.0, 104.0))
    assert isinstance(next_step(q, steady), Decision)
    # switched off (--no-confirm-single-runs)
    off = PolicyConfig(confirm_single_runs=False)
    assert isinstance(next_step(q, obs[:-1], off), Decision)


def test_the_answer_notes_a_metric_whose_repeats_moved() -> None:
    """A metric whose repeats of one level moved by more than 10% gets a note with the
    answer (its intervals come from repeats back to back); one whose repeats held does not."""
    q = Question("crossover", ("a", "b"), (1, 4, 16), ("ttft_ms.p50",))
    obs = _single_run_side(b16=300.0, a4=(100.0, 135.0))
    obs.append(Observation("b", 16, 1, {"ttft_ms.p50": 290.0}, 10, 10, 5.0))
    d = next_step(q, obs)
    assert isinstance(d, Decision)
    (note,) = [n for n in d.notes if "moved by up to" in n]
    assert note.startswith("TTFT p50: the repeats of one level moved by up to 35% (a at 4)")
    steady = _single_run_side(b16=300.0, a4=(100.0, 104.0))
    d = next_step(q, steady)
    assert isinstance(d, Decision)
    assert not any("moved by up to" in n for n in d.notes)
    assert "note: TTFT p50: the repeats" not in "\n".join(decision_lines(d))


def _gc(target: str, level: int, repeat: int, *seconds: float) -> GcRun:
    at = datetime(2026, 12, 6, 11, 58, 55, tzinfo=UTC)
    pauses = tuple(GcPause("sglang.log", 900 + i, at, x, 2) for i, x in enumerate(seconds))
    return GcRun(target, f"c={level}", float(level), repeat, pauses, (True,) * len(seconds),
                 "SGLang", at)  # fmt: skip


def test_the_note_says_a_gc_pause_that_met_the_level_it_names() -> None:
    """A logged long garbage collection (``crossover.analysis.gc``) that met a run of the
    level whose TTFT repeats moved most is said in the note; one at another level, or on a
    metric that is not a TTFT, is not; none passed, the note is as before."""
    q = Question("crossover", ("a", "b"), (1, 4, 16), ("ttft_ms.p50", "itl_ms.p50"))
    obs = _single_run_side(b16=300.0, a4=(100.0, 135.0))
    obs.append(Observation("b", 16, 1, {"ttft_ms.p50": 290.0}, 10, 10, 5.0))
    # ITL's repeats moved too, as TTFT's: a's at 4 by 35%
    obs = [replace(o, values={**o.values, "itl_ms.p50": o.values["ttft_ms.p50"]}) for o in obs]
    said = "a at 4; a 0.53 s GC pause in SGLang's front end met repeat 1"
    d = next_step(q, obs, gc=[_gc("a", 4, 1, 0.5337), _gc("b", 16, 0, 0.6)])
    assert isinstance(d, Decision)
    ttft, itl = [n for n in d.notes if "moved by up to" in n]
    assert ttft.startswith(f"TTFT p50: the repeats of one level moved by up to 35% ({said}): ")
    assert itl.startswith("ITL p50: the repeats of one level moved by up to 35% (a at 4): ")
    # the remedy beside the pause it would remove, and only there
    assert ttft.endswith(
        "; freeze_gc: true under a's launch (the engine's own GC freeze "
        "before each level) removed such pauses where measured"
    )
    assert "freeze_gc" not in itl
    two = next_step(q, obs, gc=[_gc("a", 4, 0, 0.53, 0.6), _gc("a", 4, 1, 0.5)])
    assert isinstance(two, Decision)
    assert (
        "(a at 4; GC pauses in SGLang's front end met repeat 0 (0.53 s, 0.60 s) and repeat 1 "
        "(0.50 s)): " in "\n".join(two.notes)
    )
    elsewhere = next_step(q, obs, gc=[_gc("a", 16, 1, 0.53), _gc("b", 4, 1, 0.53)])
    assert elsewhere == next_step(q, obs)
    assert isinstance(elsewhere, Decision)
    assert not any("GC pause" in n for n in elsewhere.notes)


def test_a_pause_with_the_collector_frozen_names_no_freeze() -> None:
    """A target whose collector was frozen already (``GcRun.frozen``: its log shows the
    freeze, or its launch has freeze_gc: true) is not told to freeze it: the note says it
    was frozen (two collections of 0.05-0.06 s met SGLang so at 20 requests/s,
    docs/results/h100/moe-open-decide-freeze). One of two runs unfrozen: the remedy."""
    q = Question("crossover", ("a", "b"), (1, 4, 16), ("ttft_ms.p50",))
    obs = _single_run_side(b16=300.0, a4=(100.0, 135.0))
    obs.append(Observation("b", 16, 1, {"ttft_ms.p50": 290.0}, 10, 10, 5.0))
    frozen = replace(_gc("a", 4, 1, 0.0566), frozen=True)
    d = next_step(q, obs, gc=[frozen])
    assert isinstance(d, Decision)
    (note,) = [n for n in d.notes if "moved by up to" in n]
    assert "(a at 4; a 0.06 s GC pause in SGLang's front end met repeat 1): " in note
    assert note.endswith(
        "; a's collector was frozen then (freeze_gc: true): such pauses collect the objects "
        "made since the last freeze"
    )
    assert "removed such pauses" not in note
    mixed = next_step(q, obs, gc=[frozen, _gc("a", 4, 0, 0.53)])
    assert isinstance(mixed, Decision)
    assert "; freeze_gc: true under a's launch (the engine's own GC freeze" in "\n".join(
        mixed.notes
    )
