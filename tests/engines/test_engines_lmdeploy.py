"""LMDeploy, the engine added as one module (crossover.engines.specs.lmdeploy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.engines import registry
from crossover.engines.adapters import launch_spec
from crossover.engines.effective import LaunchRecord, effective_settings, header_line
from crossover.engines.registry import engine_config
from crossover.errors import UsageError


def test_registered_with_its_dialect() -> None:
    spec = registry.get("lmdeploy")
    assert spec.dialect == registry.get("llamacpp").dialect
    assert spec.health_path == "/health"
    assert spec.plan is None and spec.advise is None  # not a plan or advisor engine


def test_launch_argv(tmp_path: Path) -> None:
    config = engine_config(
        engine="lmdeploy",
        model="internlm/internlm2_5-7b-chat",
        tp=2,
        parallel=64,
        context_tokens=4096,
        gpu_memory_utilization=0.9,
        max_batched_tokens=8192,
        dtype="bfloat16",
        extra_args=["--backend", "pytorch"],
    )
    spec = launch_spec(config, 23333, tmp_path)
    assert spec.argv == [
        "lmdeploy", "serve", "api_server", "internlm/internlm2_5-7b-chat",
        "--server-name", "127.0.0.1", "--server-port", "23333",
        "--tp", "2", "--max-batch-size", "64", "--session-len", "4096",
        "--cache-max-entry-count", "0.9", "--max-prefill-token-num", "8192",
        "--dtype", "bfloat16", "--backend", "pytorch",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("knob", "value"), [("pp", 2), ("quant", "fp8"), ("cuda_graphs", True), ("flash_attn", True)]
)
def test_refuses_what_it_cannot_take(tmp_path: Path, knob: str, value: object) -> None:
    config = engine_config(engine="lmdeploy", model="m", **{knob: value})
    with pytest.raises(UsageError, match=f"lmdeploy does not take {knob}="):
        launch_spec(config, 23333, tmp_path)


def test_the_same_table_reads_the_launch_back(tmp_path: Path) -> None:
    config = engine_config(engine="lmdeploy", model="m", tp=2, parallel=32)
    spec = launch_spec(config, 23333, tmp_path)
    record = LaunchRecord(
        engine="lmdeploy", argv=spec.argv, env={}, port=23333, started_at="2026-01-01T00:00:00"
    )
    settings = effective_settings(header_line(record) + "INFO some line\n")
    assert settings.engine == "lmdeploy"
    assert settings.facts["tp"].value == 2
    assert settings.facts["parallel_slots"].value == 32
    assert settings.facts["parallel_slots"].basis == "launch-argv"
    assert not settings.facts["parallel_slots"].verified
