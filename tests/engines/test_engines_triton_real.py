"""A real tritonserver (the pinned nvidia-pytriton wheel, unpacked by ``crossover engines
install triton``) serving the real Gemma 3 270M GGUF through crossover's llama.cpp
Python-backend model, driven by ``crossover sweep`` beside llama-server on the same model
and the same pinned llama.cpp source: every run valid, the output counts witnessed by the
model's custom Triton metric (``crossover_generated_tokens_total``), and verify-config
reading the server's log."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from crossover.cli.app import main
from crossover.records.store import Store

pytestmark = [pytest.mark.llamacpp, pytest.mark.slow]

LEVELS = [1, 2]
PER_LEVEL = 4
OUT_TOKENS = 16
THREADS = str(len(os.sched_getaffinity(0)))


@pytest.fixture(scope="module")
def installed() -> tuple[Path, Path]:
    """(tritonserver, the GGUF): instant when `make engines models` has run."""
    from crossover.builds.libllama import ensure_libllama
    from crossover.builds.llamacpp import ensure_llama_server
    from crossover.builds.triton import ensure_triton
    from crossover.models.gemma import ensure_gemma3_270m

    ensure_llama_server(progress=False)  # as `make engines` built them (CUDA where a GPU is)
    ensure_libllama(progress=False)
    inst = ensure_triton(progress=False)
    return inst.tritonserver, ensure_gemma3_270m()


def _summaries(out: Path) -> list[tuple[str, int, dict[str, Any]]]:
    with Store(out / "sweep.db") as store:
        runs = store.runs()
    out = []
    for r in runs:  # key: "target|c=N|r=K"
        target, level, _ = (r.key or "").split("|")
        out.append((target, int(level.removeprefix("c=")), r.summary or {}))
    return out


def test_sweep_triton_beside_llama_server(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, gguf = installed
    plan = tmp_path / "plan"
    rc = main(["plan", "--engine", "triton", "--hosted", "llamacpp", "--model", str(gguf),
               "--max-seq-len", "2048", "--out", str(plan)])  # fmt: skip
    assert rc == 0
    repo = plan / "triton_model_repo"
    assert (repo / "llamacpp" / "1" / "model.py").is_file()
    cfg = {
        "name": "triton-vs-llama-server",
        "targets": [
            {"name": "llama-server", "model": "gemma",
             "launch": {"engine": "llamacpp", "model": str(gguf), "parallel": 1,
                        "extra_args": ["--threads", THREADS], "health_timeout_s": 120}},
            {"name": "triton", "model": "llamacpp",
             "launch": {"engine": "triton", "model": str(repo), "health_timeout_s": 180}},
        ],
        "concurrency": LEVELS,
        "requests_per_level": PER_LEVEL,
        "warmup_requests": 1,
        "output_tokens": OUT_TOKENS,
        "input_tokens": 32,
        "scrape_interval_s": 0.5,
    }  # fmt: skip
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(cfg))
    assert main(["sweep", "--config", str(config), "--check"]) == 0
    out = tmp_path / "out"
    rc = main(["sweep", "--config", str(config), "--out", str(out), "--no-report"])
    assert rc == 0
    runs = _summaries(out)
    assert sorted((t, c) for t, c, _ in runs) == sorted(
        (t, c) for t in ("llama-server", "triton") for c in LEVELS
    )
    for target, conc, s in runs:
        assert s["verdict"] == "valid", (target, conc, s.get("problems"))
        req = s["requests"]
        assert (req["succeeded"], req["failed"], req["matched"]) == (PER_LEVEL, 0, PER_LEVEL)
        # llama-server closes after each streamed response: learned, never raced (issue 43)
        assert req["retries"] == 0, (target, conc, s.get("problems"))
    for target, _, s in runs:
        if target != "triton":
            continue
        engine = s["witnesses"]["engine"]
        assert engine["counter"] == "crossover_generated_tokens_total"
        # counted by the model before each request's final response left
        assert engine["claimed"] >= PER_LEVEL * OUT_TOKENS  # the warm-up's too
        assert engine["generated"] >= engine["claimed"]
        checks = [c for c in s["witnesses"]["checks"] if c["witness"] == "engine_counter"]
        assert checks and all(c["disagreed"] == 0 for c in checks), checks
    log = next(out.rglob("triton*.log"))
    got = tmp_path / "verify.json"
    assert main(["verify-config", str(log), "--json", str(got)]) in (0, 1)
    facts = json.loads(got.read_text())["settings"]
    assert facts["version"]["value"] == "2.51.0"
    assert facts["triton_models"]["value"] == "llamacpp:1:READY"
    assert facts["hosted_engine"]["value"] == "llamacpp"
    assert facts["decoupled"]["value"] is True
    assert facts["instance_count"]["value"] == 1
    assert facts["context_tokens"]["value"] == 2048
