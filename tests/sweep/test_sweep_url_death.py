"""A URL target whose server dies mid-sweep: its level fails, its remaining levels are
named as not run, the other URL target is still measured, and the sweep ends with the
invalid-run exit status and the cures (resume, --redo-invalid), never the usage-error one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from crossover.cli.app import main

from .conftest import Linear, servers, target_flags

ENGINE = Path(__file__).with_name("calib_engine.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dying_server(tmp_path: Path, die_after: int) -> tuple[subprocess.Popen[bytes], str]:
    settings = tmp_path / "calibration.json"
    settings.write_text(json.dumps({"ttft_ms": 2.0, "itl_ms": 2.0}))
    port = _free_port()
    env = {**os.environ, "CALIB_ENGINE_CONFIG": str(settings),
           "CALIB_ENGINE_DIE_AFTER": str(die_after)}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, str(ENGINE), "-m", "x", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the dying calibration server did not start")


def test_a_dead_url_target_does_not_abort_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the first target's server dies on its 3rd generation request (inside c=1)
    proc, dying_url = _dying_server(tmp_path, die_after=3)
    out = tmp_path / "sweep"
    try:
        with servers(Linear(2.0, 0.0)) as (healthy_url,):
            rc = main([
                "sweep", *target_flags({"dies": dying_url, "healthy": healthy_url}),
                "--concurrency", "1,2,4", "--requests-per-level", "4", "--warmup", "0",
                "--output-tokens", "8", "--input-tokens", "16", "--out", str(out),
                "--no-report",
            ])  # fmt: skip
    finally:
        proc.kill()
        proc.wait()
    err = capsys.readouterr()
    text = err.out + err.err
    assert rc == 3, text  # invalid/unmeasured, not the usage-error status 2
    sweep = json.loads((out / "sweep.json").read_text())
    healthy = {r["concurrency"]: r["summary"]["verdict"] for r in sweep["runs"]
               if r["target"] == "healthy"}  # fmt: skip
    assert healthy == {1: "valid", 2: "valid", 4: "valid"}
    dead = [r for r in sweep["runs"] if r["target"] == "dies"]
    assert [r["concurrency"] for r in dead] == [1]
    assert dead[0]["summary"]["verdict"] != "valid"
    flat = " ".join(text.split())
    assert "dies: not run, its server stopped answering" in flat
    assert "c=4" in flat or "4 r=0" in flat
    assert "--redo-invalid" in flat and "resumes" in flat
    assert "Traceback" not in text
