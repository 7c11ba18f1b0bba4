"""``crossover advise`` on the local GPUs plans for those ``CUDA_VISIBLE_DEVICES`` leaves,
not every GPU NVML lists (NVML sees the whole machine), and says which it assumed and
why, in its text and its JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crossover.advise.hardware import system_from_flags, system_from_nvml
from crossover.cli.app import main
from crossover.errors import UsageError

from .test_advise_hardware import fake_nvml

H100 = "NVIDIA H100 80GB HBM3"
UUIDS = [f"GPU-{c}{c}{c}{c}{c}{c}{c}{c}-1111-2222-3333-444444444444" for c in "abcdefgh"]


@pytest.fixture(autouse=True)
def _cuda_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)


def _eight() -> object:
    return fake_nvml([H100] * 8, 79.6, cc=(9, 0), p2p=True, uuids=UUIDS)


def test_cuda_visible_devices_chooses_the_gpus_planned_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    system = system_from_nvml(nv=_eight())  # type: ignore[arg-type]
    assert system.count == 2 and system.machine_gpus == 8
    assert system.gpu_indices == [0, 1]
    assert [(p.a, p.b) for p in system.pairs] == [(0, 1)]  # the pairs between those two
    assert system.gpus_chosen == "CUDA_VISIBLE_DEVICES=0,1"
    assert system.assumed() == (
        "2 of the machine's 8 GPUs, NVML indices 0, 1 (CUDA_VISIBLE_DEVICES=0,1)"
    )
    # UUIDs (or a start of one) as CUDA reads them, in the order given
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUIDS[6]},{UUIDS[3][:12]}")
    system = system_from_nvml(nv=_eight())  # type: ignore[arg-type]
    assert system.count == 2 and system.gpu_indices == [6, 3]


def test_unset_every_gpu_of_the_machine_and_says_so() -> None:
    system = system_from_nvml(nv=_eight())  # type: ignore[arg-type]
    assert system.count == 8 and system.machine_gpus == 8 and system.gpus_chosen is None
    assert system.assumed() == "the machine's 8 GPUs (CUDA_VISIBLE_DEVICES not set: every GPU)"
    assert system_from_flags("H100", 2).assumed() is None  # named by flags: not the machine's


def test_one_kind_among_the_machine_s_mixed_gpus_is_planned_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mixed = fake_nvml(["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"], 24.0)
    with pytest.raises(UsageError, match="different GPUs"):
        system_from_nvml(nv=mixed)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    system = system_from_nvml(nv=mixed)
    assert system.gpu.id == "RTX-4090" and system.count == 1


def test_none_visible_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, shown in (("", '""'), ("-1", "-1")):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
        with pytest.raises(UsageError) as caught:
            system_from_nvml(nv=_eight())  # type: ignore[arg-type]
        line = str(caught.value)
        assert "\n" not in line
        assert line.startswith(f"CUDA_VISIBLE_DEVICES={shown} leaves none of the machine's 8")
        assert "--gpu" in line


def test_a_form_not_read_here_keeps_every_gpu_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-1234")
    system = system_from_nvml(nv=_eight())  # type: ignore[arg-type]
    assert system.count == 8 and system.gpus_chosen is not None
    # the start of a MIG id is not kept: a hardware identifier
    assert system.gpus_chosen.startswith("CUDA_VISIBLE_DEVICES=MIG-... not read here (")
    assert "1234" not in system.gpus_chosen
    assert system.gpus_chosen.endswith("every GPU counted")


def test_advise_says_which_gpus_in_text_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _eight())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    out = tmp_path / "advice.json"
    args = ["advise", "--model", "llama-3.1-8b", "--concurrency", "1,64", "--json", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("2x H100-SXM (pcie), llama-3.1-8b")
    assert text[1] == (
        "local GPUs: 2 of the machine's 8 GPUs, NVML indices 0, 1 (CUDA_VISIBLE_DEVICES=0,1)"
    )
    hw = json.loads(out.read_text())["hardware"]
    assert hw["count"] == 2 and hw["source"] == "nvml"  # the keys it had, as they were
    assert hw["machine_gpus"] == 8 and hw["gpu_indices"] == [0, 1]
    assert hw["gpus_chosen"] == "CUDA_VISIBLE_DEVICES=0,1"
    assert hw["gpus_assumed"] == text[1].removeprefix("local GPUs: ")
    # no recommended layout spans more GPUs than are visible
    advice = json.loads(out.read_text())
    assert max(r["config"]["tp"] * r["config"]["pp"] for r in advice["recommendations"]) <= 2
    assert main([*args, "--explain"]) == 0
    assert text[1] in capsys.readouterr().out.splitlines()


def test_advise_for_named_gpus_keeps_its_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "advice.json"
    assert main(["advise", "--gpu", "H100", "--gpus", "2", "--model", "llama-3.1-8b",
                 "--concurrency", "1", "--json", str(out)]) == 0  # fmt: skip
    assert capsys.readouterr().out.splitlines()[1].startswith("  engine  format  layout")
    hw = json.loads(out.read_text())["hardware"]
    assert hw["source"] == "flags"
    assert hw["machine_gpus"] is None and hw["gpu_indices"] is None
    assert hw["gpus_chosen"] is None and hw["gpus_assumed"] is None


def test_mixed_gpus_in_cuda_s_own_order_are_refused_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA numbers mixed GPUs fastest first: index
    0 is not NVML's 0, so nothing is picked and the refusal says how to make it so."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    mixed = fake_nvml(["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"], 24.0)
    with pytest.raises(UsageError) as caught:
        system_from_nvml(nv=mixed)
    line = str(caught.value)
    assert "different GPUs" in line and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in line
    assert "\n" not in line
