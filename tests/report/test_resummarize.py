"""``crossover report DIR --resummarize``: every run's summary recomputed from sweep.db's
records, the source of truth, before the report is analysed and drawn; sweep.json and
sweep.db only read. Without it the report read the summaries sweep.json keeps, however
old the code that wrote them (or edited by hand since)."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path
from typing import Any

import pytest

from crossover.analysis.overload import is_overloaded
from crossover.cli.app import main
from crossover.errors import UsageError
from crossover.measure import resummarize
from crossover.records.store import Store
from crossover.report import load_sweep
from crossover.report.resummarize import (
    Resummarized,
    VerdictChange,
    moved,
    resummarize_sweep,
)

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
SWEEP = RESULTS / "h200" / "sweep"
RATES = RESULTS / "h100" / "moe-open"

#: the run the tests edit in sweep.json, and one whose stored verdict they flip
EDITED = ("llamacpp-graphs", 8)
FLIPPED = ("llamacpp-nographs", 64)


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "sweep1"
    folder.mkdir(parents=True)
    for name in ("sweep.json", "sweep.db"):
        shutil.copyfile(SWEEP / name, folder / name)
    return folder


def _run(raw: dict[str, Any], target: str, concurrency: int) -> dict[str, Any]:
    return next(r for r in raw["runs"] if r["target"] == target and r["concurrency"] == concurrency)


def _edit(folder: Path) -> float:
    """Double the stored total tokens/s of ``EDITED`` and call ``FLIPPED`` invalid in
    sweep.json, as an older crossover's summaries (or a hand) might have them; returns the
    doubled value."""
    path = folder / "sweep.json"
    raw = json.loads(path.read_text())
    throughput = _run(raw, *EDITED)["summary"]["throughput"]
    throughput["total_tokens_per_s"] *= 2
    _run(raw, *FLIPPED)["summary"]["verdict"] = "invalid"
    path.write_text(json.dumps(raw))
    return float(throughput["total_tokens_per_s"])


def _truth(folder: Path, key: str) -> float | None:
    """The total tokens/s the records of the run ``key`` give."""
    with Store(folder / "sweep.db", read_only=True) as store:
        rid = next(r.run_id for r in store.runs() if r.key == key)
        return resummarize(store, rid).throughput.total_tokens_per_s


def _report(folder: Path, out: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    assert main(["report", str(folder), "--out", str(out), *flags]) == 0
    return capsys.readouterr().out


def test_the_runs_are_the_records_truth_not_sweep_json(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    doubled = _edit(folder)
    done = resummarize_sweep(folder, load_sweep(folder))
    runs = {(r.target, r.concurrency): r for r in done.sweep.runs}
    truth = _truth(folder, "llamacpp-graphs|c=8|r=0")
    assert truth is not None
    assert runs[EDITED].value("throughput.total_tokens_per_s") == truth != doubled
    assert runs[FLIPPED].verdict == "valid"
    assert done.moved["total tokens/s"] == 1
    assert VerdictChange("llamacpp-nographs c=64 r=0", "invalid", "valid", None) in done.verdicts
    assert len(done.sweep.runs) == len(load_sweep(folder).runs)


def test_the_report_reads_the_recomputed_summaries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The edit shows in the plain report (its findings and its HTML), and
    --resummarize erases it: its findings are those of the unedited folder's, its HTML
    the records' numbers, with the line at the top."""
    clean = _copy(tmp_path / "clean")
    edited = _copy(tmp_path / "edited")
    doubled = _edit(edited)
    plain = {f: _report(f, tmp_path / f"{f.parent.name}.html", capsys) for f in (clean, edited)}
    assert plain[clean] != plain[edited]  # the edit changes what the plain report finds
    assert f"{doubled:,.1f}" in (tmp_path / "edited.html").read_text()

    def findings(out: str) -> list[str]:  # without the line and the report's path
        return [ln for ln in out.splitlines()[1:] if not ln.startswith("report: ")]

    resum = {
        f: _report(f, tmp_path / f"r-{f.parent.name}.html", capsys, "--resummarize")
        for f in (clean, edited)
    }
    assert findings(resum[clean]) == findings(resum[edited])
    first = resum[edited].splitlines()[0]
    assert first.startswith(f"resummarized {len(load_sweep(edited).runs)} runs from sweep.db")
    assert "invalid -> valid: llamacpp-nographs c=64 r=0" in first
    assert "total tokens/s in 1 run," in first
    html = (tmp_path / "r-edited.html").read_text()
    assert f"{doubled:,.1f}" not in html
    assert f"{_truth(edited, 'llamacpp-graphs|c=8|r=0'):,.1f}" in html
    assert 'id="resummarized"' in html
    assert "llamacpp-nographs c=64 r=0" in html.split('id="resummarized"')[1].split("</p>")[0]
    assert 'id="resummarized"' not in (tmp_path / "edited.html").read_text()


def test_the_folder_is_left_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy(tmp_path)
    _edit(folder)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    _report(folder, tmp_path / "r.html", capsys, "--resummarize")
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before


def test_no_sweep_db_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy(tmp_path)
    (folder / "sweep.db").unlink()
    assert main(["report", str(folder), "--out", str(tmp_path / "r.html"), "--resummarize"]) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())  # rich wraps long lines
    assert err.startswith(f"error: {folder}: no sweep.db beside sweep.json")
    assert "sweep.db.xz" in err
    assert "Traceback" not in captured.err
    assert not (tmp_path / "r.html").exists()


def test_a_committed_sweep_db_xz_is_read_as_the_sweep_db(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results folder commits its database as sweep.db.xz: --resummarize reads it
    (through a copy elsewhere) as it reads the sweep.db, where it said "unpack it"."""
    plain = _copy(tmp_path / "plain")
    packed = _copy(tmp_path / "packed")
    for folder in (plain, packed):
        _edit(folder)
    db = packed / "sweep.db"
    (packed / "sweep.db.xz").write_bytes(lzma.compress(db.read_bytes()))
    db.unlink()
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in packed.iterdir()}
    got = {
        f: _report(f, f.parent / "out" / "r.html", capsys, "--resummarize").replace(
            str(f.parent), "HERE"
        )
        for f in (plain, packed)
    }
    assert got[packed] == got[plain]
    assert "invalid -> valid: llamacpp-nographs c=64 r=0" in got[packed]
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in packed.iterdir()} == before


def test_a_run_the_database_lacks_is_one_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    path = folder / "sweep.json"
    raw = json.loads(path.read_text())
    _run(raw, *EDITED)["repeat"] = 5
    path.write_text(json.dumps(raw))
    with pytest.raises(UsageError) as got:
        resummarize_sweep(folder, load_sweep(folder))
    assert str(got.value) == (
        f"{folder / 'sweep.db'}: no finished run for sweep.json's llamacpp-graphs c=8 r=5 "
        "(is this the sweep's own database?)"
    )


def test_a_damaged_database_is_one_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "sweep.db").write_text("not a database")
    with pytest.raises(UsageError, match="not a crossover results database"):
        resummarize_sweep(folder, load_sweep(folder))


def test_the_latest_finished_run_of_a_place_is_read(tmp_path: Path) -> None:
    """As the sweep builds sweep.json: a level measured again (after a failure, or by
    --redo) is read from its latest finished run, and a run still going is not one."""
    folder = _copy(tmp_path)
    key = "llamacpp-graphs|c=8|r=0"
    with Store(folder / "sweep.db") as store:
        old = next(r for r in store.runs() if r.key == key)
        store.create_run("again", old.context, key=key)
        store.add_records("again", store.records(old.run_id)[:3])
        store.finish_run("again", "done", old.summary)
        store.create_run("going", old.context, key=key)
    with Store(folder / "sweep.db", read_only=True) as store:
        three = resummarize(store, "again")
    done = resummarize_sweep(folder, load_sweep(folder))
    run = next(r for r in done.sweep.runs if (r.target, r.concurrency) == EDITED)
    assert run.summary == three
    assert run.summary.requests.sent <= 3


@pytest.mark.slow
def test_a_rate_level_is_read_overloaded_again(tmp_path: Path) -> None:
    """``overloaded`` comes from the summary: an old file's (here, edited) gives way to
    what the recomputed summary says."""
    folder = tmp_path / "rates"
    folder.mkdir()
    shutil.copyfile(RATES / "sweep.json", folder / "sweep.json")
    with lzma.open(RATES / "sweep.db.xz") as fin, (folder / "sweep.db").open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    path = folder / "sweep.json"
    raw = json.loads(path.read_text())
    for run in raw["runs"]:
        run["overloaded"] = not run["overloaded"]
    path.write_text(json.dumps(raw))
    done = resummarize_sweep(folder, load_sweep(folder))
    rates = [r for r in done.sweep.runs if r.rate is not None]
    assert rates
    assert all(r.overloaded == is_overloaded(r.summary) for r in rates)
    assert [r.overloaded for r in rates] != [r["overloaded"] for r in raw["runs"]]


def test_what_moves_a_headline() -> None:
    assert not moved(1000.0, 1000.9)
    assert moved(1000.0, 1001.1)
    assert moved(None, 5.0) and moved(5.0, None)
    assert not moved(None, None)


def test_the_line_groups_the_verdict_changes_and_names_a_few(tmp_path: Path) -> None:
    sweep = load_sweep(SWEEP)
    changes = [VerdictChange(f"a c={c} r=0", "valid", "unverified", "x") for c in range(7)]
    changes.append(VerdictChange("b c=1 r=0", "invalid", "valid", None))
    line = Resummarized(sweep, changes, {"total tokens/s": 1, "TTFT p50": 0}).line()
    assert line == (
        f"resummarized {len(sweep.runs)} runs from sweep.db's records: 8 verdicts changed "
        "(valid -> unverified, x: a c=0 r=0, a c=1 r=0, a c=2 r=0, a c=3 r=0, a c=4 r=0 "
        "and 2 more; invalid -> valid: b c=1 r=0); "
        "moved over 0.1%: total tokens/s in 1 run, TTFT p50 in 0 runs"
    )
    nothing = Resummarized(sweep, [], {"total tokens/s": 0, "TTFT p50": 0}).line()
    assert "records: 0 verdicts changed; moved over 0.1%" in nothing
