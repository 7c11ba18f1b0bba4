"""A sweep without a tokenizer file counts with an engine's own /tokenize. Launched targets
run one after another, each engine stopped before the next starts: each target's text is
re-tokenized by its own engine, so the witness does not die with the first engine (it
did: every run after the first target's was 'on the server's word alone')."""

from __future__ import annotations

from pathlib import Path

import yaml

from crossover.cli.app import main

from .conftest import calib_engine_target, read_sweep


def test_each_target_is_witnessed_by_its_own_engine(tmp_path: Path) -> None:
    cfg = {
        "name": "server-tokenizer",
        "targets": [
            calib_engine_target(tmp_path, n, {"ttft_ms": 2.0, "itl_ms": 1.0}) for n in "ab"
        ],
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
