"""The machine crossover runs on (:class:`crossover.metrics.host.HostFacts`): read by
``crossover run`` for its summary and by a sweep when it starts or resumes (kept in its
database, ``meta`` key ``hosts``, and ``sweep.json``), so a result says which GPUs,
driver and CPU it was measured with, and a sweep resumed on another kind of machine, or
on another machine of the same kind (``machine_id``, a hash of the GPUs' UUIDs), says so.

GPUs come from NVML (``pynvml``, the ``gpu`` extra: :func:`crossover.devices.read_nvml`,
the reading ``crossover advise`` makes too) or, without it, ``nvidia-smi``; both
see every GPU of the machine, so those kept are the ones ``CUDA_VISIBLE_DEVICES`` leaves
to the engines (:func:`crossover.devices.pick`: crossover's own, or each target's where
its env sets one). CPU and memory come from ``/proc`` (Linux); each fact is ``None`` where
it cannot be read, never a guess."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from crossover.devices import (
    NvmlReading,
    given,
    nvml_module,
    own,
    pick,
    read_nvml,
    shown,
    without_uuids,
)
from crossover.metrics.host import HostFacts, HostGpu, fingerprint


class GpuReading(NamedTuple):
    """Every GPU of the machine as NVML (or nvidia-smi) lists them, in its order."""

    gpus: list[HostGpu]
    driver: str | None
    cuda: str | None
    #: each GPU's UUID (``GPU-...``), ``None`` where not read; ``()``: none read
    uuids: tuple[str | None, ...] = ()


def _chosen(values: Sequence[str], reading: GpuReading) -> tuple[list[int] | None, str]:
    """The GPUs the engines could use under each of ``values`` (their union, NVML's
    order), ``None`` where one is not read here; and what chose them
    (:func:`crossover.devices.pick`)."""
    picked, said = pick(values, [g.name for g in reading.gpus], reading.uuids)
    return (None if picked is None else sorted(picked)), said


def _nvml() -> GpuReading | None:
    nv = nvml_module()
    if nv is None:
        return None
    try:
        reading = read_nvml(nv)
    except Exception:  # no driver, no GPU (NvmlUnavailable), an NVMLError_* mid-way
        return None
    if reading.driver is None:  # an NVML that cannot tell the driver: nvidia-smi, as before
        return None
    return gpu_reading(reading)


def gpu_reading(reading: NvmlReading) -> GpuReading:
    """The host record's view of an NVML reading (:func:`crossover.devices.read_nvml`, the
    one ``crossover advise`` and ``crossover gpus --local`` read): each GPU's name as NVML
    gives it, its memory and what NVML says the driver reserves of it, in GiB, the driver,
    the CUDA version, the UUIDs."""
    gpus = [
        HostGpu(
            name=g.name,
            memory_gib=round(g.memory_bytes / 2**30, 1),
            reserved_gib=(
                None
                if g.memory_reserved_bytes is None
                else round(g.memory_reserved_bytes / 2**30, 2)
            ),
        )
        for g in reading.gpus
    ]
    return GpuReading(gpus, reading.driver, reading.cuda, tuple(g.uuid for g in reading.gpus))


def _nvidia_smi() -> GpuReading | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [
                exe,
                "--query-gpu=name,memory.total,driver_version,uuid",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus, driver, uuids = [], None, []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0]:
            continue
        try:
            memory: float | None = round(float(parts[1]) / 1024, 1)  # MiB
        except ValueError:
            memory = None
        gpus.append(HostGpu(name=parts[0], memory_gib=memory))
        driver = parts[2] or driver
        uuids.append(parts[3] if len(parts) > 3 and parts[3].startswith("GPU-") else None)
    return GpuReading(gpus, driver, None, tuple(uuids))


def gpus_to_give() -> tuple[int | None, str]:
    """How many GPUs crossover may give the engines it starts (``gpus_per_replica``): those
    its own ``CUDA_VISIBLE_DEVICES`` leaves, else the machine's as NVML counts them (not
    ``nvidia-smi``: a subprocess is not a cheap question); ``None`` where neither tells.
    And what says so: ``CUDA_VISIBLE_DEVICES=2,3 leaves 2``, ``the machine has 1``."""
    return gpus_left(own(), nvml_reading())


def nvml_reading() -> GpuReading | None:
    """The machine's GPUs as NVML lists them; ``None`` without NVML (no ``nvidia-smi``)."""
    return _nvml()


def gpus_left(value: str | None, reading: GpuReading | None) -> tuple[int | None, str]:
    """How many GPUs ``CUDA_VISIBLE_DEVICES=value`` (``None``: not set) leaves of the
    machine's (``reading``, ``None``: not read), and what says so (as
    :func:`gpus_to_give`); ``None`` where neither tells."""
    names = [g.name for g in reading.gpus] if reading is not None else None
    n = given(value, names, reading.uuids if reading is not None else ())
    if n is None:
        return None, "NVML could not count the machine's GPUs"
    if value is None:
        return n, f"the machine has {n}"
    return n, f"{shown(value)} leaves {n}"


def _cpu(cpuinfo: Path) -> str | None:
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model Name") and value.strip():
                return " ".join(value.split())
    except OSError:
        return None
    return platform.processor() or None


def _memory_gib(meminfo: Path) -> float | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def read_host(
    proc: Path = Path("/proc"),
    gpus: Any = None,
    devices: Sequence[str | None] = (None,),
) -> HostFacts:
    """This machine's facts now, its GPUs those the engines could use: ``devices`` holds
    the ``CUDA_VISIBLE_DEVICES`` each target starts its engines with, ``None`` for one
    that keeps crossover's own (the default: ``crossover run``, URL targets). ``proc`` and
    ``gpus``, a ``(gpus, driver, cuda[, uuids])`` reading, are for tests."""
    from crossover import __version__

    reading = GpuReading(*gpus) if gpus is not None else (_nvml() or _nvidia_smi())
    found: list[HostGpu] = []
    count = chosen = machine_id = None
    if reading is not None:
        found, count = reading.gpus, len(reading.gpus)
        # every GPU of the machine, those hidden from the targets too: one machine
        if len(reading.uuids) == len(reading.gpus):
            machine_id = fingerprint(reading.uuids)
        mine = own()
        values = [mine if d is None else d for d in devices] or [mine]
        if all(v is not None for v in values):  # else one target has them all
            picked, chosen = _chosen([v for v in values if v is not None], reading)
            if picked is not None:
                found = [reading.gpus[i] for i in picked]
    return HostFacts(
        seen_at=datetime.now(UTC).isoformat(timespec="seconds"),
        gpus=found,
        machine_gpus=count,
        gpus_chosen=without_uuids(chosen) if chosen is not None else None,
        driver=reading.driver if reading is not None else None,
        cuda=reading.cuda if reading is not None else None,
        cpu=_cpu(proc / "cpuinfo"),
        cpus=os.cpu_count(),
        memory_gib=_memory_gib(proc / "meminfo"),
        os=f"{platform.system()} {platform.release()}".strip() or None,
        python=sys.version.split()[0],
        crossover=__version__,
        machine_id=machine_id,
    )


def kept_hosts(stored: Any) -> list[HostFacts]:
    """The ``hosts`` a database keeps, each one that reads as one (an entry edited by hand
    into something else is left out here, and left as it is in the database)."""
    out = []
    for h in stored if isinstance(stored, list) else []:
        try:
            out.append(HostFacts.model_validate(h))
        except ValueError:  # pydantic's ValidationError is one
            continue
    return out


def note_host(stored: Any, now: HostFacts) -> tuple[list[Any], HostFacts | None]:
    """The ``hosts`` meta list with ``now`` added where it is another machine than the
    last one the sweep ran on (or the first): another kind (:meth:`HostFacts.same_kind`: a
    host kept before hosts kept the targets' GPUs is every GPU of its machine), or another
    machine of the same kind (:meth:`HostFacts.same_machine`: both fingerprints known and
    different); and that last one when ``now`` differs from it (the sweep resumed on
    another machine), else ``None``. :func:`crossover.metrics.host.kinds` passes over a
    second machine of the same kind: it counts kinds."""
    stored = stored if isinstance(stored, list) else []
    known = kept_hosts(stored)
    if known and known[-1].same_kind(now) and known[-1].same_machine(now) is not False:
        return stored, None
    return [*stored, now.model_dump(mode="json")], (known[-1] if known else None)
