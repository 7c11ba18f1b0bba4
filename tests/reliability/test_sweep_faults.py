"""A sweep against servers that misbehave: every fault is reported with its code, the
sweep goes on to the end, and every request sent is recorded (none lost, none doubled)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import yaml

from crossover.calibration.server import build_config, spawn
from crossover.cli.app import main
from crossover.records.store import Store

pytestmark = pytest.mark.slow

#: fault (on a quarter of the requests) -> the problem codes that may report it
FAULTS = {
    "http_500:0.25": {"http_error"},
    "cut:0.25": {"stream_truncated"},
    "reset:0.25": {"stream_truncated", "connection_error"},
    "stall:0.25": {"timeout"},
    "malformed_json:0.25": {"malformed_event"},
    "never_answer:0.25": {"timeout"},
}
LEVELS = [1, 4]
PER_LEVEL = 8


def test_faults_in_a_sweep_are_reported_and_nothing_is_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = {f: f.split(":")[0] for f in FAULTS}
    out = tmp_path / "sweep"
    with contextlib.ExitStack() as stack:
        urls = {
            names[f]: stack.enter_context(
                spawn(build_config(ttft_ms=2.0, itl_ms=1.0, faults=[f], stall_s=3.0))
            )
            for f in FAULTS
        }
        cfg = {
            "targets": [
                {"name": n, "url": u, "engine": "vllm", "model": "calibration"}
                for n, u in urls.items()
            ],
            "concurrency": LEVELS,
            "requests_per_level": PER_LEVEL,
            "warmup_requests": 0,
            "output_tokens": 8,
            "input_tokens": 16,
            # stall (3 s) and never_answer must end as timeouts, quickly
            "timeouts": {"first_token_s": 0.5, "gap_s": 0.5, "total_s": 2.0},
        }
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(cfg))
        rc = main(["sweep", "--config", str(path), "--out", str(out), "--no-report"])
    captured = capsys.readouterr()
    assert rc == 3, captured.err  # invalid runs: non-zero without --allow-invalid
    assert "Traceback" not in captured.err
    sweep = json.loads((out / "sweep.json").read_text())
    assert len(sweep["runs"]) == len(FAULTS) * len(LEVELS)  # the sweep went to the end
    with Store(out / "sweep.db") as store:
        rows = {r.key: r for r in store.runs()}
        assert len(rows) == len(sweep["runs"])  # no run repeated
        for run in sweep["runs"]:
            s = run["summary"]
            fault = next(f for f in FAULTS if names[f] == run["target"])
            assert s["verdict"] == "invalid", (fault, s["problems"])
            codes = {p["code"] for p in s["problems"] if p["severity"] == "error"}
            assert codes & FAULTS[fault], (fault, codes)
            # exactly the requests asked for were sent, and each one is recorded once
            req = s["requests"]
            assert req["sent"] == PER_LEVEL
            assert req["succeeded"] + req["failed"] == req["sent"]
            row = rows[f"{run['target']}|c={run['concurrency']}|r=0"]
            assert row.status == "done"
            recs = store.records(row.run_id, include_warmup=False)
            assert len(recs) == req["sent"]
            assert sorted(r.index for r in recs) == list(range(PER_LEVEL))
            assert sum(not r.ok for r in recs) == req["failed"] >= 1
