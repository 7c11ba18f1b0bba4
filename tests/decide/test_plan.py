"""The plan ``decide --check`` prints says how a live decision measures each first-pass
level: the reference's whole; a later target's sequential where a stop may leave requests
unsent, whole where it would save none (two waves) or where the reference is not measured
there. The plan asks the policy's own rule, so it says what the live run then does."""

from __future__ import annotations

from crossover.decide.coarse import first_pass_all, first_pass_levels
from crossover.decide.model import Measure, Observation, Question
from crossover.decide.plan import Plan, first_pass_steps, later_lines, plan_json, plan_lines
from crossover.decide.state import PolicyConfig, State


def _question(requests: dict[int, int], **kw: object) -> Question:
    base: dict[str, object] = {
        "kind": "crossover",
        "targets": ("ref", "b", "c"),
        "levels": (1, 4, 16),
        "metrics": ("total_tokens_per_s",),
        "repeats": 1,
        "requests": requests,
    }
    base.update(kw)
    return Question(**base)  # type: ignore[arg-type]


def _plan(q: Question) -> Plan:
    first = first_pass_levels(q, None, 4.0)
    return Plan(
        question=q,
        first_pass=first,
        steps=first_pass_steps(q, first),
        grid_levels=len(q.targets) * len(q.levels),
        reference_from_prior=False,
        prior_file=False,
        estimate=None,
        unread=None,
        start_s=105.0,
        start_s_given=False,
    )


def _live_steps(q: Question, first: dict[str, list[int]]) -> list[Measure]:
    """The later targets' first-pass steps the policy asks for in a live decision
    (``decide_live``'s policy: ``budget_factor`` 0, sequential), the reference's levels
    measured whole."""
    ref = next(iter(first))
    obs = [
        Observation(ref, c, 0, {"total_tokens_per_s": 100.0 * c}, n, n, 10.0)
        for c in first[ref]
        for n in [q.requests.get(c, 8)]
    ]
    s = State(q, obs, PolicyConfig(budget_factor=0.0, sequential=True))
    return first_pass_all(s, list(first), sorted({c for cs in first.values() for c in cs}))


def test_two_wave_levels_are_said_whole_not_sequential() -> None:
    """Every level two waves (``requests_per_concurrency: 2``, at least 4): no stop saves a
    request, so the plan says each later level is measured whole, as the live run does."""
    p = _plan(_question({1: 4, 4: 8, 16: 32}))
    lines = plan_lines(p)
    text = "\n".join(lines)
    assert "sequential levels after it" not in text
    assert "reference ref (the YAML's first), its levels whole" in lines[1]
    assert later_lines(p) == [
        "  after it, every level whole: a stop would save nothing, each level's requests all "
        "sent by the time it may first stop"
    ]
    steps = plan_json(p, "x.yaml")["first_pass_steps"]
    assert list(steps) == ["ref", "b", "c"]
    assert all(not s["sequential"] for mine in steps.values() for s in mine)
    assert steps["b"][1] == {
        "level": 4,
        "sequential": False,
        "why": "first pass, whole: a stop would save nothing (8 requests on 4 streams, all "
        "sent by the time 4 have finished)",
    }
    assert [s["why"] for s in steps["ref"]] == ["first pass"] * 3


def test_a_level_a_stop_may_shorten_is_said_sequential_and_the_rest_whole() -> None:
    """Four waves at 4 and 16 (a stop after the first leaves requests unsent): those are
    sequential; 1 (4 requests on one stream, all sent by the time 4 have finished) whole."""
    p = _plan(_question({1: 4, 4: 16, 16: 64}))
    assert later_lines(p) == [
        "  after it, sequential (each stops once it settles against those measured there): "
        "b 4,16; c 4,16",
        "  after it, whole (a stop would save nothing, each level's requests all sent by the "
        "time it may first stop): b 1; c 1",
    ]
    steps = plan_json(p, "x.yaml")["first_pass_steps"]
    assert [s["sequential"] for s in steps["b"]] == [False, True, True]
    assert [s["sequential"] for s in steps["ref"]] == [False, False, False]


def test_a_sweep_held_for_a_duration_is_sequential_throughout() -> None:
    """No level's requests known (``duration_s_per_level``): a stop may save, every later
    level is sequential."""
    assert later_lines(_plan(_question({}))) == [
        "  after it, every level sequential: each stops once it settles against those "
        "measured there"
    ]


def test_a_level_the_reference_is_not_measured_at_is_whole() -> None:
    """The reference's own levels stop at 4: b's and c's 16 has no reference run to settle
    against, so the live run measures it whole ("first pass")."""
    q = _question({1: 4, 4: 16, 16: 64}, target_levels={"ref": (1, 4)})
    p = _plan(q)
    assert p.first_pass == {"ref": [1, 4], "b": [1, 4, 16], "c": [1, 4, 16]}
    assert (
        later_lines(p)[-1] == "  after it, whole (the reference is not measured there): b 16; c 16"
    )
    assert plan_json(p, "x.yaml")["first_pass_steps"]["c"][2] == {
        "level": 16,
        "sequential": False,
        "why": "first pass",
    }


def _key(m: Measure) -> tuple[str, int, bool, str]:
    return (m.target, m.level, m.sequential, m.why)


def test_the_plan_says_what_the_live_policy_asks_for() -> None:
    """Each later target's first-pass step in the plan is the one the live policy asks for
    once the reference is measured (target, level, sequential, why), whatever the levels'
    requests."""
    for requests in ({1: 4, 4: 8, 16: 32}, {1: 4, 4: 16, 16: 64}, {}, {1: 8, 4: 8, 16: 16}):
        for kw in ({}, {"target_levels": {"ref": (1, 4)}}, {"group_targets": False}):
            q = _question(requests, **kw)  # type: ignore[arg-type]
            p = _plan(q)
            planned = [m for t, mine in p.steps.items() if t != "ref" for m in mine]
            live = _live_steps(q, p.first_pass)
            assert planned
            assert sorted(map(_key, planned)) == sorted(map(_key, live)), (requests, kw)
