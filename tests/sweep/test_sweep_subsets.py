"""Running part of a sweep: ``--only`` some targets now, a target's own levels, and
``--redo-invalid`` on resume. The GPU jobs rely on all three (one device call cannot hold
a whole sweep); each run's key decides what is kept."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import yaml

from crossover.cli.app import main
from crossover.sweep.config import Level

from .conftest import Linear, child_env, crossover_cmd, db_runs, read_sweep, servers

FAST = Linear(a_ms=2.0, b_ms=0.0, ttft_ms=2.0)


def _sweep(out: Path, *extra: str, config: Path | None = None, urls: list[str]) -> str:
    if config is None:
        args = ["--target", f"A={urls[0]},engine=vllm,model=calibration"]
        args += ["--target", f"B={urls[1]},engine=vllm,model=calibration"]
        args += ["--concurrency", "1,2", "--requests-per-level", "4", "--output-tokens", "8"]
        args += ["--input-tokens", "16", "--warmup", "0"]
    else:
        args = ["--config", str(config)]
    proc = subprocess.run(
        crossover_cmd("sweep", *args, "--out", str(out), "--no-report", *extra),
        capture_output=True, text=True, env=child_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def _keys(out: Path) -> list[str]:
    return sorted(r.key or "" for r in db_runs(out) if r.status == "done")


def test_only_measures_some_targets_and_keeps_the_others(tmp_path: Path) -> None:
    out = tmp_path / "s"
    with servers(FAST, FAST) as urls:
        _sweep(out, "--only", "A", urls=urls)
        assert _keys(out) == ["A|c=1|r=0", "A|c=2|r=0"]
        # the sweep file names both targets; B has no runs yet
        assert [t["name"] for t in read_sweep(out)["targets"]] == ["A", "B"]
        _sweep(out, urls=urls)  # the rest: A is kept, B is measured
        assert _keys(out) == ["A|c=1|r=0", "A|c=2|r=0", "B|c=1|r=0", "B|c=2|r=0"]
        assert {r["target"] for r in read_sweep(out)["runs"]} == {"A", "B"}
        # --only A again: A's runs kept; B's are in the table as before, and said so
        args = ["--target", f"A={urls[0]},engine=vllm,model=calibration"]
        args += ["--target", f"B={urls[1]},engine=vllm,model=calibration"]
        args += ["--concurrency", "1,2", "--requests-per-level", "4", "--output-tokens", "8"]
        args += ["--input-tokens", "16", "--warmup", "0", "--only", "A"]
        proc = subprocess.run(
            crossover_cmd("sweep", *args, "--out", str(out), "--no-report"),
            capture_output=True, text=True, env=child_env(), timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        said = " ".join(proc.stdout.split())
        assert (
            "0 runs measured, 2 kept from before; in the table as before, not run (--only): B 2"
            in said
        )


def test_only_names_an_unknown_target_in_one_line(tmp_path: Path) -> None:
    with servers(FAST, FAST) as urls:
        proc = subprocess.run(
            crossover_cmd(
                "sweep", "--target", f"A={urls[0]},engine=vllm,model=calibration",
                "--concurrency", "1", "--output-tokens", "8", "--only", "Z",
                "--out", str(tmp_path / "s"), "--no-report",
            ),
            capture_output=True, text=True, env=child_env(), timeout=60,
        )  # fmt: skip
    assert proc.returncode == 2
    assert "--only: unknown target 'Z'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "s").exists()  # nothing written


def test_redo_invalid_measures_again_only_what_was_not_valid(tmp_path: Path) -> None:
    out = tmp_path / "s"
    with servers(FAST, FAST) as urls:
        _sweep(out, urls=urls)
        # a stored run of A at c=2 that did not verify (as a broken level would leave it)
        db = sqlite3.connect(out / "sweep.db")
        (summary,) = db.execute("SELECT summary FROM runs WHERE key='A|c=2|r=0'").fetchone()
        broken = {**json.loads(summary), "verdict": "invalid"}
        db.execute("UPDATE runs SET summary=? WHERE key='A|c=2|r=0'", (json.dumps(broken),))
        db.commit()
        db.close()
        _sweep(out, "--allow-invalid", urls=urls)  # a plain resume keeps it
        assert len(db_runs(out)) == 4
        _sweep(out, "--redo-invalid", urls=urls)
        runs = db_runs(out)
        assert len(runs) == 5  # one new run; the invalid one stays in the database
        assert sorted(r.key or "" for r in runs).count("A|c=2|r=0") == 2
        latest = [
            r for r in read_sweep(out)["runs"] if r["target"] == "A" and r["concurrency"] == 2
        ]
        assert [r["summary"]["verdict"] for r in latest] == ["valid"]


def test_a_target_can_have_its_own_levels(tmp_path: Path) -> None:
    out = tmp_path / "s"
    with servers(FAST, FAST) as urls:
        cfg = {
            "concurrency": [1, 2],
            "requests_per_level": 4,
            "output_tokens": 8,
            "input_tokens": 16,
            "warmup_requests": 0,
            "repeats": 2,
            "targets": [
                {"name": "A", "url": urls[0], "engine": "vllm", "model": "calibration",
                 "concurrency": [1, 2, 4]},
                {"name": "B", "url": urls[1], "engine": "vllm", "model": "calibration"},
            ],
        }  # fmt: skip
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(cfg))
        _sweep(out, config=path, urls=urls)
    runs = db_runs(out)
    # repeat-major: A's whole curve, then its second repeat; then B
    assert [r.key for r in sorted(runs, key=lambda r: r.created_at)] == [
        "A|c=1|r=0", "A|c=2|r=0", "A|c=4|r=0", "A|c=1|r=1", "A|c=2|r=1", "A|c=4|r=1",
        "B|c=1|r=0", "B|c=2|r=0", "B|c=1|r=1", "B|c=2|r=1",
    ]  # fmt: skip


def test_interleave_measures_each_level_target_after_target(tmp_path: Path) -> None:
    """``interleave: true``: both engines up together and each level's repeat measured A, B
    (B, A at odd repeats), so a drifting load on a shared machine hits both alike."""
    from crossover.sweep.driver import interleaved_order

    with servers(Linear(1.0, 0.0), Linear(2.0, 0.0)) as (ua, ub):
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump({
            "targets": [{"name": n, "url": u, "engine": "vllm", "model": "calibration"}
                        for n, u in (("A", ua), ("B", ub))],
            "concurrency": [1, 2], "repeats": 2, "requests_per_level": 4,
            "output_tokens": 4, "input_tokens": 8, "warmup_requests": 0, "interleave": True,
        }))  # fmt: skip
        out = tmp_path / "s"
        assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 0
    keys = [r.key for r in db_runs(out)]
    assert keys == [
        "A|c=1|r=0", "B|c=1|r=0", "A|c=2|r=0", "B|c=2|r=0",
        "B|c=1|r=1", "A|c=1|r=1", "B|c=2|r=1", "A|c=2|r=1",
    ]  # fmt: skip
    # what is left of a resumed sweep keeps the order
    lv = Level("concurrency", 4)
    assert interleaved_order([("A", [(lv, 1)]), ("B", [(lv, 0), (lv, 1)])]) == [
        ("B", lv, 0), ("B", lv, 1), ("A", lv, 1),
    ]  # fmt: skip
