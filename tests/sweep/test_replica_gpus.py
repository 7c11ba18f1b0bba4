"""A target's replicas (``gpus_per_replica``) get their GPUs from those crossover was given:
the k-th slice of crossover's own ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs, as given),
else of the machine's; Ray's assignment where Ray gives one; and a target that needs more
GPUs than are visible is one line before anything starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from crossover.errors import UsageError
from crossover.measure.host import gpus_to_give
from crossover.sweep.check import check_config, check_replica_gpus
from crossover.sweep.config import SweepConfig, build_sweep_config
from crossover.sweep.driver import SweepRunner
from crossover.sweep.level import TargetSession
from crossover.sweep.scrape import NVMLSampler
from tests.measure.test_host_gpus import H100, UUIDS, _fake_nvml


def _config(replicas: int = 2, per: int = 1, **more: Any) -> SweepConfig:
    launch = {"engine": "vllm", "model": "m", "replicas": replicas, "gpus_per_replica": per}
    return build_sweep_config(
        {
            "concurrency": [1],
            "output_tokens": 4,
            "input_tokens": 8,
            "client_floor": "off",
            "targets": [{"name": "dp", "launch": {**launch, **more}}],
        }
    )


def _session(tmp_path: Path, cfg: SweepConfig, ray: list[str] | None = None) -> TargetSession:
    return TargetSession(cfg.targets[0], cfg, tmp_path, NVMLSampler(), visible_gpus=ray)


def test_replicas_get_slices_of_crossover_s_own_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    s = _session(tmp_path, cfg)
    assert [s.replica_gpus(k, 1) for k in (0, 1)] == ["2", "3"]
    assert cfg.targets[0].engine_gpus == "2,3"  # the host records those
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUIDS[3]},{UUIDS[1]}")
    assert [s.replica_gpus(k, 1) for k in (0, 1)] == [UUIDS[3], UUIDS[1]]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert [s.replica_gpus(k, 1) for k in (0, 1)] == ["0", "1"]


def test_ray_s_assignment_wins_over_crossover_s_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    s = _session(tmp_path, _config(per=2), ray=["4", "5", "6", "7"])
    assert [s.replica_gpus(k, 2) for k in (0, 1)] == ["4,5", "6,7"]


def test_more_gpus_than_visible_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100] * 8))
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    check_replica_gpus(_config().targets)  # two of two
    with pytest.raises(UsageError) as caught:
        check_replica_gpus(_config(replicas=3).targets)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(
        "target dp: needs 3 GPUs (replicas 3 x gpus_per_replica 1) but "
        "CUDA_VISIBLE_DEVICES=2,3 leaves 2;"
    )
    # unset: the machine's, as NVML counts them
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus_to_give() == (8, "the machine has 8")
    with pytest.raises(UsageError, match=r"needs 10 GPUs .* but the machine has 8"):
        check_replica_gpus(_config(replicas=5, per=2).targets)


def test_without_nvml_the_machine_is_not_guessed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus_to_give()[0] is None
    check_replica_gpus(_config(replicas=64).targets)  # not known: not refused
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # its entries are known
    with pytest.raises(UsageError, match="CUDA_VISIBLE_DEVICES=0 leaves 1"):
        check_replica_gpus(_config().targets)


def test_only_targets_with_replicas_on_gpus_ask_the_machine() -> None:
    def count(env: str | None) -> tuple[int | None, str]:
        raise AssertionError("asked")

    one = _config(replicas=1).targets[0]
    url = one.model_validate({"name": "u", "url": "http://127.0.0.1:9"})
    plain = one.model_copy(
        update={"launch": one.launch.model_copy(update={"gpus_per_replica": None})}
    )  # type: ignore[union-attr]
    check_replica_gpus([url, plain], count)
    with pytest.raises(AssertionError, match="asked"):
        check_replica_gpus([url, one], count)


def test_a_sweep_that_needs_more_gpus_fails_before_its_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(UsageError, match="CUDA_VISIBLE_DEVICES=3 leaves 1"):
        SweepRunner(_config(), tmp_path / "out")
    assert not (tmp_path / "out" / "sweep.db").exists()


def test_the_sweep_command_says_it_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from crossover.cli.app import main

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    launch = {"engine": "vllm", "model": "m", "replicas": 2, "gpus_per_replica": 1,
              "executable": ["/bin/true"]}  # fmt: skip
    config = tmp_path / "s.yaml"
    sweep = {"concurrency": [1], "output_tokens": 4, "input_tokens": 8,
             "targets": [{"name": "dp", "launch": launch}]}  # fmt: skip
    config.write_text(yaml.safe_dump(sweep))
    assert main(["sweep", "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in err[0]
    assert "target dp: needs 2 GPUs" in err[0] and "CUDA_VISIBLE_DEVICES=3 leaves 1" in err[0]
    assert not (tmp_path / "out" / "sweep.db").exists()


def test_sweep_check_lists_it_here_not_for_another_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    found = [str(e) for e in check_config(_config(), local=True).errors]
    assert any(e.startswith("target dp: needs 2 GPUs") for e in found), found
    # --remote, --ray: the GPUs are another machine's (or Ray's) to give
    remote = [str(e) for e in check_config(_config(), local=False).errors]
    assert not any("GPUs" in e for e in remote), remote
