"""The vLLM model ``crossover plan --engine triton --hosted vllm`` writes, run in the real
tritonserver (the pinned nvidia-pytriton wheel) and driven by ``crossover sweep``, with a
stand-in for vLLM at the model's seam (tests/fixtures/fake_vllm: no GPU here). What it
checks is everything around the engine: the asyncio loop in a thread of the real stub,
decoupled streaming through /v2/models/vllm/generate_stream, the token counter as the
engine witness, the settings line verify-config reads, and the two things vLLM does at
start that depend on being embedded in the stub: a process forked from it, and a new
interpreter started from ``sys.executable``, both seeing the stub's NumPy 1.26.4."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from crossover.cli.app import main
from crossover.records.store import Store

# llamacpp: the Triton install `make engines` makes (as tests/builds/test_builds_triton.py)
pytestmark = [pytest.mark.llamacpp, pytest.mark.slow]

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_vllm"
LEVELS = [1, 4]
PER_LEVEL = 8
OUT_TOKENS = 24


def _alive(pid: int) -> bool:
    """Running (a zombie left for a reaper counts as gone)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.2)
    return True


@pytest.fixture(scope="module")
def tritonserver() -> Path:
    from crossover.builds.triton import ensure_triton

    return ensure_triton(progress=False).tritonserver


def test_sweep_vllm_model_in_tritonserver(tritonserver: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan"
    rc = main(["plan", "--engine", "triton", "--hosted", "vllm", "--model", "gemma-3-270m",
               "--max-concurrency", "8", "--max-seq-len", "512", "--load-format", "dummy",
               "--out", str(plan)])  # fmt: skip
    assert rc == 0
    # the stand-in goes beside model.py (the model puts its folder first on sys.path): the
    # stub's embedded interpreter ignores PYTHONPATH (seen here and on the H200)
    shutil.copytree(FAKE / "vllm", plan / "triton_model_repo" / "vllm" / "1" / "vllm")
    cfg = {
        "name": "triton-vllm-stand-in",
        "targets": [
            {"name": "triton-vllm", "model": "vllm",
             "launch": {"engine": "triton", "model": str(plan / "triton_model_repo"),
                        "health_timeout_s": 180}},
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
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 0
    with Store(out / "sweep.db") as store:
        runs = store.runs()
    assert len(runs) == len(LEVELS)
    for run in runs:
        s = run.summary or {}
        assert s["verdict"] == "valid", (run.key, s.get("problems"))
        req = s["requests"]
        assert (req["succeeded"], req["failed"], req["matched"]) == (PER_LEVEL, 0, PER_LEVEL)
        engine = s["witnesses"]["engine"]
        assert engine["counter"] == "crossover_generated_tokens_total"
        assert engine["generated"] >= engine["claimed"] >= PER_LEVEL * OUT_TOKENS
    log = next(out.rglob("triton-vllm*.log"))
    text = log.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("fake-vllm: "))
    seen = json.loads(line.removeprefix("fake-vllm: "))
    # the engine args crossover's plan wrote reached the engine as vLLM would get them
    assert seen["engine_args"]["load_format"] == "dummy"
    assert seen["engine_args"]["max_num_batched_tokens"] == 8192
    # a forked engine core and a sys.executable interpreter both run on the stub's NumPy
    assert seen["fork_exitcode"] == 0 and seen["forked"]["numpy"] == "1.26.4", seen
    assert seen["worker_rc"] == 0 and seen["worker"].startswith("1.26.4 "), seen
    assert Path(seen["executable"]).name.startswith("python"), seen
    # every streamed request asked the engine for increments, as vllm serve does
    kinds = next(ln for ln in text.splitlines() if ln.startswith("fake-vllm-kinds: "))
    asked = json.loads(kinds.removeprefix("fake-vllm-kinds: "))
    assert asked.get("DELTA", 0) >= len(LEVELS) * PER_LEVEL and "CUMULATIVE" not in asked, asked
    # the engine core's stand-in did not outlive the server the sweep stopped
    assert not _alive(int(seen["core_pid"])), seen["core_pid"]
    got = tmp_path / "verify.json"
    assert main(["verify-config", str(log), "--json", str(got)]) in (0, 1)
    facts = json.loads(got.read_text())["settings"]
    assert facts["triton_models"]["value"] == "vllm:1:READY"
    assert facts["hosted_engine"]["value"] == "vllm"
    assert facts["parallel_slots"]["value"] == 8
