"""``crossover capacity --config sweep.yaml``: each target searched in turn, a launched
engine started before its search and stopped after it, the results side by side.
The launched engine is the calibration server behind llama-server's flags."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from crossover.calibration.server import build_config, spawn
from crossover.cli.app import main
from tests.engines.conftest import processes_mentioning
from tests.ggufs import stand_in_gguf

pytestmark = pytest.mark.slow

ENGINE = Path(__file__).parents[1] / "sweep" / "calib_engine.py"
# TTFT grows by 40 ms per other request in flight: past 25 requests/s the queue grows
MODEL: dict[str, object] = {"ttft_ms": 10.0, "ttft_per_stream_ms": 40.0, "itl_ms": 10.0}


def test_capacity_per_target_of_a_sweep_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "calibration.json"
    settings.write_text(json.dumps(MODEL))
    gguf = tmp_path / "model.gguf"
    stand_in_gguf(gguf)
    out = tmp_path / "cap.json"
    with spawn(build_config(MODEL)) as url:  # as a config file's mapping
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump({
            "targets": [
                {"name": "launched", "model": "calibration", "launch": {
                    "engine": "llamacpp", "model": str(gguf), "parallel": 4,
                    "executable": [sys.executable, str(ENGINE)], "health_timeout_s": 30,
                    "env": {"CALIB_ENGINE_CONFIG": str(settings)}}},
                {"name": "url", "url": url, "engine": "vllm", "model": "calibration"},
            ],
            "concurrency": [1], "output_tokens": 4, "input_tokens": 16,
        }))  # fmt: skip
        rc = main(
            ["capacity", "--config", str(config), "--slo", "ttft_ms.mean=66.8",
             "--start-rate", "4", "--precision", "1.0", "--duration-s-per-level", "2",
             "--json", str(out), "--out", str(tmp_path / "runs")]
        )  # fmt: skip
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "crossover.capacity/1"
    assert [t["target"]["name"] for t in data["targets"]] == ["launched", "url"]
    for t in data["targets"]:
        assert t["schema"] == "crossover.capacity/1"
        assert t["verdict"] == "found"
        lo, hi = t["interval"]
        assert 4 <= lo < hi <= 64 and hi / lo - 1 <= 1.0
        # 2 s levels are for the plumbing only: a level starts from an empty server, and
        # so short a level is mostly ramp, which flatters it (the accuracy test holds 6 s)
        assert [lv["met"] for lv in t["levels"]] == [lv["rate_rps"] <= lo for lv in t["levels"]]
    assert [lv["rate_rps"] for lv in data["targets"][0]["levels"]][:2] == [4, 8]
    assert (tmp_path / "runs" / "launched" / "engine.log").is_file()
    assert (tmp_path / "runs" / "url" / "capacity.db").is_file()
    assert "capacity per target" in capsys.readouterr().out
    assert not processes_mentioning(str(gguf))  # the launched engine was stopped


def test_replica_targets_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump({
        "concurrency": [1], "output_tokens": 4,
        "targets": [{"name": "dp2", "urls": ["http://127.0.0.1:9", "http://127.0.0.1:10"],
                     "model": "m"}],
    }))  # fmt: skip
    rc = main(["capacity", "--config", str(config), "--slo", "ttft_ms.mean=50",
               "--json", str(tmp_path / "c.json"), "--out", str(tmp_path / "runs")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: target dp2: capacity searches one server, not replicas"


def test_an_engine_asking_for_more_gpus_than_visible_is_one_line_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # as a sweep refuses it (crossover.sweep.check): -tp 4 in extra_args, 2 GPUs visible
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    exe = tmp_path / "vllm-started"
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump({
        "concurrency": [1], "output_tokens": 4,
        "targets": [{"name": "big", "launch": {
            "engine": "vllm", "model": "m", "extra_args": ["-tp", "4"],
            "executable": ["sh", "-c", f"touch {exe}; sleep 60"]}}],
    }))  # fmt: skip
    rc = main(["capacity", "--config", str(config), "--slo", "ttft_ms.mean=50",
               "--out", str(tmp_path / "runs")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: target big: vLLM asks for 4 GPUs (-tp 4)"), err
    assert "CUDA_VISIBLE_DEVICES=0,1 leaves 2" in err[0], err
    assert not exe.exists()  # no engine was started
