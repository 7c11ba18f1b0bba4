"""The decide policy replayed on the committed H200 per-request databases (issue 42's
first proof): it settles, never calls a lead the grid calls the other way, reaches the
grid's conclusions from at most a third of its measuring time on the MoE and dense-B
decisions, and saves time on every one. docs/decide.md gives each database's figures and
the conclusions that still differ (with why).

The databases are decompressed once into pytest's cache (they are only read).
"""

from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

import pytest

from crossover.decide.recorded import Recorded
from crossover.decide.replay import ReplayResult, replay, same_conclusion
from crossover.decide.state import PolicyConfig, Prior

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "h200"
DECISIONS = ("moe", "vllm-a", "vllm-b", "sglang-a", "prefix")
#: where the issue's goal holds without a budget: the same conclusions from a third of the
#: measuring time (dense B and prefix needed a part's TTFT lower bound read as a lead,
#: which a bound cannot show: docs/decide.md; with ``--budget 0.33`` below they are in it)
GOAL_MET = {"moe": True}

pytestmark = pytest.mark.slow


def database(cache: pytest.Cache, name: str, results: Path = RESULTS) -> Path:
    src = results / name / "sweep.db.xz"
    folder = cache.mkdir("decide-replay")
    out = folder / f"{name}.db"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        part = out.with_suffix(".part")
        with lzma.open(src) as fin, part.open("wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        part.replace(out)
    return out


def h100_grid(pytestconfig: pytest.Config) -> tuple[Path, Prior]:
    """The H100 MoE grid's database (decompressed into pytest's cache) and its prior."""
    from crossover.decide.replay import load_prior

    assert pytestconfig.cache is not None
    h100 = ROOT / "docs" / "results" / "h100"
    db = database(pytestconfig.cache, "moe-warm-grid", h100)
    return db, load_prior(h100 / "moe-warm-grid" / "prediction.json")


@pytest.fixture(scope="module")
def h100_live(pytestconfig: pytest.Config) -> ReplayResult:
    """The H100 grid replayed as a live decision would run it (``--live-levels --prior
    ... --tie-margin 0.03``): two tests read it, it is replayed once."""
    db, prior = h100_grid(pytestconfig)
    cfg = PolicyConfig(budget_factor=0.0, sequential=True, tie_rel=0.03)
    return replay(db, cfg=cfg, prior=prior)


@pytest.mark.parametrize("name", DECISIONS)
def test_replay_on_a_committed_decision(pytestconfig: pytest.Config, name: str) -> None:
    assert pytestconfig.cache is not None
    db = database(pytestconfig.cache, name)
    r = replay(db)
    # it settled on an answer for every pair and metric asked
    assert r.comparisons
    assert {(c.a, c.b, c.metric) for c in r.comparisons} == {
        (f.a, f.b, f.metric) for f in r.decision.findings
    }
    # never a lead the grid calls the other way, at any level both measured
    assert r.contradictions == []
    # most conclusions are the grid's, and time is saved on every decision
    same = sum(c.same for c in r.comparisons)
    assert same >= len(r.comparisons) - 2
    # (dense A: 91%, counting a part and its level measured again whole both)
    assert r.fraction < 0.95
    # what it did not measure is said, with the assumption behind each skip
    for skip in r.decision.skipped:
        assert skip.reason
    if name in GOAL_MET:
        if not GOAL_MET[name]:
            r = replay(db, cfg=PolicyConfig(reference_repeats=False))
        assert r.same, [c for c in r.comparisons if not c.same]
        assert r.fraction <= 1 / 3


#: under ``--budget 0.33`` (a third of the grid's measuring time) every committed decision
#: stays within it, never contradicts the grid, and each conclusion is the grid's, or one
#: the answer says it left unsettled within the budget (with what would settle it)
DIFFERING: dict[str, int] = {}
#: the grid's conclusions reached under ``--budget 0.33``, of how many (docs/decide.md's
#: table): each target's first pass within its part of what is left, what was deferred
#: taken where the engine is up, a level whose part below left a gap open measured whole
BUDGET_SAME = {
    "moe": (6, 6),
    "vllm-b": (6, 6),
    "prefix": (28, 30),
    "sglang-a": (7, 12),
    "vllm-a": (33, 42),
}


@pytest.mark.parametrize("name", DECISIONS)
def test_a_third_of_the_grid_says_what_it_left_unsettled(
    pytestconfig: pytest.Config, name: str
) -> None:
    assert pytestconfig.cache is not None
    db = database(pytestconfig.cache, name)
    r = replay(db, cfg=PolicyConfig(budget=0.33))
    # the budget is weighed before each measurement against its estimate; a level that
    # runs past its estimate takes the total a little past it (dense A: 34.3%)
    assert r.fraction <= 0.35
    assert r.decision.budget is not None
    assert r.contradictions == []
    differing = [c for c in r.comparisons if not (c.same or c.deferred)]
    assert len(differing) == DIFFERING.get(name, 0), differing
    same = sum(c.same for c in r.comparisons)
    assert (same, len(r.comparisons)) == BUDGET_SAME[name], [c for c in r.comparisons if not c.same]
    if name == "moe":
        assert r.same
    # each deferred measurement says what it would have cost and settled
    for x in r.decision.deferred:
        assert x.seconds > 0 and x.concerns and x.target not in x.concerns
    if any(c.deferred for c in r.comparisons):
        from crossover.decide.text import decision_lines

        text = "\n".join(decision_lines(r.decision))
        assert "not measured within the time budget" in text and "need more time" in text


def test_the_replay_reads_the_database_and_never_writes_it(
    pytestconfig: pytest.Config,
) -> None:
    assert pytestconfig.cache is not None
    db = database(pytestconfig.cache, "vllm-b")
    before = db.stat().st_mtime_ns, db.stat().st_size
    rec = Recorded(db)
    try:
        assert rec.targets() == ["vllm", "llamacpp-graphs", "llamacpp-graphs-nocache"]
        assert rec.levels() == [1, 2, 4, 8, 16, 32, 64]
        whole = rec.observe("llamacpp-graphs", 16, 0, None)
        part = rec.observe("llamacpp-graphs", 16, 0, 9.0)
    finally:
        rec.close()
    assert (db.stat().st_mtime_ns, db.stat().st_size) == before
    # the level's first 9 s against the whole 150 s level (the host prompt cache stalled it)
    assert whole.complete and whole.seconds > 100
    assert not part.complete and part.seconds < 10
    assert part.requests < part.planned
    # the part's TTFT p50 is a lower bound of the level's
    lo, full = part.value("ttft_ms.p50"), whole.value("ttft_ms.p50")
    assert lo is not None and full is not None and lo <= full


def test_same_conclusion_rules() -> None:
    from crossover.analysis.crossovers import Finding

    def x(lo: float, hi: float, below: str = "a", above: str = "b") -> Finding:
        return Finding("crossover", "m", "a", "b", (1, 8), below, above, 4.0, (lo, hi), (1, 8))

    lead_a = Finding("none", "m", "a", "b", (1, 8), leader="a")
    lead_b = Finding("none", "m", "a", "b", (1, 8), leader="b")
    unsure = Finding("inconclusive", "m", "a", "b", (1, 8), bracket=(1, 8))
    assert same_conclusion([x(3, 5)], [x(4.5, 7)])  # intervals overlap
    assert not same_conclusion([x(3, 5)], [x(5.5, 7)])
    assert not same_conclusion([x(3, 5)], [x(3, 5, "b", "a")])  # sides swapped
    assert not same_conclusion([x(3, 5)], [lead_a])
    assert same_conclusion([lead_a], [lead_a])
    assert not same_conclusion([lead_a], [lead_b])
    assert not same_conclusion([unsure], [lead_a])
    assert same_conclusion([unsure], [Finding("none", "m", "a", "b", (1,), reason="none")])


def test_the_replay_prints_gpu_time_per_target_with_each_start_cost_named(
    pytestconfig: pytest.Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from crossover.cli.app import main
    from crossover.decide.starts import START_S

    assert pytestconfig.cache is not None
    db = database(pytestconfig.cache, "moe")
    out = tmp_path / "d.json"
    # the committed database predates timed starts: each one is the estimate, said so
    assert main(["decide", "--replay", str(db), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "GPU time per target" in printed and "starts estimated" in printed
    gpu = json.loads(out.read_text())["replay"]["gpu_time"]
    assert gpu["start_s"] == START_S and gpu["start_s_source"] == "default"
    per = gpu["per_target"]
    # each at its engine's median start where this project measured it
    want = {"vllm": 107.0, "sglang": 106.0, "llamacpp-q8": 4.0}
    for t, v in per.items():
        assert v["start_s"] == want[t] and v["start_measured"] == 0, t
        assert v["start_source"].startswith("estimated: the median of the "), t
        assert v["total_s"] == pytest.approx(v["measuring_s"] + v["starts"] * want[t]), t
    assert sum(v["starts"] for v in per.values()) == 3  # one start per target
    assert gpu["total_s"] == pytest.approx(sum(v["total_s"] for v in per.values()))
    # its engine logs say what each start took (launch header to the ready line)
    logs = Path(__file__).parents[2] / "docs/results/h200/moe/engines"
    assert main(["decide", "--replay", str(db), "--engine-logs", str(logs),
                 "--json", str(out)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "starts estimated" not in printed
    per = json.loads(out.read_text())["replay"]["gpu_time"]["per_target"]
    assert per["vllm"]["start_s"] == pytest.approx(159.0)
    assert per["llamacpp-q8"]["start_s"] == pytest.approx(6.56, abs=0.01)
    # two SGLang logs with a ready line (98 s, and 131 s the day's earlier start)
    assert per["sglang"]["start_s"] == pytest.approx((98.0 + 131.0) / 2)
    assert per["sglang"]["start_measured"] == 2
    for t, v in per.items():
        assert v["total_s"] == pytest.approx(v["measuring_s"] + v["starts"] * v["start_s"]), t
    # the sweep folder itself, replayed: the engines/ beside its database, by default
    assert main(["decide", "--replay", str(logs.parent), "--json", str(out)]) == 0
    assert "starts estimated" not in capsys.readouterr().out
    by_folder = json.loads(out.read_text())["replay"]["gpu_time"]["per_target"]
    assert {t: v["start_s"] for t, v in by_folder.items()} == {
        t: v["start_s"] for t, v in per.items()
    }
    assert main(["decide", "--replay", str(db), "--start-s", "60", "--json", str(out)]) == 0
    gpu = json.loads(out.read_text())["replay"]["gpu_time"]
    assert gpu["start_s"] == 60 and gpu["start_s_source"] == "--start-s"
    assert {v["start_s"] for v in gpu["per_target"].values()} == {60}


def test_a_budget_with_measured_starts_counts_them_in_the_grid_too(
    pytestconfig: pytest.Config, tmp_path: Path
) -> None:
    """Starts read from the grid's logs are weighed per target, and the grid the budget is
    a share of holds one start per target (what the grid itself started)."""
    import json

    from crossover.cli.app import main

    assert pytestconfig.cache is not None
    db = database(pytestconfig.cache, "moe")
    logs = Path(__file__).parents[2] / "docs/results/h200/moe/engines"
    out = tmp_path / "d.json"
    assert main(["decide", "--replay", str(db), "--budget", "0.33", "--json", str(out)]) == 0
    plain = json.loads(out.read_text())
    measuring = sum(plain["replay"]["grid_seconds"].values())
    assert plain["budget"]["grid_estimate_s"] == pytest.approx(measuring)
    assert main(["decide", "--replay", str(db), "--budget", "0.33", "--engine-logs", str(logs),
                 "--json", str(out)]) == 0  # fmt: skip
    counted = json.loads(out.read_text())
    starts = sum(v["start_s"] for v in counted["replay"]["gpu_time"]["per_target"].values())
    assert starts == pytest.approx(159.0 + 6.56 + 114.5, abs=0.1)
    assert counted["budget"]["grid_estimate_s"] == pytest.approx(measuring + starts)
    assert counted["budget"]["seconds"] == pytest.approx(0.33 * (measuring + starts))
    # what it spent, starts included, stays within it
    assert counted["replay"]["gpu_time"]["total_s"] <= counted["budget"]["seconds"] + 1e-6


def test_a_budget_the_engine_starts_alone_exceed_says_so(
    pytestconfig: pytest.Config, capsys: pytest.CaptureFixture[str]
) -> None:
    """SGLang against vLLM (four targets, starts of 86-117 s read from their logs): a third
    of the grid's time (330 s) is less than the four starts (404 s), so the replay measures
    next to nothing; the decision says why and what budget measures more, where it said
    only that "the time budget measured the first pass's levels"."""
    from crossover.cli.app import main

    assert pytestconfig.cache is not None
    db = database(pytestconfig.cache, "sglang-a")
    logs = Path(__file__).parents[2] / "docs/results/h200/sglang-a/engines"
    args = ["decide", "--replay", str(db), "--live-levels", "--engine-logs", str(logs)]
    assert main([*args, "--budget", "0.33"]) == 0
    out = capsys.readouterr().out
    note = [line for line in out.splitlines() if "does not cover one engine start" in line]
    assert len(note) == 1, out
    m = re.search(
        r"time budget \((\d+) s\) .* targets? \((\d+) s, .* more than ([\d.]+) of", note[0]
    )
    assert m is not None, note[0]
    assert int(m[2]) > int(m[1])
    assert "time budget: 330 s (of the grid's 1001 s" in out
    # a budget past the starts: no such note
    assert main([*args, "--budget", "0.6"]) == 0
    assert "does not cover one engine start" not in capsys.readouterr().out
    assert "each at its measured cost" in note[0]
    # starts at --start-s, none timed: the note says where their cost came from
    plain = ["decide", "--replay", str(db), "--live-levels", "--start-s", "150"]
    assert main([*plain, "--budget", "0.33"]) == 0
    out = capsys.readouterr().out
    note = [line for line in out.splitlines() if "does not cover one engine start" in line]
    assert len(note) == 1, out
    assert "(600 s, each at --start-s 150 s)" in note[0], note[0]


@pytest.mark.parametrize("bad", ["-0.1", "1", "nan", "inf"])
def test_a_tie_margin_outside_0_to_1_is_one_line(
    pytestconfig: pytest.Config, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    from crossover.cli.app import main

    assert pytestconfig.cache is not None
    db = database(pytestconfig.cache, "moe")
    assert main(["decide", "--replay", str(db), "--tie-margin", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tie-margin" in err[0]


def test_the_mixture_of_experts_replay_with_a_tie_margin_keeps_the_grids_conclusions(
    pytestconfig: pytest.Config, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``--tie-margin 0.03`` the grid and the replayed decision are read alike (both
    with the margin): still 6 of 6, and the c = 1 levels where the three engines are within
    3% are said to be level (docs/results/h200/moe-decide: the live decision's 3 of 6 are
    5 of 6 so)."""
    from crossover.cli.app import main

    assert pytestconfig.cache is not None
    db = database(pytestconfig.cache, "moe")
    assert main(["decide", "--replay", str(db), "--tie-margin", "0.03"]) == 0
    out = capsys.readouterr().out
    assert "6 of 6 conclusions the same" in out
    r = replay(db, cfg=PolicyConfig(tie_rel=0.03))
    ties = {
        (f.a, f.b, lv.concurrency)
        for f in r.grid_findings
        if f.metric == "total_tokens_per_s"
        for lv in f.per_level
        if lv.tie
    }
    assert ("vllm", "llamacpp-q8", 1.0) in ties and ("vllm", "sglang", 1.0) in ties


def test_an_engine_that_is_up_is_worked_before_a_dear_restart(h100_live: ReplayResult) -> None:
    """The H100 MoE grid, where llama.cpp and the two others cross between 1 and 4: each
    bisection step there wants both sides again. Worked while its engine is up (the
    bracket's grid levels and repeats on a target whose start costs more than five of its
    levels, the wanted repeats and refinements before the first pass's switch), vLLM (145 s
    a start here) starts twice and the decision five times in all, where a step at a time
    started vLLM four times and the decision eight; the grid's six conclusions stay."""
    r = h100_live
    assert r.same, [c for c in r.comparisons if not c.same]
    assert r.starts_by_target["vllm"] <= 2 and r.starts <= 5, r.starts_by_target
    assert sum(r.gpu_seconds().values()) < 0.75 * (
        sum(r.grid_seconds.values()) + sum(c.seconds for c in r.start_costs.values())
    )


def test_a_two_wave_level_is_not_stopped_and_measured_again_whole(
    h100_live: ReplayResult,
) -> None:
    """On the H100 grid every level above 1 is two waves of the closed loop: a stop after
    the first wave leaves nothing unsent (the second wave is in flight and drains), so it
    saves nothing, and where the drained level then leaves a gap open the level is measured
    again whole. SGLang at 256 was so (510 of 512 sent, 26 s, then 512 again): the replay
    measured 395 s; without the stops that save nothing, 369 s, the same 6 of 6; with a side
    of the answer resting on one run repeated (llama.cpp's second run at 16, 15 s), 384 s."""
    r = h100_live
    assert r.same, [c for c in r.comparisons if not c.same]
    keys = [(o.target, o.level, o.repeat) for o in r.observations]
    assert len(keys) == len(set(keys)), "a level measured in part, then again whole"
    for o in r.observations:
        if not o.complete:  # a part: it left requests unsent after those in flight
            assert o.planned - o.requests > 0 and o.level < o.planned / 2, o
    assert sum(r.seconds.values()) < 390


def test_a_deferred_two_wave_level_is_said_to_be_measured_whole(
    pytestconfig: pytest.Config,
) -> None:
    """Under ``--budget 0.33`` with ``--live-levels`` the H100 replay defers first-pass
    levels of two waves: the lines and the JSON give each one's reason, which says it is
    measured whole (a stop would save nothing), not that it stops once it settles."""
    from crossover.decide.timing import replay_json, replay_lines

    db, prior = h100_grid(pytestconfig)
    cfg = PolicyConfig(budget_factor=0.0, sequential=True, tie_rel=0.03, budget=0.33)
    r = replay(db, cfg=cfg, prior=prior)
    assert r.decision.deferred
    whole = [x for x in r.decision.deferred if "a stop would save nothing" in x.why]
    assert whole, r.decision.deferred
    lines = "\n".join(replay_lines(r, db, None))
    deferred = replay_json(r, db, None)["deferred"]
    assert "stopped once" not in lines
    assert not any("stopped once" in x["why"] for x in deferred)
    assert any("a stop would save nothing" in x["why"] for x in deferred)


def test_a_side_of_the_answer_on_one_run_is_repeated_on_decision_b(
    pytestconfig: pytest.Config,
) -> None:
    """docs/results/h100/moe-warm-decide-b concluded vLLM's side of a TTFT crossover with
    SGLang from SGLang's one run at 256 (1,250 ms; the grid's two: 708 and 527). Replayed on
    its own records as it ran live, the policy now asks for that run's repeat right after it,
    while SGLang is up, and says why."""
    from crossover.decide.replay import load_prior

    assert pytestconfig.cache is not None
    h100 = ROOT / "docs" / "results" / "h100"
    db = database(pytestconfig.cache, "moe-warm-decide-b", h100)
    prior = load_prior(h100 / "moe-warm-grid" / "prediction.json")
    cfg = PolicyConfig(budget_factor=0.0, sequential=True, tie_rel=0.03)
    steps = [(m.target, m.level, m.repeat, m.why) for m in replay(db, cfg=cfg, prior=prior).steps]
    i = next(k for k, m in enumerate(steps) if m[:3] == ("sglang", 256, 0))
    assert steps[i + 1][:3] == ("sglang", 256, 1)
    assert "vllm's lead on TTFT p50 at 256 alone, on one run of sglang" in steps[i + 1][3]
    off = replay(
        db,
        cfg=PolicyConfig(
            budget_factor=0.0, sequential=True, tie_rel=0.03, confirm_single_runs=False
        ),
        prior=prior,
    )
    assert ("sglang", 256, 1) not in [(m.target, m.level, m.repeat) for m in off.steps]
