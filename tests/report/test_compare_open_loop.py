"""``crossover compare`` reads an open loop's throughputs as the sweep's own crossovers do
(``MetricSpec.steady_only``, ``arrival_bound``): a level too short for a steady state on
either side is not compared on them, and a level where both kept up with their arrivals is
a tie on them; latencies stay compared at both, and an overloaded level stays compared.
On the committed H100 open-loop folders: SGLang with 512 slots and CUDA graphs to 512
(docs/results/h100/sglang-slots-open) read ``better`` than vLLM at 16 requests/s, where
both kept up, and than SGLang without the graphs at 20, where both were short."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crossover.analysis.crossovers import metric_spec
from crossover.cli.app import main
from crossover.report.compare import (
    RATE_HEADLINES,
    SWEEP_HEADLINES,
    Comparison,
    compare_sweeps,
    headline_spec,
    render_compare_html,
)
from crossover.report.load import load_sweep

from .test_compare_noise import _row

ROOT = Path(__file__).resolve().parents[2]
DECIDED = ROOT / "docs/results/h100/moe-open-decide-freeze"
SLOTS = ROOT / "docs/results/h100/sglang-slots-open"
PAIRS = [("vllm", "sglang-512-graphs"), ("sglang-512", "sglang-512-graphs")]


def _slots() -> Comparison:
    s = load_sweep(SLOTS)
    return compare_sweeps(s, s, "before", "after", pairs=PAIRS)


def test_both_kept_up_is_a_tie_on_throughput_only() -> None:
    """vLLM 4,098 and SGLang 4,428 output tok/s at 16 requests/s: an interval that
    excludes 1 ([1.001x, 1.167x]), but both served the same seeded arrivals, so the
    throughputs there are a tie; TTFT there is still judged."""
    cmp = _slots()
    row = _row(cmp, "vllm->sglang-512-graphs rate=16", "output tok/s")
    lo, _ = row.ratio_interval
    assert lo > 1.0  # the interval alone would call it better
    assert row.held == "kept_up"
    assert row.change == "no significant change"
    assert row.cells()[4:] == ("1.081x", "[1.001x, 1.167x]", "no significant change (both kept up)")
    assert _row(cmp, "vllm->sglang-512-graphs rate=16", "requests/s").held == "kept_up"
    ttft = _row(cmp, "vllm->sglang-512-graphs rate=16", "TTFT p50 ms")
    assert ttft.held is None and ttft.change_text == "better"
    assert (
        "vllm->sglang-512-graphs: both kept up with the arrivals at 16 requests/s: "
        "throughputs there are the arrivals', a tie however far apart the windows read "
        "(latencies are compared)"
    ) in cmp.notes


def test_a_short_level_is_not_compared_on_throughput() -> None:
    """SGLang at 20 requests/s was too short for a steady state on both sides (the
    window caught ramp-up and drain): 4,728 against 5,761 output tok/s read 1.219x
    better; now not compared. Its TTFT p99 (6,461 ms against 295) is still judged."""
    cmp = _slots()
    row = _row(cmp, "sglang-512->sglang-512-graphs rate=20", "output tok/s")
    assert row.held == "short"
    assert row.change == ""
    assert row.cells()[2:] == ("4,728.2", "5,761.4", "-", "-", "not compared (short level)")
    assert row.pooled_sides() == (False, False) and row.lone_reads() == (None, None)
    tail = _row(cmp, "sglang-512->sglang-512-graphs rate=20", "TTFT p99 ms")
    assert tail.held is None and tail.change_text == "better"
    # short on after's side alone (vLLM kept up at 20) is enough
    one = _row(cmp, "vllm->sglang-512-graphs rate=20", "requests/s")
    assert one.change_text == "not compared (short level)"
    notes = "\n".join(cmp.notes)
    assert (
        "sglang-512->sglang-512-graphs: too short for a steady state at 20 requests/s on "
        "both sides: throughputs there are ramp-up and drain, not compared (latencies are)"
    ) in notes
    assert (
        "vllm->sglang-512-graphs: too short for a steady state at 20 requests/s on the after side"
        in notes
    )


def test_held_rows_are_no_change_in_any_count() -> None:
    """With a tie margin the line under the table counts the rows the margin made level
    and those still better or worse: a held row is neither."""
    s = load_sweep(SLOTS)
    cmp = compare_sweeps(s, s, "before", "after", pairs=PAIRS, tie_rel=0.03)
    held = [r for r in cmp.rows if r.held is not None]
    assert len(held) == 8  # 2 throughputs x 2 levels x 2 pairs
    assert not any(r.tied or r.change in ("better", "worse") for r in held)
    flagged = sum(r.change in ("better", "worse") for r in cmp.rows)
    line = cmp.margin_line()
    assert line is not None and line.endswith(f"; {flagged} still better or worse")


def test_the_readme_pair_reads_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's example (the decision's SGLang against SGLang with vLLM's limits):
    both kept up at 16, both were short at 20, where TTFT is still worse."""
    argv = ["compare", str(DECIDED), str(SLOTS), "--target", "sglang=sglang-512"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()

    def line(start: str) -> str:
        (found,) = [ln for ln in lines if ln.startswith(start)]
        return found

    assert line("sglang->sglang-512 rate=16  output tok/s").endswith(
        "no significant change (both kept up)"
    )
    assert line("sglang->sglang-512 rate=20  output tok/s").endswith("not compared (short level)")
    assert line("sglang->sglang-512 rate=20  TTFT p50 ms").endswith("worse")


def test_an_overloaded_level_stays_compared(tmp_path: Path) -> None:
    """An overloaded level reads short (its request time grows with its length), but its
    throughput is the server's capacity: compared as measured. SGLang's level 20 of the
    decision, short, is compared once its runs say they were overloaded."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    shutil.copy(DECIDED / "sweep.json", tmp_path / "a" / "sweep.json")
    data = json.loads((DECIDED / "sweep.json").read_text())
    for r in data["runs"]:
        if r["target"] == "sglang" and r["rate"] == 20.0:
            r["overloaded"] = True
    (tmp_path / "b" / "sweep.json").write_text(json.dumps(data))
    a, b = load_sweep(tmp_path / "a"), load_sweep(tmp_path / "b")
    short = _row(
        compare_sweeps(a, a, pairs=[("sglang", "sglang")]), "sglang rate=20", "output tok/s"
    )
    assert short.change_text == "not compared (short level)"
    over = _row(
        compare_sweeps(b, b, pairs=[("sglang", "sglang")]), "sglang rate=20", "output tok/s"
    )
    assert over.held is None
    assert over.cells()[4] == "1.000x" and over.change_text == "no significant change"


def test_the_html_says_why() -> None:
    """``--html`` shows the row's words; the class is the verdict's (none for a level
    not compared, no colour)."""
    page = render_compare_html(_slots())
    assert '<td class="">not compared (short level)</td>' in page
    assert '<td class="no significant change">no significant change (both kept up)</td>' in page


def test_the_headlines_read_the_analysis_specs() -> None:
    """Compare finds each headline's spec by its path: the throughputs are the analysis's
    own (window rates that count what was served), the latencies have no open-loop rule."""
    for h in {*RATE_HEADLINES, *SWEEP_HEADLINES}:
        spec = headline_spec(h)
        if h.higher_is_better:
            assert spec == metric_spec(h.key)
            assert spec.steady_only and spec.arrival_bound
        else:
            assert spec is None or not (spec.steady_only or spec.arrival_bound)
