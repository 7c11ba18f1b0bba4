"""Replica targets: one target that is N identical servers, the load round robin over
them. Already-running replicas (``urls:``, two calibration servers) and launched ones
(``launch: {replicas: 2, gpus_per_replica: 1}``, the calibration engine behind
llama-server's flags): every request served, half by each, each replica with its own
port, GPUs and log, all stopped at the end."""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from crossover.cli.app import main
from crossover.engines import lifecycle
from crossover.engines.effective import read_header
from crossover.records.store import Store
from tests.engines.conftest import processes_mentioning
from tests.ggufs import stand_in_gguf

from .conftest import Linear, crossover_cmd, read_sweep, servers, start_and_interrupt

ENGINE = Path(__file__).with_name("calib_engine.py")
PER_LEVEL = 8
LEVELS = [1, 2]


def _served(url: str) -> int:
    with urllib.request.urlopen(url + "/calibration/truth", timeout=5) as resp:
        return int(json.loads(resp.read())["requests_total"])


def _sweep(tmp_path: Path, target: dict[str, Any]) -> Path:
    cfg = {
        "name": "replicas",
        "targets": [target],
        "concurrency": LEVELS,
        "requests_per_level": PER_LEVEL,
        "warmup_requests": 0,
        "output_tokens": 6,
        "input_tokens": 12,
        "scrape_interval_s": 0.2,
        "client_floor": "off",
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _replicas_of_records(out: Path) -> list[int | None]:
    with Store(out / "sweep.db") as store:
        return [r.replica for run in store.runs() for r in store.records(run.run_id)]


def test_urls_target_splits_the_load(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with servers(Linear(2.0, 0.5), Linear(2.0, 0.5)) as urls:
        target = {"name": "dp2", "urls": urls, "engine": "vllm", "model": "calibration"}
        rc = main(["sweep", "--config", str(_sweep(tmp_path, target)), "--out", str(out),
                   "--no-report"])  # fmt: skip
        assert rc == 0
        total = PER_LEVEL * len(LEVELS)
        assert [_served(u) for u in urls] == [total // 2] * 2
    replicas = _replicas_of_records(out)
    assert len(replicas) == total
    assert replicas.count(0) == replicas.count(1) == total // 2
    (info,) = read_sweep(out)["targets"]
    assert info["url"] == urls[0]
    assert info["settings"] == {"replicas": 2, "replica_urls": urls}
    assert all(r["summary"]["verdict"] == "valid" for r in read_sweep(out)["runs"])


def _launched(tmp_path: Path, **launch: Any) -> dict[str, Any]:
    settings = tmp_path / "calibration.json"
    settings.write_text(json.dumps({"ttft_ms": 2.0, "itl_ms": 2.0}))
    model = tmp_path / "model.gguf"
    stand_in_gguf(model)
    block = {
        "engine": "llamacpp",
        "model": str(model),
        "executable": [sys.executable, str(ENGINE)],
        "parallel": 4,
        "health_timeout_s": 30,
        "env": {"CALIB_ENGINE_CONFIG": str(settings)},
    }
    block.update(launch)
    return {"name": "E", "model": "calibration", "launch": block}


def _nothing_left(tmp_path: Path) -> None:
    assert lifecycle.live_engines() == []
    deadline = time.monotonic() + 3.0
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(str(tmp_path)) == []


def test_launched_replicas_get_own_ports_gpus_and_logs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    target = _launched(tmp_path, replicas=2, gpus_per_replica=1)
    rc = main(["sweep", "--config", str(_sweep(tmp_path, target)), "--out", str(out),
               "--no-report"])  # fmt: skip
    assert rc == 0
    logs = [out / "engines" / "E.log", out / "engines" / "E-r1.log"]
    headers = [read_header(p.read_text()) for p in logs]
    assert all(h is not None for h in headers)
    ports = [h.port for h in headers if h is not None]
    assert len(set(ports)) == 2
    assert [h.env.get("CUDA_VISIBLE_DEVICES") for h in headers if h is not None] == ["0", "1"]
    assert sorted(p.name for p in (out / "engines").glob("*.log")) == ["E-r1.log", "E.log"]
    replicas = _replicas_of_records(out)
    total = PER_LEVEL * len(LEVELS)
    assert len(replicas) == total and replicas.count(0) == replicas.count(1) == total // 2
    (info,) = read_sweep(out)["targets"]
    assert info["settings"]["replicas"] == 2
    assert info["settings"]["replica_urls"] == [f"http://127.0.0.1:{p}" for p in ports]
    assert info["settings"].get("parallel_slots") == 4  # replica 0's log, as for one engine
    _nothing_left(tmp_path)


def test_one_replica_that_will_not_start_fails_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    target = _launched(tmp_path, replicas=2, gpus_per_replica=1)
    target["launch"]["env"]["CALIB_ENGINE_FAIL_GPUS"] = "1"
    rc = main(["sweep", "--config", str(_sweep(tmp_path, target)), "--out", str(out),
               "--no-report"])  # fmt: skip
    assert rc != 0
    captured = capsys.readouterr()
    assert "failed to start" in captured.out + captured.err
    # the one line names what the engine said as it died, not only its exit status
    assert "its log ends:" in captured.out + captured.err
    assert "no GPU 1" in (out / "engines" / "E-r1.log").read_text()
    assert read_sweep(out)["runs"] == []
    _nothing_left(tmp_path)


def test_one_replica_is_a_single_engine(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = main(["sweep", "--config", str(_sweep(tmp_path, _launched(tmp_path, replicas=1))),
               "--out", str(out), "--no-report"])  # fmt: skip
    assert rc == 0
    assert [p.name for p in (out / "engines").glob("*.log")] == ["E.log"]
    assert set(_replicas_of_records(out)) == {None}
    (info,) = read_sweep(out)["targets"]
    assert "replicas" not in info["settings"]
    _nothing_left(tmp_path)


def test_one_replica_dying_fails_the_level_and_restarts_all(tmp_path: Path) -> None:
    out = tmp_path / "out"
    target = _launched(tmp_path, replicas=2, gpus_per_replica=1)
    # replica 1 sees requests 1, 3, 5 ... of each level: its 6th is in level c=2
    target["launch"]["env"].update({
        "CALIB_ENGINE_DIE_AFTER": str(PER_LEVEL // 2 + 2),
        "CALIB_ENGINE_DIE_GPUS": "1",
        "CALIB_ENGINE_DIE_ONCE": str(tmp_path / "died-once"),
    })  # fmt: skip
    config = _sweep(tmp_path, target)
    config.write_text(config.read_text().replace("- 2\n", "- 2\n- 4\n"))
    rc = main(["sweep", "--config", str(config), "--out", str(out), "--no-report"])
    assert rc == 3  # an invalid level
    runs = {r["concurrency"]: r["summary"] for r in read_sweep(out)["runs"]}
    assert sorted(runs) == [1, 2, 4]
    assert runs[1]["verdict"] == runs[4]["verdict"] == "valid"  # c=4 on the restarted pair
    assert runs[2]["verdict"] == "invalid"
    died = [p["message"] for p in runs[2]["problems"] if p["code"] == "engine_died"]
    assert died and died[0].startswith("replica 1: ") and "SIGKILL" in died[0], died
    names = sorted(p.name for p in (out / "engines").glob("*.log"))
    assert names == ["E-r1.log", "E-r1.restart1.log", "E.log", "E.restart1.log"]
    _nothing_left(tmp_path)


def test_interrupted_sweep_stops_every_replica(tmp_path: Path) -> None:
    out = tmp_path / "out"
    target = _launched(tmp_path, replicas=2)
    config = _sweep(tmp_path, target)
    cfg = yaml.safe_load(config.read_text())
    cfg["concurrency"] = [1, 2, 4]
    cfg["requests_per_level"] = 400  # long enough to be interrupted in flight
    cfg["output_tokens"] = 16
    config.write_text(yaml.safe_dump(cfg))
    argv = crossover_cmd("sweep", "--config", str(config), "--out", str(out), "--no-report")
    first = start_and_interrupt(argv, out, signal.SIGINT, after_done=0)
    assert first.returncode != 0
    assert {p.name for p in (out / "engines").glob("*.log")} == {"E.log", "E-r1.log"}
    deadline = time.monotonic() + 5.0
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(str(tmp_path)) == []
