"""The tie margin in the sweep's own analysis: ``crossover report DIR --tie-margin M`` and
``crossover sweep --tie-margin M`` read crossovers, leads and "inconclusive" as ``crossover
decide --tie-margin`` does (``analyze_sweep(tie_rel=...)``); sweep.json records the margin
its crossovers were read with (``tie_margin``; absent in older files, read as 0)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from crossover.analysis import SweepFile, analyze_sweep, reanalyze
from crossover.cli.app import main
from crossover.cli.sweep_display import print_outcome
from crossover.report.text import findings_lines
from crossover.sweep.driver import SweepOutcome

from ..analysis.synthetic_servers import summary

# total tokens/s: at c=1 A leads by 2%, the repeats agreeing to 0.05% (significant); at
# c=2 A is ahead 7.7% on repeats too spread to say; at c=4 B leads by 20%
TOTALS: dict[str, dict[int, tuple[float, ...]]] = {
    "A": {1: (1020.0, 1020.5), 2: (1800.0, 2400.0), 4: (3000.0, 3001.0)},
    "B": {1: (1000.0, 1000.5), 2: (1850.0, 2050.0), 4: (3600.0, 3601.0)},
}


def _sweep() -> SweepFile:
    runs: list[dict[str, Any]] = []
    for target, levels in TOTALS.items():
        for c, values in levels.items():
            for rep, v in enumerate(values):
                s = summary(total=v, concurrency=c)
                runs.append({"target": target, "concurrency": c, "repeat": rep, "summary": s})
    return SweepFile.model_validate(
        {"targets": [{"name": "A"}, {"name": "B"}], "runs": runs, "workload": {"repeats": 2}}
    )


def _tps(findings: list[Any]) -> list[Any]:
    return [f for f in findings if f.metric == "total_tokens_per_s"]


def test_a_two_percent_lead_becomes_level_and_the_crossover_inconclusive() -> None:
    sweep = _sweep()
    plain = _tps(analyze_sweep(sweep))
    assert [(f.kind, f.below, f.above, f.bracket) for f in plain] == [
        ("crossover", "A", "B", (1, 4))
    ]
    assert plain[0].per_level[0].lead == "A"
    tied = _tps(analyze_sweep(sweep, tie_rel=0.03))
    assert [(f.kind, f.bracket) for f in tied] == [("inconclusive", (2, 4))]
    assert tied[0].per_level[0].tie and tied[0].per_level[0].lead is None
    assert tied[0].per_level[2].lead == "B"  # 20% is no tie


def test_reanalyze_records_the_margin_in_sweep_json(tmp_path: Path) -> None:
    sweep = _sweep()
    assert sweep.tie_margin is None  # a sweep without one (and every older file)
    again, findings = reanalyze(sweep, tie_rel=0.03)
    assert again.tie_margin == 0.03
    assert [x.metric for x in again.crossovers] == []
    assert [(i.metric, i.bracket) for i in again.inconclusive] == [("total_tokens_per_s", (2, 4))]
    assert _tps(findings)[0].kind == "inconclusive"
    again.write(tmp_path / "sweep.json")
    stored = json.loads((tmp_path / "sweep.json").read_text())
    assert stored["tie_margin"] == 0.03
    assert SweepFile.read(tmp_path / "sweep.json").tie_margin == 0.03
    # the original is untouched
    assert [x.metric for x in sweep.crossovers] == [] and sweep.tie_margin is None


def _write(folder: Path, sweep: SweepFile, *, drop_margin: bool = False) -> Path:
    folder.mkdir()
    data = json.loads(sweep.to_json())
    if drop_margin:  # as a sweep.json written before the key existed
        data.pop("tie_margin")
    (folder / "sweep.json").write_text(json.dumps(data))
    return folder


def test_report_reads_an_old_sweep_json_without_a_margin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain, _ = reanalyze(_sweep(), tie_rel=0.0)
    folder = _write(tmp_path / "old", plain, drop_margin=True)
    assert "tie_margin" not in (folder / "sweep.json").read_text()
    out = tmp_path / "r.html"
    assert main(["report", str(folder), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "total tokens/s: A leads below" in text
    assert "tie margin" not in text
    html = out.read_text()
    assert "Read without a tie margin" in html
    assert "(1; tie margin 0%)</summary>" in html  # what sweep.json recorded, read how


def test_report_with_a_margin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _write(tmp_path / "s", _sweep())
    out = tmp_path / "r.html"
    assert main(["report", str(folder), "--out", str(out), "--tie-margin", "0.03"]) == 0
    text = capsys.readouterr().out
    assert "tie margin 3%: means within 3% of each other" in text
    assert "total tokens/s: A vs B inconclusive between 2 and 4" in text
    assert "A leads below" not in text
    html = out.read_text()
    assert "Read with a tie margin of 3%" in html
    assert "A vs B inconclusive between 2 and 4" in html
    # the report writes nothing into sweep.json
    assert 'tie_margin": null' in (folder / "sweep.json").read_text()


def test_report_defaults_to_the_margin_sweep_json_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded, _ = reanalyze(_sweep(), tie_rel=0.03)
    folder = _write(tmp_path / "s", recorded)
    assert main(["report", str(folder), "--out", str(tmp_path / "r.html")]) == 0
    text = capsys.readouterr().out
    assert "tie margin 3%" in text and "inconclusive between 2 and 4" in text
    html = (tmp_path / "r.html").read_text()
    assert "Read with a tie margin of 3%" in html
    # --tie-margin 0 reads it without one
    assert (
        main(["report", str(folder), "--out", str(tmp_path / "r0.html"), "--tie-margin", "0"]) == 0
    )
    text = capsys.readouterr().out
    assert "total tokens/s: A leads below" in text and "tie margin" not in text


@pytest.mark.parametrize("value", ["-0.5", "1", "nan"])
def test_report_refuses_a_margin_that_is_no_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    folder = _write(tmp_path / "s", _sweep())
    out = tmp_path / "r.html"
    assert main(["report", str(folder), "--out", str(out), f"--tie-margin={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tie-margin" in err[0] and "0 <= M < 1" in err[0]
    assert not out.exists()


def test_findings_lines_say_the_margin_only_with_one() -> None:
    sweep = _sweep()
    assert not any("tie margin" in li for li in findings_lines(sweep, analyze_sweep(sweep)))
    lines = findings_lines(sweep, analyze_sweep(sweep, tie_rel=0.05), tie_rel=0.05)
    assert any(li.startswith("tie margin 5%") for li in lines)


def test_the_sweep_prints_what_the_margin_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``crossover sweep --tie-margin``: the findings it prints at its end are those the
    sweep runner read with the margin (tests/sweep/test_sweep_tie_margin.py runs one), and
    the lines say which margin."""
    sweep, findings = reanalyze(_sweep(), tie_rel=0.03)
    out = tmp_path / "sweep"
    out.mkdir()
    sweep.write(out / "sweep.json")
    print_outcome(SweepOutcome(sweep, findings, ran=12, skipped=0), out, Console(), report=False)
    text = capsys.readouterr().out
    assert "tie margin 3%" in text
    assert "A vs B inconclusive between 2 and 4" in text


@pytest.mark.parametrize("value", ["-1", "1"])
def test_sweep_refuses_a_margin_that_is_no_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    out = tmp_path / "never"
    rc = main(
        ["sweep", "--target", "a=http://127.0.0.1:9", "--concurrency", "1",
         "--out", str(out), f"--tie-margin={value}"]
    )  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tie-margin" in err[0]
    assert not out.exists()
