"""``CUDA_VISIBLE_DEVICES`` read once for every user (``crossover.devices``): its entries in
their own form, sliced among a target's replicas, and counted against the machine's GPUs
as CUDA counts them. And NVML read in one session for every user: each figure a binding
or driver does not tell is ``None``, and the session is always shut down."""

from __future__ import annotations

import re
import types
from typing import Any

import pytest

from crossover.devices import (
    NvmlGpu,
    NvmlPair,
    NvmlUnavailable,
    Unread,
    given,
    listed,
    read_nvml,
    replica_devices,
    visible_indices,
)

H100 = "NVIDIA H100 80GB HBM3"
UUIDS = [f"GPU-{c * 8}-1111-2222-3333-444444444444" for c in "abcd"]


def test_entries_keep_their_own_form_up_to_the_first_index_that_hides() -> None:
    assert listed("2,3") == ["2", "3"]
    assert listed(" 2 , 3 ") == ["2", "3"]
    assert listed(f"{UUIDS[1]},{UUIDS[0]}") == [UUIDS[1], UUIDS[0]]
    assert listed("MIG-xyz") == ["MIG-xyz"]
    assert listed("1,-1,2") == ["1"] and listed("-1") == [] and listed("") == []


def test_replica_k_gets_the_k_th_slice_of_the_entries_given() -> None:
    assert [replica_devices(["2", "3"], k, 1) for k in (0, 1)] == ["2", "3"]
    assert [replica_devices(["4", "5", "6", "7"], k, 2) for k in (0, 1)] == ["4,5", "6,7"]
    assert replica_devices(UUIDS, 1, 2) == f"{UUIDS[2]},{UUIDS[3]}"
    # nothing chose: the machine's GPUs by index
    assert [replica_devices(None, k, 2) for k in (0, 1)] == ["0,1", "2,3"]


def test_the_gpus_given_are_counted_as_cuda_counts_them() -> None:
    four = [H100] * 4
    assert given(None, four, UUIDS) == 4  # not set: the machine's
    assert given(None, None, ()) is None  # not set and not read: not guessed
    assert given("2,3", four, UUIDS) == 2
    assert given("2,3,9", four, UUIDS) == 2  # CUDA stops at 9, no GPU of four
    assert given("2,3,9", None, ()) == 3  # the machine not read: the entries
    assert given(UUIDS[3][:12], four, UUIDS) == 1
    assert given("", four, UUIDS) == 0 and given("-1", four, UUIDS) == 0
    assert given("MIG-a,MIG-b", four, UUIDS) == 2  # not read against NVML: its entries


def test_forms_not_read_against_the_machine_raise_unread() -> None:
    with pytest.raises(Unread, match="MIG-a is not an index"):
        visible_indices("MIG-a", [H100], [UUIDS[0]], pci_order=True)
    assert visible_indices("1,0", [H100, H100], UUIDS[:2], pci_order=False) == [1, 0]


# --- NVML, read once for the host record and the advisor ------------------------------------


def _nvml(names: list[str], full: bool = True) -> tuple[types.ModuleType, list[str]]:
    """A stand-in for pynvml and the log of its sessions (``init``, ``shutdown``);
    ``full=False``: an old binding with only names, memory and the driver."""
    calls: list[str] = []
    mod = types.ModuleType("pynvml")
    ns: dict[str, Any] = {
        "nvmlInit": lambda: calls.append("init"),
        "nvmlShutdown": lambda: calls.append("shutdown"),
        "nvmlDeviceGetCount": lambda: len(names),
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: names[h].encode(),  # older bindings return bytes
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=80 * 2**30),
        "nvmlSystemGetDriverVersion": lambda: b"580.95.05",
    }
    if full:
        ns |= {
            "NVML_P2P_CAPS_INDEX_READ": 0,
            "NVML_P2P_CAPS_INDEX_NVLINK": 3,
            "NVML_P2P_STATUS_OK": 0,
            "nvmlDeviceGetCudaComputeCapability": lambda h: (9, 0),
            "nvmlDeviceGetNumGpuCores": lambda h: 16896,
            "nvmlDeviceGetMaxClockInfo": lambda h, kind: 1980 if kind == 1 else 2619,
            "nvmlDeviceGetMemoryBusWidth": lambda h: 5120,
            "nvmlDeviceGetP2PStatus": lambda a, b, idx: 0,
            "nvmlDeviceGetUUID": lambda h: UUIDS[h],
            "nvmlSystemGetCudaDriverVersion": lambda: 13000,
        }
    for key, value in ns.items():
        setattr(mod, key, value)
    return mod, calls


def test_one_nvml_session_reads_every_gpu_every_pair_and_the_driver() -> None:
    nv, calls = _nvml([H100] * 3)
    reading = read_nvml(nv)
    assert calls == ["init", "shutdown"]
    assert [g.index for g in reading.gpus] == [0, 1, 2]
    first = reading.gpus[0]
    assert first == NvmlGpu(
        index=0,
        name=H100,
        memory_bytes=80 * 2**30,
        uuid=UUIDS[0],
        compute_capability="9.0",
        cuda_cores=16896,
        max_sm_clock_mhz=1980,
        max_memory_clock_mhz=2619,
        memory_bus_width_bits=5120,
    )
    assert [(p.a, p.b) for p in reading.pairs] == [(0, 1), (0, 2), (1, 2)]
    assert all(p.p2p and p.nvlink for p in reading.pairs)
    assert reading.driver == "580.95.05" and reading.cuda == "13.0"


def test_what_a_binding_or_driver_does_not_tell_is_none() -> None:
    nv, _ = _nvml([H100] * 2, full=False)
    reading = read_nvml(nv)
    gpu = reading.gpus[0]
    assert gpu.name == H100 and gpu.memory_bytes == 80 * 2**30
    assert gpu.uuid is None and gpu.compute_capability is None and gpu.cuda_cores is None
    assert gpu.max_sm_clock_mhz is None and gpu.memory_bus_width_bits is None
    assert reading.pairs == (NvmlPair(a=0, b=1, p2p=None, nvlink=None),)
    assert reading.driver == "580.95.05" and reading.cuda is None

    def refused(*_: Any) -> Any:
        raise RuntimeError("NVMLError_NotSupported")

    nv.nvmlSystemGetDriverVersion = refused
    nv.nvmlDeviceGetCudaComputeCapability = refused
    reading = read_nvml(nv)
    assert reading.driver is None and reading.gpus[0].compute_capability is None


def test_nvml_that_cannot_start_or_name_a_gpu_raises_and_is_shut_down() -> None:
    nv, _ = _nvml([H100])

    def no_driver() -> None:
        raise RuntimeError("Driver Not Loaded")

    nv.nvmlInit = no_driver
    with pytest.raises(NvmlUnavailable, match=r"^Driver Not Loaded$"):
        read_nvml(nv)
    nv, calls = _nvml([H100])

    def lost(_: Any) -> Any:
        raise RuntimeError("GPU is lost")

    nv.nvmlDeviceGetName = lost
    with pytest.raises(RuntimeError, match="GPU is lost"):
        read_nvml(nv)
    assert calls == ["init", "shutdown"]
    assert read_nvml(_nvml([])[0]).gpus == ()


def test_nvml_v2_memory_info_gives_what_the_driver_reserves() -> None:
    """NVML's memory info v2 says what the driver and firmware reserve of the total (an
    engine's budget is a share of the rest, as CUDA reports it); kept in the host record;
    ``None`` where the binding lacks the v2 call or the driver refuses it."""
    from crossover.measure.host import gpu_reading

    nv, _ = _nvml([H100])
    total, reserved = 81559 * 2**20, 479 * 2**20

    def info(h: int, version: int | None = None) -> Any:
        if version is None:
            return types.SimpleNamespace(total=total)
        assert version == 0x2000028
        return types.SimpleNamespace(total=total, reserved=reserved)

    nv.nvmlMemory_v2 = 0x2000028  # type: ignore[attr-defined]
    nv.nvmlDeviceGetMemoryInfo = info  # type: ignore[attr-defined]
    (gpu,) = read_nvml(nv).gpus
    assert (gpu.memory_bytes, gpu.memory_reserved_bytes) == (total, reserved)
    (host,) = gpu_reading(read_nvml(nv)).gpus
    assert (host.memory_gib, host.reserved_gib) == (79.6, 0.47)

    def refused(h: int, version: int | None = None) -> Any:
        if version is not None:
            raise RuntimeError("NVMLError_FunctionNotFound")
        return types.SimpleNamespace(total=total)

    nv.nvmlDeviceGetMemoryInfo = refused  # type: ignore[attr-defined]
    assert read_nvml(nv).gpus[0].memory_reserved_bytes is None
    old, _ = _nvml([H100])  # a binding without the v2 call at all
    assert read_nvml(old).gpus[0].memory_reserved_bytes is None


def test_uuids_are_kept_as_hashes_the_same_gpu_the_same() -> None:
    from crossover.devices import without_uuids

    uuid = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
    said = without_uuids(f"CUDA_VISIBLE_DEVICES={uuid},1; CUDA_VISIBLE_DEVICES={uuid}")
    first, second = re.findall(r"GPU-#[0-9a-f]{8}", said)
    assert first == second and "aaaa" not in said
    assert said.startswith("CUDA_VISIBLE_DEVICES=GPU-#") and said.count(",1;") == 1
    # the start of a UUID names a GPU too: too short to hash (its digits would be found
    # by trying them all), it is not kept; MIG instances, old form and new, likewise
    assert without_uuids("CUDA_VISIBLE_DEVICES=GPU-aaaa") == "CUDA_VISIBLE_DEVICES=GPU-..."
    mig = without_uuids(f"CUDA_VISIBLE_DEVICES=MIG-{uuid}/1/0,MIG-bbbbbbbb-1111-2222")
    assert mig == f"CUDA_VISIBLE_DEVICES=MIG-{first}/1/0,MIG-...", mig
    whole = without_uuids("MIG-bbbbbbbb-1111-2222-3333-444444444444")
    assert re.fullmatch(r"MIG-#[0-9a-f]{8}", whole), whole
    # indices and words pass as they are
    text = "CUDA_VISIBLE_DEVICES=0,2 not read here (a GPU-less form): every GPU counted"
    assert without_uuids(text) == text
