"""``crossover sweep --rates``: open-loop levels, keyed and analysed along the rate axis.

A degrades with the streams in flight, B does not: under Poisson arrivals at rate r a
request sees about r x T others (Little's law), so A's per-token gap crosses B's at a rate
computed from the model (conftest.open_tpot_ms), never from a measurement.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from crossover.analysis import SweepFile, analyze_sweep
from crossover.cli.app import main

from .conftest import Linear, db_runs, open_tpot_ms, read_sweep, servers, target_flags

pytestmark = pytest.mark.slow

N = 16
A = Linear(a_ms=2.0, b_ms=2.0, ttft_ms=5.0)
B = Linear(a_ms=8.0, b_ms=0.0, ttft_ms=5.0)
RATES = (6.0, 12.0, 48.0)


def test_rate_sweep_runs_carry_their_rate_and_find_the_crossover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the gaps are equal where 2 + 2 L = 8, L = 3 = r x 35 ms / (1 - 0.03 r): r = 24 rps
    assert math.isclose(open_tpot_ms(A, 24.0, N), 8.0)
    out = tmp_path / "sweep"
    with servers(A, B) as (url_a, url_b):
        rc = main(
            ["sweep", *target_flags({"A": url_a, "B": url_b}), "--rates", "12,6,48",
             "--repeats", "2", "--output-tokens", str(N), "--input-tokens", "16",
             "--duration-s-per-level", "1.2", "--warmup", "0", "--out", str(out), "--no-report"]
        )  # fmt: skip
    assert rc == 0
    sweep = read_sweep(out)
    assert sweep["workload"]["rates"] == list(RATES)
    keys = {(r["target"], r["rate"], r["concurrency"], r["repeat"]) for r in sweep["runs"]}
    assert keys == {(t, x, None, r) for t in "AB" for x in RATES for r in (0, 1)}
    for run in sweep["runs"]:
        load = run["summary"]["load"]
        assert (load["mode"], load["rate_rps"]) == ("rate", run["rate"])
        assert run["summary"]["queue_ms"]["count"] > 0  # the open loop's queue is counted
    assert {r.key for r in db_runs(out)} == {
        f"{t}|rate={x:g}|r={r}" for t in "AB" for x in RATES for r in (0, 1)
    }
    xs = {x["metric"]: x for x in sweep["crossovers"]}
    x = xs["tpot_ms.p50"]
    assert (x["below"], x["above"]) == ("A", "B"), x
    assert x["concurrency"] is None
    # each repeat draws its own arrivals, so at 12 requests/s the two repeats' TPOT can
    # differ by their arrivals alone (A's gap grows with the streams in flight) and 12 may
    # not be a significant lead: the bracket is the one around the truth (24), or wider
    assert x["bracket"] in ([12.0, 48.0], [6.0, 48.0])
    assert 12.0 <= x["rate"] <= 48.0
    printed = capsys.readouterr().out
    assert "requests/s" in printed  # the table's axis and the crossover lines
    # resuming keeps every rate level
    with servers(A, B) as (url_a, url_b):
        rc = main(
            ["sweep", *target_flags({"A": url_a, "B": url_b}), "--rates", "6,12,48",
             "--repeats", "2", "--output-tokens", str(N), "--input-tokens", "16",
             "--duration-s-per-level", "1.2", "--warmup", "0", "--out", str(out), "--no-report"]
        )  # fmt: skip
    assert rc == 0
    assert len(db_runs(out)) == 12


def test_rates_from_yaml_with_a_request_count(tmp_path: Path) -> None:
    with servers(B) as (url,):
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump({
            "targets": [{"name": "B", "url": url, "engine": "vllm", "model": "calibration"}],
            "rates": [20, 40], "requests_per_level": 12, "output_tokens": 4,
            "input_tokens": 16, "warmup_requests": 0,
        }))  # fmt: skip
        rc = main(["sweep", "--config", str(config), "--out", str(tmp_path / "s"), "--no-report"])
    assert rc == 0
    runs = read_sweep(tmp_path / "s")["runs"]
    assert [(r["rate"], r["summary"]["requests"]["sent"]) for r in runs] == [(20, 12), (40, 12)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "1", "--rates", "2"], "not both"),
        (["--rates", "2,x"], "--rates: expected a comma-separated list"),
        (["--rates", "0,2"], "--rates: each item must be above 0"),
    ],
)
def test_bad_rates_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc = main(
        ["sweep", "--target", "A=http://127.0.0.1:9,engine=vllm,model=m", *args,
         "--output-tokens", "4", "--out", str(tmp_path / "s"), "--no-report"]
    )  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


#: two servers that both keep up with every arrival below, one five times slower per token
#: (a request takes 0.16 s on FAST, 0.65 s on SLOW): the same capacity for this load
FAST = Linear(a_ms=5.0, b_ms=0.0, ttft_ms=5.0)
SLOW = Linear(a_ms=20.0, b_ms=0.0, ttft_ms=20.0)
N_SLOW = 32


def test_below_saturation_served_equals_goodput_and_no_throughput_lead(tmp_path: Path) -> None:
    """Below saturation an open loop's throughput is the arrivals': both servers complete
    every request, so requests/s and output tokens/s are the same for both (no crossover,
    no lead), and with every request meeting the SLO, goodput is what was served. A
    window opened at the first send counted about E2E / window fewer completions (the
    slow server's 0.65 s of a 2 s window: a third) and gave the fast one the lead."""
    from crossover.analysis.overload import open_loop_load
    from crossover.metrics.summary import RunSummary

    out = tmp_path / "sweep"
    with servers(FAST, SLOW) as (url_a, url_b):
        rc = main(
            ["sweep", *target_flags({"fast": url_a, "slow": url_b}), "--rates", "8,16",
             "--repeats", "3", "--output-tokens", str(N_SLOW), "--input-tokens", "16",
             "--duration-s-per-level", "2.5", "--warmup", "0", "--slo", "e2e_ms.p50=5000",
             "--out", str(out), "--no-report"]
        )  # fmt: skip
    assert rc == 0
    sweep = read_sweep(out)
    seeds = {}
    for run in sweep["runs"]:
        s = RunSummary.model_validate(run["summary"])
        assert s.verdict == "valid"
        assert s.window.opened_by == "first_completion" and s.window.steady
        assert s.goodput is not None and s.goodput.fraction == 1.0
        load = open_loop_load(s)
        assert load is not None and not load.overloaded
        # one count: every request met the SLO, so goodput is what was served
        assert s.goodput.requests_per_s == pytest.approx(load.served_rps, rel=1e-9)
        # and what was served is what arrived, within the arrivals' own noise
        assert load.served_rps == pytest.approx(load.arriving_rps, rel=0.3), (run["target"], load)
        seeds.setdefault(run["repeat"], set()).add(s.load.arrival_seed)
    # each repeat its own arrivals, the same for both targets (and every level)
    assert all(len(v) == 1 for v in seeds.values())
    assert len({next(iter(v)) for v in seeds.values()}) == 3
    for metric in ("output_tokens_per_s", "requests_per_s", "goodput_rps"):
        found = [x for x in sweep["crossovers"] if x["metric"] == metric]
        assert found == [], found
    for f in analyze_sweep(SweepFile.model_validate(sweep)):
        if f.metric in ("output_tokens_per_s", "requests_per_s", "goodput_rps"):
            assert f.kind != "crossover" and f.leader is None, f
