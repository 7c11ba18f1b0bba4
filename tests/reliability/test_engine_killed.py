"""A real llama-server (CPU, the synthetic tiny model) killed in the middle of
``crossover run``: the run ends cleanly (exit 3, one error line, no traceback), and
every request sent is in the database, the ones before the kill included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crossover.records.store import Store
from tests.sweep.conftest import child_env

from .conftest import serving

pytestmark = pytest.mark.llamacpp

REQUESTS = 24


def _records(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with Store(db) as store:
            return sum(len(store.records(r.run_id)) for r in store.runs())
    except Exception:  # being created by the child right now
        return 0


def test_engine_killed_mid_run(tmp_path: Path) -> None:
    from crossover.models.synth import ensure_synth

    tiny = ensure_synth("tiny-llama", ("gguf",)).gguf
    assert tiny is not None
    db, summary_path = tmp_path / "results.db", tmp_path / "summary.json"
    with serving(tiny, tmp_path / "llama-server.log") as engine:
        argv = [sys.executable, "-m", "crossover", "run", "--url", engine.url,
                "--engine", "llamacpp", "--model", "tiny", "--concurrency", "2",
                "--requests", str(REQUESTS), "--warmup", "0", "--output-tokens", "64",
                "--input-tokens", "16", "--db", str(db), "--json", str(summary_path),
                "--out", str(tmp_path), "--quiet", "--connect-timeout-s", "2"]  # fmt: skip
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()
        )
        try:
            deadline = time.monotonic() + 60
            while _records(db) < 2:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "no request finished in time"
                time.sleep(0.05)
            os.killpg(engine.pgid, signal.SIGKILL)
            _stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode in (1, 3), stderr
    assert "Traceback" not in stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, stderr
    summary = json.loads(summary_path.read_text())
    assert summary["verdict"] == "invalid"
    req = summary["requests"]
    assert req["sent"] == REQUESTS  # the closed loop went on; every request was sent
    assert req["failed"] >= 1
    assert 2 <= req["succeeded"] < REQUESTS  # the ones before the kill are kept
    codes = {p["code"] for p in summary["problems"] if p["severity"] == "error"}
    assert codes & {"connection_error", "stream_truncated"}, codes
    with Store(db) as store:
        (run,) = store.runs()
        assert run.status == "done"
        records = store.records(run.run_id)
    # none lost: sent = recorded, each index once, the successes matched
    assert len(records) == REQUESTS
    assert sorted(r.index for r in records) == list(range(REQUESTS))
    ok = [r for r in records if r.ok]
    assert len(ok) == req["succeeded"]
    assert all(r.completion_tokens == 64 and r.count_source == "usage" for r in ok)
