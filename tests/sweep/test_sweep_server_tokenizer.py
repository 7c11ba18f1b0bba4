"""A sweep without a tokenizer file counts with an engine's own /tokenize. Launched targets
run one after another, each engine stopped before the next starts: each target's text is
re-tokenized by its own engine, so the witness does not die with the first engine (it
did: every run after the first target's was 'on the server's word alone')."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from crossover.cli.app import main
from tests.ggufs import stand_in_gguf

from .conftest import read_sweep

ENGINE = Path(__file__).with_name("calib_engine.py")


def _target(tmp_path: Path, name: str) -> dict[str, Any]:
    settings = tmp_path / f"{name}.json"
    settings.write_text(json.dumps({"ttft_ms": 2.0, "itl_ms": 1.0}))
    model = tmp_path / f"{name}.gguf"
    stand_in_gguf(model)
    return {
        "name": name,
        "model": "calibration",
        "launch": {
            "engine": "llamacpp",
            "model": str(model),
            "executable": [sys.executable, str(ENGINE)],
            "parallel": 4,
            "health_timeout_s": 30,
            "env": {"CALIB_ENGINE_CONFIG": str(settings)},
        },
    }


def test_each_target_is_witnessed_by_its_own_engine(tmp_path: Path) -> None:
    cfg = {
        "name": "server-tokenizer",
        "targets": [_target(tmp_path, "a"), _target(tmp_path, "b")],
        "concurrency": [1, 2],
        "requests_per_level": 4,
        "warmup_requests": 0,
        "output_tokens": 8,
        "input_tokens": 16,
        "client_floor": "off",
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(path), "--out", str(out), "--no-report"]) == 0
    runs = read_sweep(out)["runs"]
    assert {r["target"] for r in runs} == {"a", "b"} and len(runs) == 4
    for r in runs:
        witnessed = r["summary"]["witnesses"]["output_tokens"]
        assert witnessed["stream_text_requests"] == 4, (r["target"], r["concurrency"])
        assert witnessed["stream_text"] == 4 * 8
        assert r["summary"]["verdict"] == "valid"
