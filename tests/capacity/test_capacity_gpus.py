"""``crossover capacity --config``: a launched target's engine starts on the GPUs a sweep
gives it (``gpus_per_replica: k``, one replica: the first k GPUs crossover sees, as the
sweep's replica 0; ``TargetConfig.engine_gpus``), not on every GPU visible. The engine's
start is the seam: faked here, it keeps the config it was asked to start with."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from crossover.capacity import targets
from crossover.capacity.runner import CapacityEvents
from crossover.capacity.schema import CapacityFile
from crossover.engines import lifecycle
from crossover.engines.config import EngineConfig
from crossover.sweep.config import SweepConfig


class _Engine:
    url = "http://127.0.0.1:9"

    async def await_healthy(self, timeout_s: float) -> None:
        return None

    def stop(self) -> None:
        return None


def _started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, launch: dict[str, Any]
) -> list[EngineConfig]:
    """The engine configs ``capacity_per_target`` starts for one launched target (the
    search itself faked: it returns an empty result)."""
    started: list[EngineConfig] = []

    def start(config: EngineConfig, log_path: Path | str) -> _Engine:
        started.append(config)
        return _Engine()

    async def search(*args: Any) -> CapacityFile:
        return CapacityFile.model_construct(target={})

    monkeypatch.setattr(lifecycle, "start", start)
    monkeypatch.setattr(targets, "_search", search)
    sweep = SweepConfig.model_validate({
        "concurrency": [1], "output_tokens": 4,
        "targets": [{"name": "e", "model": "m",
                     "launch": {"engine": "llamacpp", "model": "m.gguf", **launch}}],
    })  # fmt: skip
    asyncio.run(targets.capacity_per_target(sweep, {}, tmp_path, CapacityEvents()))
    return started


def test_gpus_per_replica_starts_the_engine_on_the_first_k_visible_gpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    (cfg,) = _started(monkeypatch, tmp_path, {"gpus_per_replica": 2})
    assert cfg.env["CUDA_VISIBLE_DEVICES"] == "3,5"  # the sweep's replica 0


def test_without_crossover_s_own_setting_the_machine_s_first_gpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    (cfg,) = _started(monkeypatch, tmp_path, {"gpus_per_replica": 1})
    assert cfg.env["CUDA_VISIBLE_DEVICES"] == "0"


def test_a_launch_env_s_setting_is_kept_and_none_is_added_without_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    (cfg,) = _started(monkeypatch, tmp_path, {"env": {"CUDA_VISIBLE_DEVICES": "7"}})
    assert cfg.env["CUDA_VISIBLE_DEVICES"] == "7"
    (cfg,) = _started(monkeypatch, tmp_path, {})
    assert "CUDA_VISIBLE_DEVICES" not in cfg.env  # crossover's own, inherited
