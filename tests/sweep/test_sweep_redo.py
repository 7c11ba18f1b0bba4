"""``--redo NAME@LEVEL`` measures every repeat of those levels of that target again on
resume, valid or not, and nothing else; a wrong spec is one line before any work. An
outlier repeat in sweep.json is flagged after the table with the --redo that cures it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from crossover.cli.app import main

from .conftest import Linear, db_runs, servers, target_flags


def test_redo_measures_the_named_levels_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    with servers(Linear(1.0, 0.0), Linear(1.5, 0.0)) as (ua, ub):
        argv = ["sweep", *target_flags({"A": ua, "B": ub}), "--concurrency", "1,2",
                "--repeats", "2", "--requests-per-level", "3", "--warmup", "0",
                "--output-tokens", "4", "--input-tokens", "8", "--out", str(out),
                "--no-report", "--allow-invalid"]  # fmt: skip
        assert main(argv) == 0
        assert main([*argv, "--redo", "A@2"]) == 0
        capsys.readouterr()
        assert main([*argv, "--redo", "A@3"]) == 2
        err = capsys.readouterr().err
        assert "--redo A@3: A has no level 3 (its levels: 1, 2)" in err
        assert main([*argv, "--redo", "C"]) == 2
        assert "unknown target 'C'" in capsys.readouterr().err
    keys = Counter(r.key for r in db_runs(out))
    assert keys == {"A|c=1|r=0": 1, "A|c=1|r=1": 1, "A|c=2|r=0": 2, "A|c=2|r=1": 2,
                    "B|c=1|r=0": 1, "B|c=1|r=1": 1, "B|c=2|r=0": 1, "B|c=2|r=1": 1}  # fmt: skip
    assert len(json.loads((out / "sweep.json").read_text())["runs"]) == 8


def test_an_outlier_repeat_is_flagged_with_its_redo(sweep_with_outlier: Path) -> None:
    from crossover.analysis.schema import SweepFile
    from crossover.report import write_report
    from crossover.report.text import outlier_lines

    sweep = SweepFile.model_validate_json((sweep_with_outlier / "sweep.json").read_text())
    lines = outlier_lines(sweep)
    assert lines[0].startswith("outlier repeat: A c=2 repeat 1: ")
    assert "--redo A@2" in lines[-1]
    html = write_report(sweep_with_outlier, sweep).read_text()
    assert 'id="outliers"' in html and "--redo A@2" in html and "outlier repeat" in html


@pytest.fixture
def sweep_with_outlier(tmp_path: Path) -> Path:
    """A real sweep's file, one repeat's throughput then cut to a sixth."""
    out = tmp_path / "sweep"
    with servers(Linear(1.0, 0.0)) as (ua,):
        assert main(["sweep", *target_flags({"A": ua}), "--concurrency", "1,2,4",
                     "--repeats", "2", "--requests-per-level", "8", "--warmup", "1",
                     "--output-tokens", "16", "--input-tokens", "8", "--out", str(out),
                     "--no-report", "--allow-invalid"]) == 0  # fmt: skip
    data = json.loads((out / "sweep.json").read_text())
    for r in data["runs"]:
        r["summary"]["verdict"] = "valid"
        if r["concurrency"] == 2 and r["repeat"] == 1:
            r["summary"]["throughput"]["total_tokens_per_s"] /= 6
    (out / "sweep.json").write_text(json.dumps(data))
    return out
