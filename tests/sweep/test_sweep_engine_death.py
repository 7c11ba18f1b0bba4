"""A launched engine that dies in the middle of a level: that level fails (``engine_died``,
verdict invalid), the engine is started again, the later levels run, and no process is
left behind. The engine is the calibration server behind llama-server's flags
(calib_engine.py), launched through the sweep config's ``launch:`` with ``executable``."""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from crossover.cli.app import main
from crossover.engines import lifecycle
from crossover.records.store import Store
from tests.engines.conftest import processes_mentioning
from tests.ggufs import stand_in_gguf

from .conftest import crossover_cmd, start_and_interrupt

ENGINE = Path(__file__).with_name("calib_engine.py")
LEVELS = [1, 2, 4]
PER_LEVEL = 6


def _config(tmp_path: Path, die_after: int) -> Path:
    settings = tmp_path / "calibration.json"
    settings.write_text(json.dumps({"ttft_ms": 5.0, "itl_ms": 5.0}))
    model = tmp_path / "model.gguf"
    stand_in_gguf(model)
    cfg = {
        "name": "engine-death",
        "targets": [{
            "name": "E",
            "model": "calibration",
            "launch": {
                "engine": "llamacpp",
                "model": str(model),
                "executable": [sys.executable, str(ENGINE)],
                "parallel": 4,
                "health_timeout_s": 30,
                "env": {
                    "CALIB_ENGINE_CONFIG": str(settings),
                    "CALIB_ENGINE_DIE_AFTER": str(die_after),
                    "CALIB_ENGINE_DIE_ONCE": str(tmp_path / "died-once"),
                },
            },
        }],
        "concurrency": LEVELS,
        "requests_per_level": PER_LEVEL,
        "warmup_requests": 0,
        "output_tokens": 8,
        "input_tokens": 16,
        "scrape_interval_s": 0.2,
    }  # fmt: skip
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_engine_death_fails_the_level_and_the_sweep_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    # dies on the 3rd request of level c=2 (level 1 sends 6)
    rc = main(["sweep", "--config", str(_config(tmp_path, PER_LEVEL + 3)), "--out", str(out),
               "--no-report"])  # fmt: skip
    captured = capsys.readouterr()
    assert rc == 3, captured.err  # an invalid level: non-zero unless --allow-invalid
    assert (tmp_path / "died-once").exists()
    sweep = json.loads((out / "sweep.json").read_text())
    by_c = {r["concurrency"]: r["summary"] for r in sweep["runs"]}
    assert sorted(by_c) == LEVELS
    dead = by_c[2]
    assert dead["verdict"] == "invalid"
    died = [p for p in dead["problems"] if p["code"] == "engine_died"]
    assert died and died[0]["severity"] == "error", (dead["problems"], captured.err[-2000:])
    assert "SIGKILL" in died[0]["message"]
    for c in (1, 4):  # before the death, and on the restarted engine
        assert by_c[c]["verdict"] == "valid", by_c[c]["problems"]
        assert by_c[c]["requests"]["matched"] == PER_LEVEL
    with Store(out / "sweep.db") as store:
        status = {r.key: r.status for r in store.runs()}
        # every request sent in the failed level is recorded, none lost
        failed = [r for r in store.runs() if r.status == "failed"]
        assert len(failed) == 1
        assert len(store.records(failed[0].run_id)) == dead["requests"]["sent"] >= 3
    assert status == {"E|c=1|r=0": "done", "E|c=2|r=0": "failed", "E|c=4|r=0": "done"}
    assert (out / "engines" / "E.log").exists()
    assert (out / "engines" / "E.restart1.log").exists()  # started again after the death
    # two starts: the one that died has no stop (it was not stopped), the restart has
    first, again = sweep["engine_starts"]
    assert first["stop_s"] is None and again["stop_s"] is not None
    assert first["ready_s"] > 0 and again["ready_s"] > 0
    assert sweep["targets"][0]["started_at"] == again["started_at"]
    assert "failed level" in captured.out
    # nothing left running: no engine object, no process naming this test's folder
    assert lifecycle.live_engines() == []
    deadline = time.monotonic() + 3.0
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(str(tmp_path)) == []


def test_failed_level_is_redone_on_resume(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    config = _config(tmp_path, PER_LEVEL + 3)
    assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 3
    # same command again: the failed level is measured again, the others are kept
    assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 0
    sweep = json.loads((out / "sweep.json").read_text())
    assert [r["summary"]["verdict"] for r in sweep["runs"]] == ["valid"] * len(LEVELS)
    with Store(out / "sweep.db") as store:
        done = [r.key for r in store.runs() if r.status == "done"]
    assert sorted(done) == sorted(f"E|c={c}|r=0" for c in LEVELS)
    assert processes_mentioning(str(tmp_path)) == []
    # every engine start kept its log: the first sweep's two (E.log, E.restart1.log after
    # the death) and the resumed sweep's E.log, the earlier E.log set aside under its start
    logs = sorted(p.name for p in (out / "engines").glob("E*.log"))
    assert len(logs) == 3, logs
    assert "E.log" in logs and "E.restart1.log" in logs
    (kept,) = [n for n in logs if n not in ("E.log", "E.restart1.log")]
    assert re.fullmatch(r"E\.\d{8}T\d{6}(-\d+)?\.log", kept), kept
    heads = [(out / "engines" / n).read_text().splitlines()[0] for n in logs]
    assert all(h.startswith("# crossover-launch: ") for h in heads)


def test_killed_sweep_leaves_no_engine_behind(tmp_path: Path) -> None:
    """SIGKILL gives the sweep no chance to stop its engine: the kernel must
    (PR_SET_PDEATHSIG, set only for engines started from the main thread)."""
    out = tmp_path / "sweep"
    argv = crossover_cmd("sweep", "--config", str(_config(tmp_path, 0)), "--out", str(out),
                         "--no-report")  # fmt: skip
    first = start_and_interrupt(argv, out, signal.SIGKILL, after_done=1)
    assert first.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 5.0
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(str(tmp_path)) == []
