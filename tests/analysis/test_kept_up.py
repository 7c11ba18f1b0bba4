"""An open-loop level where both targets kept up with their arrivals is a tie on the
throughputs that count only what was served (``MetricSpec.arrival_bound``): both served
the same arrivals, and their windows differ by where the first and last completions fell.
On docs/results/h100/moe-open-decide-freeze vLLM's windows served 97-99% of the arrivals
at 12 and 16 requests/s and SGLang's 102-105%, and the analysis read that as SGLang's
lead on throughput over 1-16 requests/s."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.analysis.crossovers import (
    METRICS,
    analyze_sweep,
    compare_pair,
    format_crossover,
    kept_up_levels,
    metric_spec,
)
from crossover.analysis.overload import KEPT_UP_SHARE, kept_up
from crossover.cli.app import main
from crossover.metrics.summary import RunSummary
from crossover.report.load import load_sweep

from .synthetic_servers import summary
from .test_overload import STABLE, rate_summary

ROOT = Path(__file__).resolve().parents[2]
DECIDED = ROOT / "docs/results/h100/moe-open-decide-freeze"
SLOTS = ROOT / "docs/results/h100/sglang-slots-open"


def test_the_served_share_says_kept_up_and_the_band_mirrors_the_short_rule() -> None:
    assert pytest.approx(0.9) == KEPT_UP_SHARE
    calm = rate_summary(**STABLE)
    calm["window"]["opened_by"] = "first_completion"
    calm["throughput"]["requests_per_s"] = 19.0  # of 19.75 arriving: 96%
    assert kept_up(RunSummary.model_validate(calm)) is True
    calm["throughput"]["requests_per_s"] = 17.0  # 86%: fell behind, though not overloaded
    assert kept_up(RunSummary.model_validate(calm)) is False
    # a window opened at the first send is not the steady window the share is read in
    calm["window"]["opened_by"] = "first_send"
    assert kept_up(RunSummary.model_validate(calm)) is None
    # a closed loop has no arrivals to keep up with
    assert kept_up(RunSummary.model_validate(summary(total=100.0))) is None


def test_committed_levels_that_kept_up_and_one_that_did_not_say() -> None:
    slots = load_sweep(SLOTS)
    # vLLM served 99-101% at both rates; SGLang at 512 slots fell behind at 20 (84%, a
    # level too short to tell from its window: not judged)
    assert kept_up_levels(slots.runs, "vllm") == {16.0, 20.0}
    assert kept_up_levels(slots.runs, "sglang-512") == {16.0}
    # its graphs target's second repeat at 20 served 112% (short): the level is not judged
    assert kept_up_levels(slots.runs, "sglang-512-graphs") == {16.0}


def test_a_committed_open_loop_decision_reads_no_throughput_lead_where_both_kept_up() -> None:
    findings = analyze_sweep(load_sweep(DECIDED), tie_rel=0.03)
    out = [f for f in findings if f.metric == "output_tokens_per_s" and f.axis == "rate"]
    assert len(out) == 1
    f = out[0]
    assert f.kind == "none" and f.leader is None
    assert all(lv.kept_up and lv.lead is None for lv in f.per_level)
    assert format_crossover(f) == (
        "output tokens/s: vllm vs sglang: both kept up with the arrivals at every level "
        "compared: what each served there is the arrival rate (levels 1-16)"
    )
    # the latencies at the same levels are compared as measured: SGLang's TTFT p99 crossing
    p99 = [f for f in findings if f.metric == "ttft_ms.p99" and f.kind == "crossover"]
    assert [(x.below, x.above) for x in p99] == [("sglang", "vllm")]
    assert not any(
        lv.kept_up for x in findings if x.metric.startswith("ttft") for lv in x.per_level
    )


def _pair(spec_key: str, axis: str, kept: set[float]) -> str:
    a = {1.0: [10.0, 10.1], 4.0: [40.0, 40.2], 8.0: [60.0, 61.0]}
    b = {1.0: [10.6, 10.7], 4.0: [42.0, 42.4], 8.0: [80.0, 81.0]}
    spec = metric_spec(spec_key)
    found = compare_pair("a", "b", a, b, spec, axis=axis, kept_up=kept)  # type: ignore[arg-type]
    assert len(found) == 1
    return format_crossover(found[0])


def test_a_lead_where_one_fell_behind_names_the_levels_both_kept_up() -> None:
    assert _pair("output_tokens_per_s", "rate", {1.0, 4.0}) == (
        "output tokens/s: b leads a over 1-8 requests/s (no crossover in the range measured; "
        "both kept up with the arrivals at 1, 4)"
    )
    # without it the same windows read b's lead at every level
    assert _pair("output_tokens_per_s", "rate", set()) == (
        "output tokens/s: b leads a over 1-8 requests/s (no crossover in the range measured)"
    )


@pytest.mark.parametrize(
    ("key", "axis"),
    [
        ("output_tokens_per_s", "concurrency"),  # a closed loop has no arrivals
        ("goodput_rps", "rate"),  # who met the SLO is the engine's, whoever kept up
        ("ttft_ms.p50", "rate"),
    ],
)
def test_only_a_served_count_along_arrival_rates_ties_on_it(key: str, axis: str) -> None:
    line = _pair(key, axis, {1.0, 4.0})
    assert "kept up" not in line


def test_which_metrics_count_only_what_was_served() -> None:
    bound = {m.key for m in METRICS if m.arrival_bound}
    assert bound == {"total_tokens_per_s", "output_tokens_per_s", "requests_per_s"}


def test_the_decision_replay_says_it_in_its_answer_and_per_level(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["decide", "--replay", str(DECIDED), "--metric", "total_tokens_per_s"]
    assert main([*argv, "--tie-margin", "0.03"]) == 0
    out = capsys.readouterr().out
    said = [ln for ln in out.splitlines() if ln.startswith("  total tokens/s:")]
    assert said == [
        "  total tokens/s: vllm vs sglang: both kept up with the arrivals at every level "
        "compared: what each served there is the arrival rate (levels 1-20)"
    ]
    assert main([*argv, "--question", "lead", "--at", "16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at16 = [ln for ln in lines if ln.strip().startswith("total tokens/s at 16 requests/s")]
    assert len(at16) == 1 and "vllm vs sglang: both kept up with the arrivals (" in at16[0]


@pytest.mark.slow
def test_a_throughput_question_along_rates_does_not_repeat_a_level_both_kept_up(
    tmp_path: Path,
) -> None:
    """A kept-up level has no throughput sign to settle, so the decision does not repeat
    it for one: on the committed open-loop decision, the throughput question alone
    measured 812 s of the grid's 1,084 (every level repeated before, 100%), with the
    grid's conclusion."""
    import lzma
    import shutil

    from crossover.decide.replay import replay

    db = tmp_path / "sweep.db"
    with lzma.open(DECIDED / "sweep.db.xz") as fin, db.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    found = replay(db, metrics=("total_tokens_per_s",))
    assert all(c.same for c in found.comparisons)
    used, grid = sum(found.seconds.values()), sum(found.grid_seconds.values())
    assert used < 0.8 * grid
    # the levels it did not repeat are ones both kept up at
    once = {(o.target, o.level) for o in found.observations if o.repeat == 0} - {
        (o.target, o.level) for o in found.observations if o.repeat == 1
    }
    assert once and all(o.kept_up for o in found.observations if (o.target, o.level) in once)
