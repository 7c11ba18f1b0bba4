"""The decide policy along arrival rates (docs/decide.md "Along rates"): the same policy,
with what is closed-loop wave logic left out (levels whole), the saturation skip asking
for the analysis's overload flag, the time of an open-loop level (its sending time and
about one request time), the first pass filling the top of the range, refinement between
fractional rates, and ``decide --check`` on a rate YAML."""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from crossover.analysis.refine import bisect_level
from crossover.cli.app import main
from crossover.decide.budget import level_seconds
from crossover.decide.coarse import WHOLE_ON_RATES, linear_fill, pass_levels
from crossover.decide.live import question_for
from crossover.decide.model import Decision, Measure, Observation, Question
from crossover.decide.policy import next_step
from crossover.decide.skip import MONOTONE, MONOTONE_RATE, stop_reason
from crossover.decide.state import PolicyConfig, State, overload_notes, short_level_notes
from crossover.errors import UsageError
from crossover.spec.slo import SloTerm
from crossover.sweep.config import load_sweep_config

ROOT = Path(__file__).resolve().parents[2]
RATES = (1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 20.0)


def rate_question(**kw: object) -> Question:
    base: dict[str, object] = {
        "kind": "crossover",
        "targets": ("fast", "slow"),
        "levels": RATES,
        "metrics": ("total_tokens_per_s", "ttft_ms.p50"),
        "axis": "rate",
    }
    base.update(kw)
    return Question(**base)  # type: ignore[arg-type]


def test_the_first_pass_fills_the_top_of_a_rate_range() -> None:
    # 4-fold steps in log give 1, 4, 16, 20: one step from 4 to 16 crosses the range
    # where an open loop's latencies bend; a quarter of the top rate is the widest gap
    assert linear_fill(RATES, [1.0, 4.0, 16.0, 20.0], 5.0) == [1.0, 4.0, 8.0, 12.0, 16.0, 20.0]
    assert pass_levels(rate_question(), None, 4.0) == [1.0, 4.0, 8.0, 12.0, 16.0, 20.0]
    # the same levels along concurrency keep the 4-fold steps
    conc = Question("crossover", ("a", "b"), (1, 2, 4, 8, 12, 16, 20))
    assert pass_levels(conc, None, 4.0) == [1, 4, 16, 20]
    # a gap the grid itself leaves is the grid's: nothing to fill it with
    assert linear_fill((1.0, 10.0), [1.0, 10.0], 2.5) == [1.0, 10.0]


def test_a_rate_question_refuses_capacity() -> None:
    with pytest.raises(ValueError, match="capacity question works along concurrency"):
        rate_question(kind="capacity", slo=SloTerm(metric="ttft_ms", stat="p99", limit=500.0))


def _obs(
    t: str, level: float, tput: float, ttft: float, overloaded: bool | None, repeat: int = 0
) -> Observation:
    values = {"total_tokens_per_s": tput, "ttft_ms.p50": ttft}
    return Observation(t, level, repeat, values, 64, 64, 20.0, overloaded=overloaded)


def _saturated(overloaded: bool | None) -> list[Observation]:
    """``slow`` flat from 4 to 8 requests/s (fell behind?), ``fast`` following the
    arrivals, far ahead at 8 on throughput and TTFT."""
    return [
        _obs("fast", 4.0, 1000.0, 50.0, False),
        _obs("fast", 8.0, 2000.0, 60.0, False),
        _obs("slow", 4.0, 1000.0, 70.0, False),
        _obs("slow", 8.0, 1100.0, 900.0, overloaded),
    ]


def test_the_saturation_skip_along_rates_asks_for_the_overload_flag() -> None:
    cfg = PolicyConfig()
    # a flat throughput the analysis does not call overloaded: no skip
    assert stop_reason(State(rate_question(), _saturated(False), cfg), "slow", 12.0) is None
    # overloaded at 8 requests/s: the rest of its rates are skipped, said in requests/s
    skip = stop_reason(State(rate_question(), _saturated(True), cfg), "slow", 12.0)
    assert skip is not None
    assert skip.levels == (12.0, 16.0, 20.0)
    assert skip.assumption == MONOTONE_RATE
    assert "saturated by 8 requests/s (+10% per doubling of the rate from 4), overloaded" in (
        skip.reason
    )
    # along concurrency the same curves skip as before (no flag there: a closed loop)
    conc = Question("crossover", ("fast", "slow"), (1, 2, 4, 8, 12, 16, 20))
    closed = [
        Observation(o.target, int(o.level), o.repeat, o.values, 64, 64, 20.0)
        for o in _saturated(None)
    ]
    skip = stop_reason(State(conc, closed, cfg), "slow", 12)
    assert skip is not None and skip.assumption == MONOTONE
    assert "saturated by 8 (+10% per doubling from 4)" in skip.reason


def test_an_open_loop_level_takes_its_sending_time_and_one_request_time() -> None:
    # 64 requests a level: at 4 requests/s 16 s of arrivals, and it took 19 s (3 s tail)
    q = rate_question(requests=dict.fromkeys(RATES, 64))
    s = State(q, [_obs("fast", 4.0, 1000.0, 50.0, False)], PolicyConfig())
    s.runs[("fast", 4.0, 0)] = Observation(
        "fast", 4.0, 0, {"total_tokens_per_s": 1.0}, 64, 64, 19.0
    )
    assert level_seconds(s, "fast", 16.0) == pytest.approx(64 / 16 + 3.0)
    assert level_seconds(s, "fast", 1.0) == pytest.approx(64 / 1 + 3.0)
    # held for a duration (requests unknown): as long as the level measured
    held = State(rate_question(), list(s.runs.values()), PolicyConfig())
    assert level_seconds(held, "fast", 16.0) == pytest.approx(19.0)
    # along concurrency the closed loop's rule: sqrt of the level ratio above it
    conc = Question("crossover", ("fast", "slow"), (4, 16))
    closed = State(conc, [Observation("fast", 4, 0, {}, 64, 64, 19.0)], PolicyConfig())
    assert level_seconds(closed, "fast", 16) == pytest.approx(19.0 * 2)


def _run(q: Question, truth: dict[str, tuple[float, float]]) -> tuple[Decision, list[Measure]]:
    """TTFT p50 linear in the rate per target (``a + b r`` ms), 1% seeded noise."""
    rng = random.Random(3)
    obs: list[Observation] = []
    steps: list[Measure] = []
    for _ in range(200):
        step = next_step(q, obs, PolicyConfig())
        if isinstance(step, Decision):
            return step, steps
        steps.append(step)
        a, b = truth[step.target]
        ttft = (a + b * step.level) * (1.0 + rng.uniform(-0.01, 0.01))
        values = {"ttft_ms.p50": ttft, "total_tokens_per_s": 100.0 * step.level}
        obs.append(Observation(step.target, step.level, step.repeat, values, 10, 10, 5.0))
    raise AssertionError("the policy did not settle")


def test_refinement_bisects_between_fractional_rates() -> None:
    # A: 50 + 40 r ms, B: 80 + 15 r ms: they cross at 1.2 requests/s
    grid = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
    q = Question("crossover", ("a", "b"), grid, ("ttft_ms.p50",), group_targets=False, axis="rate")
    d, steps = _run(q, {"a": (50.0, 40.0), "b": (80.0, 15.0)})
    # the analysis's integer bisection has no level between 1 and 2; the grid's 1.5 is
    assert bisect_level(1, 2) is None
    assert 1.5 in {s.level for s in steps}
    assert any(s.why.startswith("refining") and s.level == 1.5 for s in steps)
    (x,) = [f for f in d.findings if f.kind == "crossover"]
    assert (x.below, x.above, x.axis) == ("a", "b", "rate")
    assert x.interval is not None and x.interval[0] <= 1.2 <= x.interval[1]
    assert x.interval[1] - x.interval[0] <= 0.5 + 1e-9
    # every level whole: nothing sequential, nothing cut at a time
    assert all(s.budget_s is None and not s.sequential for s in steps)


def _rate_yaml(tmp_path: Path, **extra: object) -> Path:
    config = tmp_path / "rates.yaml"
    target = {"engine": "vllm", "model": "calib"}
    config.write_text(
        yaml.safe_dump(
            {
                "name": "rates",
                "rates": [0.5, 1, 2, 4, 8],
                "output_tokens": 8,
                "requests_per_level": 16,
                "repeats": 2,
                "targets": [
                    {"name": "a", "url": "http://127.0.0.1:9", **target},
                    {"name": "b", "url": "http://127.0.0.1:9", **target},
                ],
                **extra,
            }
        )
    )
    return config


def test_a_rate_sweep_makes_a_question_along_rates(tmp_path: Path) -> None:
    cfg = load_sweep_config(_rate_yaml(tmp_path))
    q = question_for(cfg, "crossover", ["ttft_ms.p50"])
    assert q.axis == "rate"
    assert q.levels == (0.5, 1.0, 2.0, 4.0, 8.0)
    assert q.requests == dict.fromkeys(q.levels, 16)
    assert not q.any_level  # a rate sweep takes no refine: the grid's rates only
    lead = question_for(cfg, "lead", ["ttft_ms.p50"], at=[0.5, 4])
    assert lead.at == (0.5, 4)
    with pytest.raises(
        UsageError, match=re.escape("--at 3: not a level of the sweep (0.5,1,2,4,8)")
    ):
        question_for(cfg, "lead", ["ttft_ms.p50"], at=[3])
    with pytest.raises(UsageError, match=r"^--question capacity works along concurrency"):
        question_for(cfg, "capacity", ["ttft_ms.p99"])


def test_check_prints_the_plan_along_rates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _rate_yaml(tmp_path)
    plan = tmp_path / "plan.json"
    argv = ["decide", "--config", str(config), "--check", "--remote", "--json", str(plan)]
    argv += ["--metric", "ttft_ms.p50"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "decide plan: crossover on ttft_ms.p50 along arrival rates (requests/s" in printed
    # 4-fold steps 0.5, 2, 8 and the top filled to a quarter of 8 apart: 4
    assert "  a: 0.5,2,4,8" in printed and "  b: 0.5,2,4,8" in printed
    assert "after it, every level whole: an open loop's level runs whole" in printed
    data = json.loads(plan.read_text())
    assert data["question"]["axis"] == "rate"
    assert data["first_pass"]["b"] == [0.5, 2.0, 4.0, 8.0]
    assert {s["why"] for s in data["first_pass_steps"]["b"]} == {WHOLE_ON_RATES}
    assert not any(s["sequential"] for s in data["first_pass_steps"]["b"])


def test_check_refuses_a_prior_along_rates_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prior = ROOT / "docs" / "results" / "h100" / "moe-warm-grid" / "prediction.json"
    argv = ["decide", "--config", str(_rate_yaml(tmp_path)), "--check", "--remote"]
    assert main([*argv, "--prior", str(prior)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: --prior: the advisor's forecast predicts per concurrency level, not per "
        "arrival rate; a question along rates takes no prior"
    )


def test_a_short_open_loop_level_leaves_throughput_comparisons_not_latencies() -> None:
    """A level where one repeat was too short for a steady state (``Observation.short``):
    its throughput is ramp-up and drain, so the whole level leaves the throughput values
    the decision compares (as the sweep's analysis leaves it), and its TTFT stays."""

    def obs(level: float, repeat: int, short: bool | None) -> Observation:
        values = {"total_tokens_per_s": 1000.0 * level, "ttft_ms.p50": 50.0 + level}
        return Observation("fast", level, repeat, values, 32, 32, 20.0, short=short)

    runs = [obs(1.0, 0, False), obs(1.0, 1, False), obs(8.0, 0, False), obs(8.0, 1, True)]
    s = State(rate_question(), runs, PolicyConfig())
    assert s.values("fast", "total_tokens_per_s") == {1.0: [1000.0, 1000.0]}
    assert s.values("fast", "ttft_ms.p50") == {1.0: [51.0, 51.0], 8.0: [58.0, 58.0]}
    # a closed-loop level (short None) is never left out
    closed = [Observation("fast", 8, 0, {"total_tokens_per_s": 5.0}, 8, 8, 1.0)]
    q = Question("crossover", ("fast", "slow"), (1, 8))
    assert State(q, closed, PolicyConfig()).values("fast", "total_tokens_per_s") == {8.0: [5.0]}


def test_short_levels_left_out_of_a_throughput_answer_are_said() -> None:
    """The answer names the short levels its throughput comparison left out, and how long
    a level should send to keep them (the largest ``short_needed_s``); a question asking
    only latencies, or without short levels, has no such note."""

    def obs(t: str, level: float, repeat: int, needed: float | None) -> Observation:
        values = {"total_tokens_per_s": 1000.0 * level, "ttft_ms.p50": 50.0 + level}
        short = needed is not None
        return Observation(
            t,
            level,
            repeat,
            values,
            32,
            32,
            20.0,
            short=short,
            short_needed_s=needed,
            short_by_request_times=short or None,
        )

    runs = [
        obs(t, c, r, (24.2 if t == "slow" else 30.1) if c == 8.0 and r == 1 else None)
        for t in ("fast", "slow")
        for c in (1.0, 8.0)
        for r in (0, 1)
    ]
    s = State(rate_question(), runs, PolicyConfig())
    assert short_level_notes(s) == [
        "total tokens/s: levels too short for a steady state left out of the comparison "
        "(fast at 8; slow at 8 requests/s: arrivals under 3 request times, so their window "
        "is ramp-up and drain; latencies there stay compared); duration_s_per_level >= 31 s "
        "measures them"
    ]
    latencies = replace(rate_question(), metrics=("ttft_ms.p50",))
    assert short_level_notes(State(latencies, runs, PolicyConfig())) == []
    steady = [replace(o, short=False, short_needed_s=None) for o in runs]
    assert short_level_notes(State(rate_question(), steady, PolicyConfig())) == []


def test_a_short_level_that_served_more_than_arrived_is_said_so() -> None:
    """A level short only because its window served more than arrived is said with that
    reason, not "arrivals under 3 request times", and with the length its share asks
    (``short_needed_s``); both reasons among the levels: both said; observations that do
    not say why: no reason made up."""

    def obs(
        level: float, repeat: int, needed: float | None = None, timed: bool | None = None
    ) -> Observation:
        values = {"total_tokens_per_s": 1000.0 * level}
        o = Observation("fast", level, repeat, values, 32, 32, 40.0)
        if needed is None:
            return o
        return replace(o, short=True, short_needed_s=needed, short_by_request_times=timed)

    runs = [obs(c, r) for c in (1.0, 8.0) for r in (0, 1)]
    runs[3] = replace(obs(8.0, 1, 83.04, False), short_served_share=1.1098)
    (note,) = short_level_notes(State(rate_question(), runs, PolicyConfig()))
    assert note == (
        "total tokens/s: levels too short for a steady state left out of the comparison "
        "(fast at 8 requests/s: their window served 111% of arrivals, so it is ramp-up and "
        "drain; latencies there stay compared); duration_s_per_level >= 84 s measures them"
    )
    runs[1] = obs(1.0, 1, 30.0, True)
    (both,) = short_level_notes(State(rate_question(), runs, PolicyConfig()))
    assert (
        "(fast at 1,8 requests/s: arrivals under 3 request times or a window that served "
        "111% of arrivals, so their window is ramp-up and drain; " in both
    )
    unsaid = [replace(o, short_by_request_times=None, short_served_share=None) for o in runs]
    (plain,) = short_level_notes(State(rate_question(), unsaid, PolicyConfig()))
    assert "requests/s: their window is ramp-up and drain; latencies" in plain


def test_replay_of_the_frozen_open_loop_decision_says_why_sglang_20_was_short(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/results/h100/moe-open-decide-freeze: SGLang's rate-20 repeat 1 sent for 40 s,
    3.6 request times, and was short because its window served 111% of the arrivals; the
    note says so and asks 84 s (it said "arrivals under 3 request times" and 34 s)."""
    root = Path(__file__).resolve().parents[2] / "docs/results/h100/moe-open-decide-freeze"
    args = ["decide", "--replay", str(root), "--metric", "total_tokens_per_s"]
    # TTFT p99 is what repeats SGLang's 20 (a throughput question alone leaves it at one
    # run: both kept up there, a tie with no sign to settle)
    p99 = ["--metric", "ttft_ms.p99"]
    assert main([*args, "--metric", "ttft_ms.p50", *p99, "--tie-margin", "0.03"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (note,) = [x for x in lines if "too short for a steady state" in x]
    assert note == (
        "note: total tokens/s: levels too short for a steady state left out of the "
        "comparison (sglang at 20 requests/s: their window served 111% of arrivals, so it "
        "is ramp-up and drain; latencies there stay compared); duration_s_per_level >= 84 s "
        "measures them"
    )


def test_replay_of_the_short_open_loop_grid_says_what_throughput_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On the committed H100 open-loop grid (16 s of arrivals a level), the replayed
    answer's throughput rests on levels 1-4 alone, where both kept up, and its note says
    why the rest went. (SGLang's 4 is measured once: both kept up there, so no throughput
    sign asks for its short repeat.)"""
    root = Path(__file__).resolve().parents[2] / "docs/results/h100/moe-open"
    assert main(["decide", "--replay", str(root), "--metric", "total_tokens_per_s"]) == 0
    lines = capsys.readouterr().out.splitlines()
    finding = (
        "  total tokens/s: vllm vs sglang: both kept up with the arrivals at every level "
        "compared: what each served there is the arrival rate (levels 1-4)"
    )
    assert finding in lines
    note = next(x for x in lines if "too short for a steady state" in x)
    assert "(sglang at 8,12,16,20; vllm at 8,12,16,20 requests/s: " in note
    # the share of sglang's 20 (122% of arrivals in 16 s: a 2.8 s gap) asks 60 s, where 3
    # x its E2E p50 asks 31 s
    assert "arrivals under 3 request times or a window that served 114-122% of" in note
    assert note.endswith("duration_s_per_level >= 60 s measures them")


def test_an_overloaded_level_is_said_in_the_answer() -> None:
    """A target that fell behind at a rate (``Observation.overloaded``) is named with its
    levels, as the sweep's output names it; none overloaded, no note."""

    def obs(t: str, level: float, repeat: int, over: bool) -> Observation:
        values = {"total_tokens_per_s": 1000.0 * level, "ttft_ms.p50": 50.0 + level}
        return Observation(t, level, repeat, values, 32, 32, 20.0, overloaded=over)

    runs = [
        obs(t, c, r, t == "slow" and c >= 8.0 and (c == 16.0 or r == 1))
        for t in ("fast", "slow")
        for c in (1.0, 8.0, 16.0)
        for r in (0, 1)
    ]
    assert overload_notes(State(rate_question(), runs, PolicyConfig())) == [
        "slow is overloaded at 8,16 requests/s (it served under 80% of what arrived): its "
        "queue grew through the level, so its latencies there measure how long the level "
        "lasted, and its throughput there is its capacity"
    ]
    kept = [replace(o, overloaded=False) for o in runs]
    assert overload_notes(State(rate_question(), kept, PolicyConfig())) == []


def test_check_on_servers_already_up_says_no_engine_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rate YAML of URL targets starts no engine: its estimate says so, with no
    "+ 0 starts" after the figures."""
    config = tmp_path / "rates.yaml"
    config.write_text(
        "rates: [10, 20, 40, 80]\nduration_s_per_level: 3\noutput_tokens: 32\nrepeats: 2\n"
        "targets:\n"
        "  - {name: fast, url: 'http://127.0.0.1:9', engine: vllm, model: calib}\n"
        "  - {name: batched, url: 'http://127.0.0.1:9', engine: vllm, model: calib}\n"
    )
    assert main(["decide", "--config", str(config), "--check", "--remote"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert "no engine starts: its targets are servers already up" in last
    assert "+ 0 starts" not in last and "grid 48 s measuring = 0.8 GPU-min" in last


def test_a_lead_asked_at_a_level_the_comparison_left_out_says_so() -> None:
    """A lead question's level with no values of both (a throughput at an open-loop level
    too short for a steady state on a side) gets its own line, not a blank answer."""
    from crossover.analysis.crossovers import compare_pair, metric_spec
    from crossover.decide.text import level_lines

    spec = metric_spec("total_tokens_per_s")
    a = {16.0: [7300.0, 7350.0], 20.0: [9400.0, 9420.0]}
    b = {16.0: [7700.0, 7800.0]}  # its 20 was short: left out
    (f,) = compare_pair("vllm", "sglang", a, b, spec, axis="rate")
    lines = level_lines(f, (16.0, 20.0))
    assert lines[0].startswith("total tokens/s at 16 requests/s: sglang leads vllm")
    assert lines[1] == (
        "total tokens/s at 20 requests/s: vllm vs sglang: not compared (a level too short "
        "for a steady state on a side, or without a valid run of both: the notes say which)"
    )
    # a latency's missing level has no steady state to blame
    (g,) = compare_pair("vllm", "sglang", a, b, metric_spec("ttft_ms.p50"), axis="rate")
    assert level_lines(g, (20.0,)) == [
        "TTFT p50 at 20 requests/s: vllm vs sglang: not compared (no valid run of both there)"
    ]
