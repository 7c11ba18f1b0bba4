"""Open-loop levels too short for a steady state: flagged on the committed H100 sweep
(docs/results/h100/moe-open) summarized again from its records and as stored, named in
one findings line per target, and left out of throughput crossovers only."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path
from typing import Any

import pytest

from crossover.analysis import SweepFile, analyze_sweep
from crossover.analysis.overload import open_loop_load
from crossover.analysis.short import format_short_levels, short_open_loop
from crossover.measure import resummarize
from crossover.records.store import Store
from crossover.report import load_sweep

from .synthetic_servers import summary

MOE_OPEN = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100" / "moe-open"


def test_committed_sglang_20_rps_is_short_and_1_rps_is_not(tmp_path: Path) -> None:
    db = tmp_path / "sweep.db"
    with lzma.open(MOE_OPEN / "sweep.db.xz") as src, db.open("wb") as out:
        shutil.copyfileobj(src, out)
    with Store(db, read_only=True) as store:
        keys = {row.key: row.run_id for row in store.runs()}
        for rep in (0, 1):
            s = resummarize(store, keys[f"sglang|rate=20|r={rep}"])
            short = s.window.short
            assert short is not None and not s.window.steady, rep
            assert short.sending_s == pytest.approx(15.9, abs=0.05)
            assert short.e2e_p50_s is not None and 10.0 < short.e2e_p50_s < 10.2
            assert short.served_share is not None and short.served_share > 1.2
            # the overload reading takes the non-steady path: every request served from
            # the first possible completion on, not "served 29.3 of 21.4 req/s"
            load = open_loop_load(s)
            assert load is not None and load.share == pytest.approx(1.0, abs=0.02)
            assert not load.overloaded
            for target in ("sglang", "vllm"):
                calm = resummarize(store, keys[f"{target}|rate=1|r={rep}"])
                assert calm.window.steady and calm.window.short is None, (target, rep)


def test_the_stored_sweep_is_judged_again() -> None:
    """sweep.json as committed (summaries stored before the rule) reads the same."""
    sweep = load_sweep(MOE_OPEN)
    flagged = {
        (r.target, r.level, r.repeat) for r in sweep.runs if short_open_loop(r.summary) is not None
    }
    assert ("sglang", 20.0, 1) in flagged and ("sglang", 20.0, 0) in flagged
    assert not any(level == 1.0 for _, level, _ in flagged)
    lines = format_short_levels(sweep)
    assert len(lines) == 2
    assert lines[1].startswith(
        "sglang at 4 (repeat 1), 8, 12, 16, 20 requests/s: arrivals lasted 16 s, under 3x "
        "the request time (E2E p50 5.4-10.1 s): no steady state, so served rate and tokens/s "
        "there are ramp-up and drain (served 29.3 of 21.4 req/s at 20)"
    )
    # 3 x E2E p50 asks 31 s; the window at 20 that served 137% of arrivals asks 90 s (its
    # 4.3 s gap between sends and completions keeps a 31 s level at 116%)
    assert lines[1].endswith("measure longer (duration_s_per_level >= 90 s)")


def test_a_long_level_that_served_more_than_arrived_asks_a_length_from_its_share() -> None:
    """docs/results/h100/moe-open-decide-freeze: SGLang at 20 requests/s repeat 1 sent for
    40 s, 3.6 request times (E2E p50 11.2 s), and was short because its window served 111%
    of the arrivals: the reason is that, and the length the share asks (84 s), not 3 x its
    E2E p50 (34 s, under the 40 s it sent)."""
    (line,) = format_short_levels(load_sweep(MOE_OPEN.parent / "moe-open-decide-freeze"))
    assert line.startswith("sglang at 20 (repeat 1) requests/s: served more than arrived: ")
    assert "(served 22.2 of 20 req/s at 20)" in line
    assert line.endswith("measure longer (duration_s_per_level >= 84 s)")


def rate_run(target: str, rate: float, rep: int, e2e_ms: float, out: float) -> dict[str, Any]:
    """A valid open-loop run: 16 s of arrivals at ``rate``, its window serving them."""
    s = summary(output=out, total=out, ttft_ms=50.0)
    sent = int(rate * 16) + 1
    s["load"] = {"mode": "rate", "concurrency": None, "rate_rps": rate, "arriving_rps": rate}
    s["requests"] = {"sent": sent, "succeeded": sent, "failed": 0, "matched": sent}
    s["window"] = {"start_s": 1.0, "end_s": 17.0, "duration_s": 16.0, "steady": True,
                   "opened_by": "first_completion"}  # fmt: skip
    s["throughput"]["requests_per_s"] = rate
    s["e2e_ms"] = {**s["e2e_ms"], "p50": e2e_ms, "min": e2e_ms, "count": sent}
    s["duration_s"] = 16.0 + e2e_ms / 1000.0
    return {"target": target, "rate": rate, "repeat": rep, "summary": s}


def sweep() -> SweepFile:
    """Two targets at 1, 2 and 8 requests/s: 8 is short (E2E 6 s against 16 s of
    arrivals), where b's tokens/s lead would turn a's lead below into a crossover."""
    runs = []
    for rep in range(2):
        for rate, e2e in ((1.0, 1000.0), (2.0, 1500.0), (8.0, 6000.0)):
            runs.append(rate_run("a", rate, rep, e2e, 100.0 * rate + rep))
            b_out = 300.0 * rate if rate == 8.0 else 90.0 * rate
            runs.append(rate_run("b", rate, rep, e2e, b_out + rep))
    return SweepFile.model_validate({"runs": runs})


def test_findings_line_and_throughput_comparisons_leave_short_levels_out() -> None:
    sw = sweep()
    (line,) = [x for x in format_short_levels(sw) if x.startswith("a ")]
    assert line == (
        "a at 8 requests/s: arrivals lasted 16 s, under 3x the request time (E2E p50 6.0 s): "
        "no steady state, so served rate and tokens/s there are ramp-up and drain, and "
        "whether it keeps up there is not measured; throughput comparisons leave these "
        "levels out (per-request latencies stay compared); measure longer "
        "(duration_s_per_level >= 18 s)"
    )
    found = {(f.metric, f.axis): f for f in analyze_sweep(sw)}
    tokens = found[("output_tokens_per_s", "rate")]
    assert tokens.levels == (1.0, 2.0) and tokens.kind == "none"
    # both served their arrivals at 1 and 2 (their windows' requests/s are the rates): a
    # tie on tokens/s there (``crossover.analysis.overload.kept_up``), and b's lead at the
    # short 8 is not there to make a crossover of it
    assert tokens.leader is None and tokens.per_level and all(lv.kept_up for lv in tokens.per_level)
    assert found[("ttft_ms.p50", "rate")].levels == (1.0, 2.0, 8.0)


def test_the_findings_lines_name_them() -> None:
    from crossover.report.text import findings_lines

    sw = sweep()
    lines = findings_lines(sw, analyze_sweep(sw))
    assert any(x.startswith("[bold red]short open-loop levels:[/] a at 8 ") for x in lines)


def test_an_overloaded_level_is_told_as_overloaded_not_short() -> None:
    """Its request time grows with the level's length, so it always reads short; it
    stays a point in the throughput comparisons, at the server's capacity."""
    runs = [rate_run("a", 8.0, 0, 6000.0, 800.0), rate_run("a", 1.0, 0, 1000.0, 100.0)]
    runs[0]["overloaded"] = True
    sw = SweepFile.model_validate({"runs": runs})
    assert short_open_loop(sw.runs[0].summary) is not None
    assert format_short_levels(sw) == []


def test_the_level_line_marks_a_short_level() -> None:
    from crossover.report.text import level_line

    sw = sweep()
    short = next(r for r in sw.runs if r.target == "a" and r.level == 8.0)
    line = level_line("a", "rate=8", 0, short.summary, "done")
    assert "SHORT LEVEL[/] [red](arrivals lasted 16.0 s, under 3x the request time" in line
    calm = next(r for r in sw.runs if r.target == "a" and r.level == 1.0)
    assert "SHORT" not in level_line("a", "rate=1", 0, calm.summary, "done")
