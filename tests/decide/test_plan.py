"""The plan ``decide --check`` prints says how a live decision measures each first-pass
level: the reference's whole; a later target's sequential where a stop may leave requests
unsent, whole where it would save none (two waves) or where the reference is not measured
there. The plan asks the policy's own rule, so it says what the live run then does."""

from __future__ import annotations

from pathlib import Path

from crossover.decide.coarse import first_pass_all, first_pass_levels, first_pass_steps
from crossover.decide.model import Measure, Observation, Question
from crossover.decide.plan import Plan, decision_plan, later_lines, plan_json, plan_lines
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


def _yaml_plan(tmp_path: Path, per_concurrency: int) -> Plan:
    """The plan ``decide --check --prior`` makes of a YAML whose levels are
    ``per_concurrency`` waves (servers already running: no engine start), from a forecast
    whose output tokens/s make every quotient exact."""
    import json

    from crossover.decide.live import question_for
    from crossover.sweep.config import load_sweep_config

    config = tmp_path / "sweep.yaml"
    config.write_text(
        "concurrency: [1, 4, 16]\n"
        f"requests_per_concurrency: {per_concurrency}\nmin_requests_per_level: 4\n"
        "warmup_requests: 0\nrepeats: 1\noutput_tokens: 100\ninput_tokens: 8\n"
        "targets:\n"
        "  - {name: a, url: 'http://127.0.0.1:9', model: m}\n"
        "  - {name: b, url: 'http://127.0.0.1:9', model: m}\n"
    )
    rates = {"a": {1: 100.0, 4: 200.0, 16: 400.0}, "b": {1: 50.0, 4: 100.0, 16: 200.0}}
    prior = tmp_path / "forecast.json"
    prior.write_text(
        json.dumps(
            {
                "schema": "crossover.forecast/1",
                "rows": [
                    {"target": t, "concurrency": c, "total_tok_s": 2 * v, "output_tok_s": v}
                    for t, mine in rates.items()
                    for c, v in mine.items()
                ],
            }
        )
    )
    cfg = load_sweep_config(config, {})
    q = question_for(cfg, "crossover", ["total_tokens_per_s"])
    return decision_plan(cfg, q, None, PolicyConfig(), prior, None)


def test_four_wave_levels_give_the_first_pass_as_a_range_from_their_first_stop(
    tmp_path: Path,
) -> None:
    """Four waves a level: b's 4 and 16 are sequential, each stopping at the earliest once
    one wave has finished, the wave then in flight drained: two of its four waves. The low
    end counts them so, the high end whole; b's 1 (4 requests on one stream) is whole at
    both ends, and so is the reference."""
    p = _yaml_plan(tmp_path, 4)
    assert [m.sequential for m in p.steps["b"]] == [False, True, True]
    est = p.estimate
    assert est is not None and est.first_pass is not None and est.first_pass_low is not None
    # a: 4 x 100 / 100 + 16 x 100 / 200 + 64 x 100 / 400; b: 4 x 100 / 50 + 16 + 32
    assert est.first_pass.measuring_s == 28.0 + 56.0
    # b at 4: 7 sent by its first stop, two waves of 4; at 16: 31 sent, two waves of 16
    assert est.first_pass_low.measuring_s == 28.0 + 8.0 + 8 * 100 / 100 + 32 * 100 / 200
    assert (est.first_pass_low.stopped, est.first_pass.stopped) == (2, 0)
    assert plan_lines(p)[-1].endswith(
        "first pass 60-84 s = 1.0-1.4 GPU-min (low with 2 sequential levels "
        "stopped at the first chance, high with every level whole; the rest depends on what "
        "it measures)"
    )
    data = plan_json(p, "sweep.yaml")["estimate"]
    assert data["first_pass_low"]["measuring_s"] == 60.0
    assert data["first_pass_high"] == data["first_pass"]
    assert data["first_pass"]["measuring_s"] == 84.0


def test_two_wave_levels_give_one_first_pass_figure(tmp_path: Path) -> None:
    """Two waves a level: no stop saves a request, nothing is sequential, and the low and
    high ends are the same, printed as one figure."""
    p = _yaml_plan(tmp_path, 2)
    assert not any(m.sequential for mine in p.steps.values() for m in mine)
    est = p.estimate
    assert est is not None and est.first_pass is not None
    assert est.first_pass_low == est.first_pass
    # a: 4 + 8 x 100 / 200 + 32 x 100 / 400; b: 8 + 8 + 16
    assert est.first_pass.measuring_s == 16.0 + 32.0
    assert plan_lines(p)[-1].endswith(
        "first pass 48 s = 0.8 GPU-min (the rest depends on what it measures)"
    )
    data = plan_json(p, "sweep.yaml")["estimate"]
    assert data["first_pass_low"] == data["first_pass_high"] == data["first_pass"]
