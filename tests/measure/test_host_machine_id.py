"""A host says which physical machine it was (``machine_id``), not only what kind: a hash
of every GPU's UUID the machine lists, so a subset chosen by ``CUDA_VISIBLE_DEVICES`` is
the same machine, other GPUs are another, and no raw UUID is kept (results get
published). ``None`` where a UUID was not read or there is no GPU; records kept before it
was still load."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from tests.measure.test_host_gpus import _fake_nvml, _fake_smi

from crossover.analysis.schema import SweepFile
from crossover.measure.host import _nvidia_smi, read_host
from crossover.metrics.host import HostFacts, HostGpu, fingerprint, kinds, machine_count

H100 = HostGpu(name="NVIDIA H100 80GB HBM3", memory_gib=79.6)
UUIDS = [f"GPU-{c * 8}-1111-2222-3333-444444444444" for c in "abcd"]
OTHER = [f"GPU-{c * 8}-5555-6666-7777-888888888888" for c in "abcd"]


def _read(tmp_path: Path, uuids: list[str | None] | None, n: int = 4) -> HostFacts:
    gpus = [H100] * n
    if uuids is None:
        return read_host(tmp_path, gpus=(gpus, "580.95.05", "13.0"))
    return read_host(tmp_path, gpus=(gpus, "580.95.05", "13.0", tuple(uuids)))


def _no_uuid_in(h: HostFacts) -> None:
    text = json.dumps(h.model_dump(mode="json")) + h.describe()
    for u in UUIDS + OTHER:
        assert u not in text and u.removeprefix("GPU-")[:8] not in text


def test_a_reading_of_uuids_gives_a_fingerprint_not_the_uuids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    h = _read(tmp_path, list(UUIDS))
    digest = hashlib.sha256(",".join(sorted(UUIDS)).encode()).hexdigest()[:12]
    assert h.machine_id == f"gpu:{digest}"
    _no_uuid_in(h)
    # the same GPUs listed in another order are the same machine
    assert _read(tmp_path, list(reversed(UUIDS))).machine_id == h.machine_id
    # other GPUs are another machine, of the same kind
    other = _read(tmp_path, list(OTHER))
    assert other.machine_id is not None and other.machine_id != h.machine_id
    assert h.same_kind(other) and h.same_machine(other) is False
    assert h.same_machine(_read(tmp_path, list(UUIDS))) is True
    _no_uuid_in(other)


@pytest.mark.parametrize("value", ["1", "2,3", UUIDS[3], ""])
def test_a_chosen_subset_of_the_machine_is_the_same_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    whole = _read(tmp_path, list(UUIDS))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    chosen = _read(tmp_path, list(UUIDS))
    assert len(chosen.gpus) < 4 and chosen.machine_gpus == 4  # some GPUs were hidden
    assert chosen.machine_id == whole.machine_id is not None
    assert chosen.same_machine(whole) is True
    if not value.startswith("GPU-"):  # gpus_chosen says the value as it was set
        _no_uuid_in(chosen)
    # a target's own CUDA_VISIBLE_DEVICES too
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert read_host(
        tmp_path, gpus=([H100] * 4, "580", None, tuple(UUIDS)), devices=["0"]
    ).machine_id == (whole.machine_id)


@pytest.mark.parametrize(
    "uuids",
    [
        None,  # a reading that read no UUIDs
        [UUIDS[0], None, UUIDS[2], UUIDS[3]],  # one not read
        [UUIDS[0]],  # fewer than the GPUs listed
    ],
)
def test_without_every_uuid_there_is_no_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uuids: list[str | None] | None
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    h = _read(tmp_path, uuids)
    assert h.machine_id is None
    assert h.same_machine(_read(tmp_path, list(UUIDS))) is None
    _no_uuid_in(h)


def test_no_gpu_no_fingerprint(tmp_path: Path) -> None:
    assert read_host(tmp_path, gpus=([], None, None, ())).machine_id is None
    assert fingerprint([]) is None and fingerprint([None]) is None and fingerprint([""]) is None


def test_nvml_and_nvidia_smi_give_the_same_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100.name] * 2, UUIDS[:2]))
    nvml = read_host(tmp_path)
    _fake_smi(
        tmp_path,
        monkeypatch,
        f"{H100.name}, 81559, 580.95.05, {UUIDS[1]}",
        f"{H100.name}, 81559, 580.95.05, {UUIDS[0]}",
    )
    reading = _nvidia_smi()
    assert reading is not None
    assert read_host(tmp_path, gpus=reading).machine_id == nvml.machine_id == fingerprint(UUIDS[:2])
    # a binding without nvmlDeviceGetUUID reads none: no fingerprint
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100.name] * 2))
    assert read_host(tmp_path).machine_id is None


def test_a_host_kept_before_machine_id_still_loads_and_counts_as_before() -> None:
    old = {"seen_at": "t", "gpus": [{"name": H100.name, "memory_gib": 79.6}], "cpus": 16}
    sweep = SweepFile.model_validate({"hosts": [old], "targets": [{"name": "x"}]})
    (h,) = sweep.hosts
    assert h.machine_id is None
    now = h.model_copy(update={"machine_id": fingerprint(UUIDS)})
    assert h.same_machine(now) is None and now.same_machine(h) is None
    # two machines of one kind are one kind: kinds and machine_count count kinds
    other = now.model_copy(update={"machine_id": fingerprint(OTHER)})
    assert now.same_machine(other) is False and now.same_kind(other)
    assert kinds([now, other]) == [now] and machine_count([now, other]) == 1
    assert SweepFile(hosts=[now, other], targets=sweep.targets).machines() == 1
