"""The decide policy along arrival rates, replayed on the committed H100 open-loop grid
(vLLM against SGLang at 1-20 requests/s, two repeats: docs/results/h100/moe-open): the
same policy reaches the grid's three conclusions (TTFT p99 crosses near 8.6 requests/s,
TTFT p50 inconclusive, throughput no significant difference) with less measuring than
the grid, every level whole (an open loop's level is not cut), and says requests/s.
"""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.decide.coarse import WHOLE_ON_RATES
from crossover.decide.recorded import Recorded
from crossover.decide.replay import ReplayResult, replay
from crossover.decide.text import decision_lines

ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "docs" / "results" / "h100" / "moe-open" / "sweep.db.xz"
METRICS = ("total_tokens_per_s", "ttft_ms.p50", "ttft_ms.p99")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def open_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("moe-open") / "sweep.db"
    with lzma.open(GRID) as fin, out.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return out


@pytest.fixture(scope="module")
def decided(open_db: Path) -> ReplayResult:
    return replay(open_db, metrics=METRICS)


def test_the_database_is_read_along_its_rates(open_db: Path) -> None:
    rec = Recorded(open_db)
    try:
        assert rec.axis == "rate"
        assert rec.levels() == [1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 20.0]
        assert rec.repeats() == 2
        assert rec.targets() == ["vllm", "sglang"]
    finally:
        rec.close()


def test_the_open_loop_replay_reaches_the_grids_conclusions_with_less_measuring(
    decided: ReplayResult,
) -> None:
    r = decided
    assert r.decision.question.axis == "rate"
    by_metric = {c.metric: c for c in r.comparisons}
    assert all(c.same for c in r.comparisons), [c.__dict__ for c in r.comparisons]
    assert set(by_metric) == set(METRICS)
    # the grid's own: TTFT p99 crosses (SGLang below, vLLM above), p50 inconclusive,
    # throughput no significant difference
    assert by_metric["ttft_ms.p99"].grid.startswith("crossover sglang below / vllm above")
    assert by_metric["ttft_ms.p50"].grid == "inconclusive"
    assert by_metric["total_tokens_per_s"].grid == "inconclusive"
    (x,) = [f for f in r.decision.findings if f.kind == "crossover"]
    assert (x.metric, x.below, x.above, x.axis) == ("ttft_ms.p99", "sglang", "vllm", "rate")
    assert x.interval is not None and x.interval[0] <= 8.6 <= x.interval[1]
    assert not r.contradictions
    # less measuring than the grid: level 2 is not measured (docs/decide.md's figures)
    used, grid = sum(r.seconds.values()), sum(r.grid_seconds.values())
    assert used < grid
    assert r.fraction == pytest.approx(482 / 580, abs=0.01), (used, grid)
    assert r.levels_measured == {t: [1.0, 4.0, 8.0, 12.0, 16.0, 20.0] for t in ("vllm", "sglang")}
    assert r.starts == 2
    print(f"open-loop replay: {used:.0f} s of the grid's {grid:.0f} s ({r.fraction:.0%})")


def test_every_rate_level_runs_whole(decided: ReplayResult) -> None:
    assert decided.steps
    assert all(s.budget_s is None and not s.sequential for s in decided.steps)
    # a later target's first-pass level says why it is whole
    later = [s for s in decided.steps if s.target == "sglang" and s.repeat == 0]
    assert later and all(s.why == WHOLE_ON_RATES for s in later)
    assert all(o.complete for o in decided.observations)


def test_the_answer_says_requests_per_second(decided: ReplayResult) -> None:
    text = "\n".join(decision_lines(decided.decision))
    assert "along arrival rates (open loop)" in text
    assert "TTFT p99: sglang leads below 8.6 requests/s (8.0-17.2), vllm above" in text
    assert "concurrent requests" not in text


def test_the_replay_cli_prints_the_figures_and_its_json_says_the_axis(
    open_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "d.json"
    argv = ["decide", "--replay", str(open_db), "--json", str(out)]
    argv += [x for m in METRICS for x in ("--metric", m)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "measuring time: 482 s of the grid's 580 s (83%)" in printed, printed
    assert "3 of 3 conclusions the same" in printed
    assert "levels 1,4,8,12,16,20)" in printed  # rates as given, not 1.0,4.0
    data = json.loads(out.read_text())
    assert data["question"]["axis"] == "rate"
    assert {f["axis"] for f in data["findings"]} == {"rate"}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--question", "capacity", "--slo", "ttft_ms.p99<=500"], "--question capacity works"),
        (["--prior", "PRIOR"], "--prior: the advisor's forecast predicts per concurrency"),
        (["--question", "lead", "--at", "3"], "--at 3: not a level of the sweep (1,2,4,8,"),
    ],
)
def test_what_rates_refuse_is_one_line(
    open_db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    says: str,
) -> None:
    prior = ROOT / "docs" / "results" / "h100" / "moe-warm-grid" / "prediction.json"
    argv = ["decide", "--replay", str(open_db), *[str(prior) if x == "PRIOR" else x for x in extra]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {says}"), err
    assert "\n" not in err


def test_a_lead_question_at_a_rate(open_db: Path) -> None:
    r = replay(open_db, kind="lead", metrics=("ttft_ms.p99",), at=(8.0, 20.0))
    text = "\n".join(decision_lines(r.decision))
    assert "who leads at 8,20 requests/s along arrival rates" in text
    assert "TTFT p99 at 8 requests/s: sglang leads vllm" in text
    assert "TTFT p99 at 20 requests/s: vllm leads sglang" in text
    assert {o.level for o in r.observations} == {8.0, 20.0}
    # compared with the grid at the levels asked alone, not with its whole-range answer
    (c,) = r.comparisons
    assert (c.grid, c.decided, c.same) == ("at 8: sglang; at 20: vllm",) * 2 + (True,)
    # its JSON says each level's lead, as printed: no crossover across the levels asked
    from crossover.decide.text import decision_json

    (f,) = decision_json(r.decision)["findings"]
    assert f["kind"] == "lead" and "interval" not in f and "below" not in f
    assert [(x["level"], x["leader"]) for x in f["leads"]] == [(8.0, "sglang"), (20.0, "vllm")]
    assert f["text"] == "; ".join(f["at_levels"])
    assert f["at_levels"][0].startswith("TTFT p99 at 8 requests/s: sglang leads vllm")


def test_a_budget_short_of_the_starts_starts_nothing(open_db: Path) -> None:
    """The database's two timed starts (300 s) exceed a third of the grid's 880 s: one
    target measured alone is compared with none, so nothing is started; a pair compared at
    no level is never counted as the grid's conclusion (each is said unsettled)."""
    from crossover.decide.state import PolicyConfig

    r = replay(open_db, metrics=METRICS, cfg=PolicyConfig(budget=0.33))
    assert r.steps == [] and r.starts == 0
    assert [(c.same, c.deferred, c.decided) for c in r.comparisons] == [
        (False, True, "not compared (no level with valid runs of both)")
    ] * 3
    (note,) = [n for n in r.decision.notes if "does not cover one engine start" in n]
    assert "nothing is started (a target measured alone is compared with none)" in note
    assert not [n for n in r.decision.notes if " not measured at " in n]


@pytest.mark.parametrize(
    ("metric", "label"),
    [("goodput_rps", "goodput"), ("first_wave_ttft_ms.p50", "TTFT p50 (first wave)")],
)
def test_a_metric_no_run_records_is_one_line(
    open_db: Path, metric: str, label: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Goodput (measured with an SLO) and a closed loop's first wave are in no run of this
    open-loop grid: asked, the replay says so rather than measuring every level for an
    answer compared at none; a metric given twice is asked once."""
    assert main(["decide", "--replay", str(open_db), "--metric", metric]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {open_db}: no run in it records {label}: it is compared at no level"
    argv = [
        "decide",
        "--replay",
        str(open_db),
        "--metric",
        "ttft_ms.p99",
        "--metric",
        "ttft_ms.p99",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("TTFT p99: sglang leads below") == 1
    assert "on TTFT p99 (vllm, sglang)" in out
