"""Which machine each run of a resumed sweep was measured on (``crossover.analysis.
machines``): on the committed open-loop decision that three H100s of one kind measured
over three sessions, and on synthetic host records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.analysis.machines import (
    format_machines,
    machine_of,
    machines_json,
    target_machines,
)
from crossover.analysis.schema import SweepRun
from crossover.cli.app import main
from crossover.metrics.host import HostFacts
from crossover.report.load import load_sweep

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100"
A, B, C = "gpu:55f36123cc16", "gpu:4e957e2fd80e", "gpu:f78d18a06161"


def test_the_decision_over_three_sessions_names_each_targets_machines() -> None:
    sweep = load_sweep(RESULTS / "moe-open-decide-freeze")
    found = target_machines(sweep)
    assert [tm.target for tm in found] == ["vllm", "sglang"]
    vllm, sglang = found
    assert list(vllm.runs) == [A] and len(vllm.runs[A]) == 12
    assert sglang.runs == {
        A: [(1.0, 0), (1.0, 1), (4.0, 0), (4.0, 1), (8.0, 0)],
        B: [(8.0, 1), (12.0, 0), (12.0, 1), (16.0, 0)],
        C: [(16.0, 1), (20.0, 0), (20.0, 1)],
    }
    (line,) = format_machines(found)
    assert line.startswith(
        f"the runs compared came from 3 machines: vllm on {A} (all its runs); sglang on {A} "
        f"(1, 4, 8 r=0), {B} (8 r=1, 12, 16 r=0) and {C} (16 r=1, 20): a difference between "
        "runs of two machines"
    )
    assert "docs/results/h100/reproducibility.md" in line
    assert machines_json(found)["sglang"][C] == [[16.0, 1], [20.0, 0], [20.0, 1]]


def test_the_runs_read_narrow_it() -> None:
    sweep = load_sweep(RESULTS / "moe-open-decide-freeze")
    read = {("vllm", 1.0, 0), ("sglang", 1.0, 0)}
    assert target_machines(sweep, read=read) == []  # both on the first machine
    read |= {("sglang", 20.0, 1)}
    (line,) = format_machines(target_machines(sweep, read=read))
    assert f"sglang on {A} (1) and {C} (20)" in line
    assert target_machines(sweep, ["vllm"]) == []  # vLLM alone: one machine


def test_a_sweep_of_one_machine_says_nothing() -> None:
    assert target_machines(load_sweep(RESULTS / "moe-warm-grid")) == []
    assert format_machines([]) == []


def _run(started_at: str | None) -> SweepRun:
    sweep = load_sweep(RESULTS / "moe-open-decide-freeze")
    run = sweep.runs[0].model_copy(deep=True)
    run.summary.started_at = started_at
    return run


def _host(seen_at: str, machine_id: str | None) -> HostFacts:
    return HostFacts(seen_at=seen_at, machine_id=machine_id)


def test_a_run_belongs_to_the_last_host_seen_before_it() -> None:
    hosts = [
        _host("2026-12-06T20:00:00+00:00", "gpu:a"),
        _host("2026-12-07T01:00:00+00:00", "gpu:b"),
    ]
    assert machine_of(hosts, _run("2026-12-06T21:00:00+00:00")) == "gpu:a"
    assert machine_of(hosts, _run("2026-12-07T01:00:00+00:00")) == "gpu:b"  # at its start
    assert machine_of(hosts, _run("2026-12-07T02:00:00")) == "gpu:b"  # no zone: UTC
    assert machine_of(hosts, _run("2026-12-06T19:00:00+00:00")) is None  # before any
    assert machine_of(hosts, _run(None)) is None
    assert machine_of(hosts, _run("not a time")) is None
    # a host that does not say which machine it was
    assert machine_of([*hosts, _host("2026-12-07T03:00:00+00:00", None)], _run(
        "2026-12-07T04:00:00+00:00"
    )) is None  # fmt: skip


def test_a_replay_of_the_decision_says_its_machines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The replay of the committed decision names, after its answer, the machines of the
    runs it read, and lists them under ``machines`` in its JSON."""
    out = tmp_path / "d.json"
    argv = ["decide", "--replay", str(RESULTS / "moe-open-decide-freeze")]
    argv += ["--metric", "total_tokens_per_s", "--metric", "ttft_ms.p50"]
    argv += ["--metric", "ttft_ms.p99", "--tie-margin", "0.03", "--json", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    (said,) = [ln for ln in lines if ln.startswith("machines (in the grid's runs this replay")]
    assert f"vllm on {A} (all its runs); sglang on {A} (1, 4, 8 r=0), {B}" in said
    data = json.loads(out.read_text())
    assert list(data["machines"]) == ["vllm", "sglang"]
    assert list(data["machines"]["sglang"]) == [A, B, C]
