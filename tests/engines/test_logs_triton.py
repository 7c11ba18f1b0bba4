"""verify-config on a real tritonserver log (captured on the CPU machine): the server's
version, its model and backend tables, the instances started, and the settings line of
crossover's llama.cpp Python-backend model."""

from __future__ import annotations

import json
from pathlib import Path

from crossover.cli.app import main
from crossover.engines.effective import effective_settings, read_log
from crossover.engines.logs_triton import read_triton_log

LOG = (
    Path(__file__).parents[1]
    / "fixtures"
    / "logs"
    / "tritonserver-2.51-cpu-llamacpp-gemma3-270m.log"
)


def test_real_log_settings() -> None:
    s = effective_settings(read_log(LOG))
    assert s.engine == "triton"
    values = {k: f.value for k, f in s.facts.items()}
    assert values["version"] == "2.51.0"
    assert values["triton_models"] == "llamacpp:1:READY"
    assert values["backend"] == "python"
    assert values["instance_count"] == 1
    assert values["hosted_engine"] == "llamacpp"
    assert values["decoupled"] is True
    assert values["context_tokens"] == 2048
    assert values["threads"] == 2
    assert values["gpu_layers"] == 0
    assert str(values["model"]).endswith("gemma-3-270m-q4_k_m.gguf")
    assert all(f.verified and f.basis == "log" for f in s.facts.values())


def test_verify_config_cli_checks_expectations(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    rc = main(["verify-config", str(LOG), "--expect", "decoupled=true,context_tokens=2048",
               "--json", str(out)])  # fmt: skip
    assert rc == 0
    assert json.loads(out.read_text())["settings"]["instance_count"]["value"] == 1
    rc = main(["verify-config", str(LOG), "--expect", "instance_count=4"])
    assert rc != 0


def test_several_models_and_instances() -> None:
    lines = [
        "+----------+---------+--------+",
        "| Model    | Version | Status |",
        "+----------+---------+--------+",
        "| ensemble | 1       | READY  |",
        "| post     | 1       | UNAVAILABLE: Internal: boom |",
        "+----------+---------+--------+",
        'I1 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: post_0_0 (CPU device 0)"',
        'I1 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: post_0_1 (CPU device 0)"',
        'I1 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: pre_0_0 (CPU device 0)"',
        'crossover-triton-model: {"engine": "vllm", "instance": "vllm_0_0", "settings": '
        '{"tensor_parallel_size": 2, "max_num_seqs": 256, "enforce_eager": false}, '
        '"triton": {"decoupled": true}}',
        "crossover-triton-model: {not json",
    ]
    facts = {k: f.value for k, f in read_triton_log(lines).items()}
    assert facts["triton_models"] == "ensemble:1:READY, post:1:UNAVAILABLE: Internal: boom"
    assert facts["instance_count"] == "post:2, pre:1"
    assert (facts["tp"], facts["parallel_slots"], facts["cuda_graphs"]) == (2, 256, True)
    assert facts["hosted_engine"] == "vllm"
    assert "backend" not in facts


def test_real_h200_failed_model_reads_its_state_not_its_traceback() -> None:
    """A model that failed to load: the model table's status runs over one row per
    traceback line (rows with empty Model and Version cells); the state is its first."""
    log = LOG.parent / "tritonserver-2.51-h200-vllm-numpy1-scipy.log.gz"
    s = effective_settings(read_log(log))
    values = {k: f.value for k, f in s.facts.items()}
    assert values["triton_models"] == (
        "vllm:1:UNAVAILABLE: Internal: AttributeError: module 'numpy' has no attribute 'long'"
    )
    assert values["version"] == "2.51.0"
    assert values["backend"] == "python"
    assert values["instance_count"] == 1


def test_real_h200_vllm_in_triton_reads_the_hosted_engine() -> None:
    """vLLM 0.26.0 served from Triton's Python backend on the H200 (2026-12-05,
    docs/results/h200/triton): the model READY, and the engine args it ran with read from
    the model's settings line, as the sweep's launch asked them."""
    log = LOG.parent / "tritonserver-2.51-h200-vllm-ready.log.gz"
    s = effective_settings(read_log(log))
    values = {k: f.value for k, f in s.facts.items()}
    assert values["triton_models"] == "vllm:1:READY"
    assert (values["version"], values["backend"], values["instance_count"]) == (
        "2.51.0", "python", 1,
    )  # fmt: skip
    assert values["hosted_engine"] == "vllm" and values["decoupled"] is True
    assert (values["tp"], values["pp"], values["parallel_slots"]) == (1, 1, 512)
    assert (values["context_tokens"], values["cuda_graphs"]) == (512, True)
    assert values["gpu_memory_utilization"] == 0.9
