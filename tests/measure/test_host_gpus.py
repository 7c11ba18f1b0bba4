"""The GPUs a host records are those the engines could use: NVML lists every GPU of the
machine, and ``CUDA_VISIBLE_DEVICES`` (crossover's own, or each target's) hides some.
Indices and GPU UUIDs are read as CUDA reads them (up to the first index that names no
GPU; empty hides all); a form not read here (a MIG id) keeps every GPU, and says so."""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from tests.advise.test_advise_hardware import fake_nvml

from crossover.advise import nvml as advise_nvml
from crossover.analysis.schema import SweepFile
from crossover.devices import read_nvml, without_uuids
from crossover.measure import host
from crossover.measure.host import GpuReading, _nvidia_smi, read_host
from crossover.metrics.host import HostFacts, HostGpu

H100 = "NVIDIA H100 80GB HBM3"
UUIDS = [f"GPU-{c * 8}-1111-2222-3333-444444444444" for c in "abcd"]


def _fake_nvml(names: list[str], uuids: list[str] | None = None) -> types.ModuleType:
    """A stand-in for pynvml with the calls the host reading makes; without ``uuids`` the
    binding has no ``nvmlDeviceGetUUID``."""
    mod = types.ModuleType("pynvml")
    ns: dict[str, Any] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(names),
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: names[h].encode(),  # older bindings return bytes
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=80 * 2**30),
        "nvmlSystemGetDriverVersion": lambda: "580.95.05",
        "nvmlSystemGetCudaDriverVersion": lambda: 13000,
    }
    if uuids is not None:
        ns["nvmlDeviceGetUUID"] = lambda h: uuids[h]
    for key, value in ns.items():
        setattr(mod, key, value)
    return mod


def _fake_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *lines: str, alone: bool = False
) -> None:
    """An ``nvidia-smi`` in ``tmp_path`` that prints ``lines`` (its CSV rows), first on
    PATH (``alone``: the only folder on it)."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in lines))
    smi.chmod(0o755)
    path = str(tmp_path) if alone else f"{tmp_path}:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)


@pytest.fixture
def four(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine of four H100s, crossover started with no CUDA_VISIBLE_DEVICES."""
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100] * 4, UUIDS))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)


def _host(tmp_path: Path, devices: list[str | None] | None = None) -> HostFacts:
    if devices is None:
        return read_host(tmp_path)
    return read_host(tmp_path, devices=devices)


@pytest.mark.usefixtures("four")
def test_every_gpu_is_kept_where_nothing_hides_some(tmp_path: Path) -> None:
    h = _host(tmp_path)
    assert len(h.gpus) == 4 and h.machine_gpus == 4 and h.gpus_chosen is None
    assert h.driver == "580.95.05" and h.cuda == "13.0"
    assert h.describe().startswith("4x NVIDIA H100 80GB HBM3 (80.0 GiB), driver 580.95.05")


@pytest.mark.usefixtures("four")
def test_crossover_s_own_cuda_visible_devices_chooses_the_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    h = _host(tmp_path)
    assert len(h.gpus) == 1 and h.machine_gpus == 4
    assert h.gpus_chosen == "CUDA_VISIBLE_DEVICES=1"
    assert h.describe().startswith(
        "1x NVIDIA H100 80GB HBM3 (80.0 GiB) of the machine's 4 GPUs "
        "(CUDA_VISIBLE_DEVICES=1), driver 580.95.05"
    )
    # the same kind of machine as one H100 alone, not as the four
    alone = HostFacts(seen_at="t", gpus=[HostGpu(name=H100)], cpu=h.cpu, cpus=h.cpus)
    assert h.machine() == alone.machine()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", " 3 , 1,3")
    assert len(_host(tmp_path).gpus) == 2


@pytest.mark.usefixtures("four")
@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("", 0),  # empty: no GPU
        ("-1", 0),  # the usual way to hide them all
        ("0,7,1", 1),  # CUDA stops at the first index that is no GPU
        ("2,", 1),
        (UUIDS[2], 1),
        (UUIDS[2][:8] + "," + UUIDS[0], 2),  # a start of a UUID that names one GPU
    ],
)
def test_indices_and_uuids_are_read_as_cuda_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, kept: int
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    h = _host(tmp_path)
    assert len(h.gpus) == kept and h.machine_gpus == 4
    assert h.gpus_chosen is not None and "not read here" not in h.gpus_chosen
    # a UUID, or the start of one, is a hardware identifier: the record keeps a hash
    kept_json = h.model_dump_json()
    assert not any(u[4:12] in kept_json for u in UUIDS), kept_json
    if "GPU-" in value:
        one = r"GPU-(#[0-9a-f]{8}|\.\.\.)"  # a UUID hashed, its start not kept
        assert re.fullmatch(rf"CUDA_VISIBLE_DEVICES={one}(,{one})?", h.gpus_chosen), h.gpus_chosen
    if kept == 0:
        assert h.describe().startswith("none of the machine's 4 GPUs (CUDA_VISIBLE_DEVICES=")


def test_a_uuid_chooses_that_gpu_among_gpus_of_different_kinds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["NVIDIA A100-SXM4-80GB", H100, "NVIDIA L4"]
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(names, UUIDS[:3]))
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUIDS[2][:6])
    assert [g.name for g in _host(tmp_path).gpus] == ["NVIDIA L4"]
    # indices of GPUs of different kinds are CUDA's fastest-first order: not read here
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    h = _host(tmp_path)
    assert len(h.gpus) == 3 and h.gpus_chosen is not None
    assert "not read here" in h.gpus_chosen and "every GPU counted" in h.gpus_chosen
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # NVML's order: read
    assert [g.name for g in _host(tmp_path).gpus] == ["NVIDIA L4"]


@pytest.mark.usefixtures("four")
@pytest.mark.parametrize(
    "value",
    [
        "MIG-aaaaaaaa-1111-2222-3333-444444444444",
        "GPU-ffff",  # names no GPU here
        "GPU-",  # names several
        "nvidia0",
    ],
)
def test_a_form_not_read_here_keeps_every_gpu_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    h = _host(tmp_path)
    assert len(h.gpus) == 4 and h.gpus_chosen is not None
    kept = without_uuids(value)  # a UUID or its start as a hash
    assert h.gpus_chosen.startswith(f"CUDA_VISIBLE_DEVICES={kept} not read here (")
    assert f"({h.gpus_chosen})" in h.describe()


def test_a_machine_of_one_gpu_hidden_says_one_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100], UUIDS[:1]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    head = _host(tmp_path).describe().split(", driver")[0]
    assert head == 'none of the machine\'s 1 GPU (CUDA_VISIBLE_DEVICES="")'


def test_uuids_a_binding_cannot_read_are_not_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100] * 2))  # no nvmlDeviceGetUUID
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUIDS[0])
    h = _host(tmp_path)
    assert len(h.gpus) == 2 and h.gpus_chosen is not None and "UUIDs" in h.gpus_chosen


@pytest.mark.usefixtures("four")
def test_the_targets_gpus_are_the_union_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = _host(tmp_path, ["0", "2,3", "0"])
    assert len(h.gpus) == 3 and h.machine_gpus == 4
    assert h.gpus_chosen == "CUDA_VISIBLE_DEVICES=0; CUDA_VISIBLE_DEVICES=2,3"
    # a target that keeps crossover's own: every GPU, or those crossover's hides
    assert len(_host(tmp_path, ["0", None]).gpus) == 4
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert len(_host(tmp_path, ["0", None]).gpus) == 2
    assert len(_host(tmp_path, ["0"]).gpus) == 1  # a target's own replaces crossover's


def test_nvidia_smi_gives_the_uuids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_smi(
        tmp_path,
        monkeypatch,
        f"NVIDIA H200, 143771, 580.95.05, {UUIDS[0]}",
        f"NVIDIA H200, 143771, 580.95.05, {UUIDS[1]}",
    )
    reading = _nvidia_smi()
    assert reading is not None and reading.uuids == (UUIDS[0], UUIDS[1])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUIDS[1])
    assert len(read_host(tmp_path, gpus=reading).gpus) == 1


def test_a_reading_without_uuids_still_reads_indices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    h = read_host(tmp_path, gpus=([HostGpu(name=H100)] * 2, "580", None))
    assert len(h.gpus) == 1 and h.machine_gpus == 2
    assert GpuReading([], None, None).uuids == ()


def test_a_host_kept_before_the_machine_s_gpus_were_still_loads() -> None:
    old = {"seen_at": "t", "gpus": [{"name": H100, "memory_gib": 79.6}], "driver": "580"}
    sweep = SweepFile.model_validate({"hosts": [old], "targets": [{"name": "x"}]})
    (h,) = sweep.hosts
    assert h.machine_gpus is None and h.gpus_chosen is None
    assert h.describe() == "1x NVIDIA H100 80GB HBM3 (79.6 GiB), driver 580; CPU unknown"


def test_the_host_and_advise_are_one_nvml_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One session of NVML (one nvmlInit) gives both the host a sweep records and the GPUs
    ``crossover advise`` and ``crossover gpus --local`` read; each reader reads through
    it."""
    nv = fake_nvml([H100] * 4, 79.6, cc=(9, 0), p2p=True, uuids=UUIDS)
    sessions: list[str] = []
    nv.nvmlInit = lambda: sessions.append("init")  # type: ignore[attr-defined]
    nv.nvmlSystemGetDriverVersion = lambda: "580.95.05"  # type: ignore[attr-defined]
    nv.nvmlSystemGetCudaDriverVersion = lambda: 13000  # type: ignore[attr-defined]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    reading = read_nvml(nv)
    local = advise_nvml.local_reading(reading)
    h = read_host(tmp_path, gpus=host.gpu_reading(reading))
    assert sessions == ["init"]
    assert [g.name for g in h.gpus] == [g.name for g in local.gpus] == [H100] * 4
    assert [g.memory_gib for g in h.gpus] == [round(g.memory_gib, 1) for g in local.gpus]
    assert host.gpu_reading(reading).uuids == tuple(g.uuid for g in local.gpus) == tuple(UUIDS)
    assert h.driver == "580.95.05" and h.cuda == "13.0" and h.machine_gpus == 4
    assert len(local.pairs) == 6 and all(p.p2p for p in local.pairs)

    # the readers themselves: each one session of the same reading
    assert host.read_nvml is advise_nvml.read_nvml is read_nvml
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    again = read_host(tmp_path)
    assert again.model_copy(update={"seen_at": h.seen_at}) == h
    assert advise_nvml.read() == local
    assert sessions == ["init"] * 3


def test_an_nvml_that_cannot_tell_the_driver_gives_way_to_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nv = _fake_nvml([H100] * 2, UUIDS[:2])

    def refused() -> str:
        raise RuntimeError("NVMLError_NotSupported")

    nv.nvmlSystemGetDriverVersion = refused  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    _fake_smi(tmp_path, monkeypatch, "NVIDIA H200, 143771, 580.95.05, GPU-x", alone=True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    h = read_host(tmp_path)
    assert [g.name for g in h.gpus] == ["NVIDIA H200"] and h.driver == "580.95.05"
