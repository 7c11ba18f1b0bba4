"""A launched target whose engine asks for more GPUs (tensor x pipeline parallel, as its
adapter reads its command) than it will see is one line before anything starts, and a
finding of ``crossover sweep --check``: against its launch env's ``CUDA_VISIBLE_DEVICES``
or crossover's own (the machine's, as NVML counts them, where neither is set; nothing
where NVML cannot count them), and with ``gpus_per_replica`` against each replica's
share."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from crossover.errors import UsageError
from crossover.sweep.check import check_config, check_replica_gpus
from crossover.sweep.config import SweepConfig, build_sweep_config
from crossover.sweep.driver import SweepRunner
from tests.measure.test_host_gpus import H100, _fake_nvml


def _config(**launch: Any) -> SweepConfig:
    return build_sweep_config(
        {
            "concurrency": [1],
            "output_tokens": 4,
            "input_tokens": 8,
            "client_floor": "off",
            "targets": [{"name": "big", "launch": {"engine": "vllm", "model": "m", **launch}}],
        }
    )


@pytest.fixture
def eight(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine of eight H100s, crossover started with no CUDA_VISIBLE_DEVICES."""
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100] * 8))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)


def _refusal(cfg: SweepConfig) -> str:
    with pytest.raises(UsageError) as caught:
        check_replica_gpus(cfg.targets)
    line = str(caught.value)
    assert "\n" not in line
    return line


@pytest.mark.usefixtures("eight")
def test_tp_over_crossover_s_own_gpus_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    check_replica_gpus(_config(tp=2).targets)  # two of two
    line = _refusal(_config(extra_args=["--tensor-parallel-size", "4"]))
    assert line.startswith(
        "target big: vLLM asks for 4 GPUs (--tensor-parallel-size 4) but "
        "CUDA_VISIBLE_DEVICES=0,1 leaves 2;"
    ), line
    # tp x pp
    line = _refusal(_config(tp=2, pp=2))
    assert "asks for 4 GPUs (--tensor-parallel-size 2 x --pipeline-parallel-size 2)" in line
    # unset: the machine's eight
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    check_replica_gpus(_config(tp=8).targets)
    assert "but the machine has 8" in _refusal(_config(tp=4, pp=4))


@pytest.mark.usefixtures("eight")
def test_the_target_s_own_env_is_what_its_engine_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # crossover's: not the engine's
    line = _refusal(_config(tp=2, env={"CUDA_VISIBLE_DEVICES": "5"}))
    assert "but its launch env's CUDA_VISIBLE_DEVICES=5 leaves 1;" in line, line


@pytest.mark.usefixtures("eight")
def test_replicas_sharing_the_gpus_each_need_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # without gpus_per_replica every replica starts with the same CUDA_VISIBLE_DEVICES
    # (sweep.level), so each engine needs its tp x pp of them, not replicas x tp x pp
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    check_replica_gpus(_config(tp=2, replicas=2).targets)
    cfg = _config(engine="sglang", extra_args=["--tp", "4"], replicas=2)
    line = _refusal(cfg)
    assert "SGLang asks for 4 GPUs (--tp 4) (each of its 2 replicas sees the same GPUs)" in line


def test_each_replica_s_share_is_checked_on_any_machine() -> None:
    cfg = _config(tp=2, replicas=2, gpus_per_replica=1)
    found = [str(e) for e in check_config(cfg, local=False).errors]
    assert found == [
        "target big: vLLM asks for 2 GPUs (--tensor-parallel-size 2) but each replica gets "
        "gpus_per_replica 1; give it a smaller tensor/pipeline parallel size, or "
        "gpus_per_replica 2"
    ], found


def test_without_nvml_the_machine_is_not_guessed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    check_replica_gpus(_config(tp=64).targets)  # not known: not refused
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # its entries are known
    assert "CUDA_VISIBLE_DEVICES=0,1 leaves 2" in _refusal(_config(tp=4))


def test_an_engine_without_a_count_or_one_gpu_asks_nothing() -> None:
    def count(env: str | None) -> tuple[int | None, str]:
        raise AssertionError("asked")

    check_replica_gpus(_config().targets, count)  # --tensor-parallel-size 1
    check_replica_gpus(_config(engine="llamacpp", model="m.gguf").targets, count)
    with pytest.raises(AssertionError, match="asked"):
        check_replica_gpus(_config(tp=2).targets, count)


def test_sweep_check_lists_it_and_a_sweep_fails_before_its_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    cfg = _config(tp=2)
    found = [str(e) for e in check_config(cfg, local=True).errors]
    assert any(e.startswith("target big: vLLM asks for 2 GPUs") for e in found), found
    remote = [str(e) for e in check_config(cfg, local=False).errors]
    assert not any("GPUs" in e for e in remote), remote  # another machine's to give
    with pytest.raises(UsageError, match="CUDA_VISIBLE_DEVICES=3 leaves 1"):
        SweepRunner(cfg, tmp_path / "out")
    assert not (tmp_path / "out" / "sweep.db").exists()


def test_the_sweep_command_says_it_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from crossover.cli.app import main

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    launch = {"engine": "vllm", "model": "m", "executable": ["/bin/true"],
              "extra_args": ["-tp", "4"]}  # fmt: skip
    config = tmp_path / "s.yaml"
    sweep = {"concurrency": [1], "output_tokens": 4, "input_tokens": 8,
             "targets": [{"name": "big", "launch": launch}]}  # fmt: skip
    config.write_text(yaml.safe_dump(sweep))
    assert main(["sweep", "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert "target big: vLLM asks for 4 GPUs (-tp 4)" in err[0]
    assert "CUDA_VISIBLE_DEVICES=0,1 leaves 2" in err[0]
    assert not (tmp_path / "out").exists()
    capsys.readouterr()
    assert main(["sweep", "--config", str(config), "--check"]) != 0
    out = capsys.readouterr().out
    assert "error: vLLM asks for 4 GPUs (-tp 4) but CUDA_VISIBLE_DEVICES=0,1 leaves 2" in out
