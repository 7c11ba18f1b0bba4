"""``scripts/h200/rehearse.sh`` starts afresh each time: a second rehearsal does not resume
the first one's sweep, and the staging beside it in /tmp/xo is kept.

The script runs as it is, but with its /tmp/xo paths moved under the test's folder and
``job-sweep.sh`` replaced by a stand-in that says what it found and packs a part, as the
real one does (a real rehearsal takes minutes: run it by hand)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "h200" / "rehearse.sh"

#: job-sweep.sh's stand-in: what its sweep folder held before (a resumed sweep finds its
#: database there) and the committed results it would resume from, then a database and a
#: part, as a finished sweep leaves them
STAND_IN = """\
set -euo pipefail
W={w}; NAME=$2
mkdir -p $W/$NAME
echo "found: $(ls -A $W/$NAME | tr '\\n' ' ')"
echo "results: ${{RESULTS:-}}"
echo "{{}}" > $W/$NAME/sweep.db
echo packed > $OUT/$NAME.tgz.part-aa
"""


def _rehearse(script: Path) -> str:
    done = subprocess.run(
        ["bash", str(script)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PY": sys.executable, "RESULTS": "docs/results/h200/x"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_second_rehearsal_starts_afresh_and_keeps_the_staging(tmp_path: Path) -> None:
    base = tmp_path / "tmp"
    base.mkdir()
    work = base / "xo"
    stand_in = tmp_path / "job-sweep.sh"
    stand_in.write_text(STAND_IN.format(w=work))
    text = SCRIPT.read_text(encoding="utf-8")
    assert text.count("bash scripts/h200/job-sweep.sh ") == 1
    script = tmp_path / "rehearse.sh"
    script.write_text(
        text.replace("/tmp/xo", str(work)).replace("scripts/h200/job-sweep.sh", str(stand_in))
    )
    work.mkdir()
    (work / "cache").mkdir()
    (work / "cache" / "staged").write_text("a checkpoint")  # what job-start.sh staged

    first = _rehearse(script)
    assert "found: \n" in first and "rehearsal: packed" in first
    (tmp_path / "tmp" / "xo-out" / "rehearse.tgz.part-ab").write_text("an old part")
    second = _rehearse(script)
    assert "found: \n" in second  # not the first rehearsal's sweep.db: nothing to resume
    assert "results: \n" in first and "results: \n" in second  # nor the caller's RESULTS
    assert "rehearsal: packed" in second
    assert sorted(p.name for p in (base / "xo-out").iterdir()) == ["rehearse.tgz.part-aa"]
    assert (work / "cache" / "staged").read_text() == "a checkpoint"
    assert (work / "background.log").is_file()


def test_a_detached_run_outlives_its_call_and_each_call_brings_back_a_snapshot(
    tmp_path: Path,
) -> None:
    """``DETACH=1``: the real job-sweep.sh on two calibration engines. The first call ends
    while the decision goes on and brings back a database with fewer runs than the end's;
    the second attaches to the same run (never a second one) and packs its end; the third
    finds it ended and packs it again. The parts hold no .pid or .rc (a carried pack
    resumes)."""
    import io
    import sqlite3
    import tarfile

    text = SCRIPT.read_text(encoding="utf-8")
    script = tmp_path / "rehearse.sh"
    script.write_text(text.replace("/tmp/xo", str(tmp_path / "xo")))
    done = subprocess.run(
        ["bash", str(script)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PY": sys.executable, "DETACH": "1", "FIRST_END": "8"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "still running (its snapshot follows; the next call attaches)" in out
    assert "attached to rehearse's run (pid" in out
    assert "rehearse ended before (rc 0): packing it" in out
    assert out.count(", detached: ") == 1  # one run, whatever the calls
    first = int(out.split("first call's snapshot holds ")[1].split()[0])
    second = int(out.split("second call's snapshot holds ")[1].split()[0])
    assert 0 < first < second

    parts = sorted((tmp_path / "xo-out").glob("rehearse.tgz.part-*"))
    data = b"".join(p.read_bytes() for p in parts)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "back", filter="data")
    assert "rehearse/decision.json" in names
    assert not [n for n in names if n.endswith(("/.pid", "/.rc"))]
    db = sqlite3.connect(tmp_path / "back" / "rehearse" / "sweep.db")
    assert db.execute("select count(*) from runs").fetchone()[0] == second


def test_a_call_without_detach_is_refused_while_the_detached_run_goes_on(
    tmp_path: Path,
) -> None:
    """``job-sweep.sh`` without ``DETACH=1`` while NAME's detached run is still going: one
    line naming it, exit 6, before its modules are copied or anything else is touched (it
    would have started a second run on the same folder and GPU)."""
    work = tmp_path / "xo"
    (work / "rehearse").mkdir(parents=True)
    (work / "background.log").write_text("staged\n")  # job-start.sh ran on this machine
    running = subprocess.Popen(["sleep", "60"])  # the detached run, alive
    try:
        (work / "rehearse" / ".pid").write_text(f"{running.pid}\n")
        before = sorted(str(p.relative_to(work)) for p in work.rglob("*"))
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "h200" / "job-sweep.sh"), "x.yaml", "rehearse"],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "XO_W": str(work)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 6, done.stdout + done.stderr
        assert done.stdout == (
            f"rehearse's detached run (pid {running.pid}) is still going: repeat this call "
            "with DETACH=1 to attach to it\n"
        )
        assert done.stderr == ""
        assert sorted(str(p.relative_to(work)) for p in work.rglob("*")) == before  # no src/
    finally:
        running.kill()
        running.wait()
