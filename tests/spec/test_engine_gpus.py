"""The ``CUDA_VISIBLE_DEVICES`` a target's engines start with, where the target sets one
(its launch env, or ``gpus_per_replica``): the GPUs the sweep's host says its targets use."""

from __future__ import annotations

from typing import Any

import pytest

from crossover.spec.target import TargetConfig


def _launch(**launch: Any) -> TargetConfig:
    return TargetConfig.model_validate(
        {"name": "A", "launch": {"engine": "vllm", "model": "m", **launch}}
    )


def test_a_target_s_own_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _launch(env={"CUDA_VISIBLE_DEVICES": "2,3"}).engine_gpus == "2,3"
    assert _launch(env={"CUDA_VISIBLE_DEVICES": ""}).engine_gpus == ""
    # replica k gets GPUs k*K .. k*K+K-1: three replicas of two use the first six
    assert _launch(replicas=3, gpus_per_replica=2).engine_gpus == "0,1,2,3,4,5"


def test_replicas_take_theirs_from_crossover_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5,7")
    # the first replicas x gpus_per_replica of crossover's own, not the machine's first
    assert _launch(replicas=2, gpus_per_replica=1).engine_gpus == "2,3"
    assert _launch(replicas=2, gpus_per_replica=2).engine_gpus == "2,3,5,7"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb")  # UUIDs stay UUIDs
    assert _launch(replicas=1, gpus_per_replica=1).engine_gpus == "GPU-aaaa"
    # the target's own env still wins (gpus_per_replica then cannot be given)
    assert _launch(env={"CUDA_VISIBLE_DEVICES": "0"}).engine_gpus == "0"


def test_a_target_that_keeps_crossover_s_own() -> None:
    assert _launch().engine_gpus is None
    assert _launch(env={"HF_HOME": "/tmp"}).engine_gpus is None
    url = TargetConfig.model_validate({"name": "B", "url": "http://127.0.0.1:8000"})
    assert url.engine_gpus is None
