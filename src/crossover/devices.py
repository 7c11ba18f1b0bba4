"""The machine's GPUs as NVML lists them, and those ``CUDA_VISIBLE_DEVICES`` leaves to
CUDA, for everything that reads them: the host a sweep records (``crossover.measure.host``),
the replicas a target starts with ``gpus_per_replica`` (``crossover.sweep.level``,
``TargetConfig.engine_gpus``) and the GPUs ``crossover advise`` plans for
(``crossover.advise.hardware``, ``crossover.advise.nvml``).

Indices and GPU UUIDs (or a start of one that names one GPU) are read as CUDA reads them:
the list ends at the first index that names no GPU (``-1`` and the empty string hide every
one). Against the machine's GPUs (NVML's list) a form not read here, a MIG id, raises
:class:`Unread`; sliced among replicas, every entry keeps its own form.

NVML (nvidia-ml-py, the ``gpu`` extra, imported lazily) is read in one place,
:func:`read_nvml`, for the host record and the advisor alike: each builds its own view of
the one :class:`NvmlReading` and says in its own way what it does without one."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

VISIBLE = "CUDA_VISIBLE_DEVICES"


class Unread(ValueError):
    """A ``CUDA_VISIBLE_DEVICES`` that names GPUs in a way not read here."""


def own() -> str | None:
    """crossover's own ``CUDA_VISIBLE_DEVICES``, ``None`` where it is not set."""
    return os.environ.get(VISIBLE)


def pci_order() -> bool:
    """``CUDA_DEVICE_ORDER=PCI_BUS_ID``: CUDA numbers the GPUs in NVML's order."""
    return os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"


def shown(value: str) -> str:
    """``CUDA_VISIBLE_DEVICES=0,1``, or ``CUDA_VISIBLE_DEVICES=""`` for the empty one."""
    return f"{VISIBLE}={value}" if value else f'{VISIBLE}=""'


#: a GPU's or MIG instance's UUID as CUDA_VISIBLE_DEVICES takes it, whole or its start
#: (``GPU-`` or ``MIG-`` and hex digits and dashes; ``MIG-GPU-...`` holds a GPU's)
_UUID = re.compile(r"\b(GPU|MIG)-[0-9A-Fa-f][0-9A-Fa-f-]*")


def without_uuids(text: str) -> str:
    """``text`` (what chose a sweep's GPUs, as kept in a results file) with each GPU or
    MIG UUID in it replaced by its kind, ``-#`` and the first 8 hex digits of its
    SHA-256, and the start of one by its kind and ``-...``: a UUID is a hardware
    identifier, which results meant to be published do not carry (the host record's
    ``machine_id`` is such a hash too); the same GPU reads the same. A start is too short
    to hash (its few digits would be found again by trying them all)."""
    import hashlib

    def hashed(m: re.Match[str]) -> str:
        digits = sum(c in "0123456789abcdefABCDEF" for c in m.group(0)[4:])
        if digits < 32:
            return f"{m.group(1)}-..."
        return f"{m.group(1)}-#" + hashlib.sha256(m.group(0).encode()).hexdigest()[:8]

    return _UUID.sub(hashed, text)


def _index(entry: str) -> int | None:
    """The entry's index (-1 for the empty one); ``None`` for a UUID or another form."""
    if not entry:
        return -1
    return int(entry) if re.fullmatch(r"[+-]?\d+", entry) else None


def listed(value: str) -> list[str]:
    """``value``'s entries in their own form (index, GPU UUID, MIG id), as far as CUDA
    reads them without the machine's GPUs: up to the first negative or empty index (an
    index past the machine's last GPU also ends it; :func:`visible_indices` knows those)."""
    out: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        i = _index(entry)
        if i is not None and i < 0:
            break
        out.append(entry)
    return out


def visible_indices(
    value: str, names: Sequence[str], uuids: Sequence[str | None], pci_order: bool
) -> list[int]:
    """The machine's GPUs (their NVML indices, in the order given) that
    ``CUDA_VISIBLE_DEVICES=value`` leaves to CUDA, of the GPUs NVML lists as ``names``
    (their UUIDs ``uuids``, ``None`` or ``()`` where not read): indices, and GPU UUIDs or
    a start of one that names one GPU. As CUDA reads it, the list ends at the first index
    that names no GPU (``-1`` and the empty string hide every one). ``pci_order``:
    ``CUDA_DEVICE_ORDER`` is ``PCI_BUS_ID`` (NVML's order); else CUDA numbers GPUs fastest
    first, NVML's order only where they are all of one kind.

    Raises :class:`Unread` for what is not read here (a MIG id, a UUID that names no GPU
    of the machine or several, indices of GPUs of different kinds in CUDA's own order)."""
    out: list[int] = []
    for raw in value.split(","):
        entry = raw.strip()
        i = _index(entry)
        if i is not None:
            if not 0 <= i < len(names):
                break  # CUDA stops at an index that is no GPU
            if not pci_order and len(set(names)) > 1:
                raise Unread(
                    "indices of GPUs of different kinds follow CUDA's fastest-first order "
                    "(CUDA_DEVICE_ORDER=PCI_BUS_ID makes it NVML's)"
                )
        elif entry.startswith("GPU-"):
            if len(uuids) != len(names) or None in uuids:
                raise Unread("the GPUs' UUIDs could not be read")
            hits = [k for k, u in enumerate(uuids) if u and u.startswith(entry)]
            if len(hits) != 1:
                raise Unread(f"{entry} names {'no GPU' if not hits else 'several GPUs'} here")
            i = hits[0]
        else:
            raise Unread(f"{entry} is not an index or a GPU UUID")
        if i not in out:
            out.append(i)
    return out


def pick(
    values: Sequence[str], names: Sequence[str], uuids: Sequence[str | None]
) -> tuple[list[int] | None, str]:
    """The machine's GPUs (NVML indices, CUDA's order, each once) that any of ``values``
    (``CUDA_VISIBLE_DEVICES`` settings) leaves to CUDA (:func:`visible_indices`), and what
    chose them (``CUDA_VISIBLE_DEVICES=0,1``); ``None`` where one is a form not read here,
    with why every GPU is counted instead."""
    said = "; ".join(shown(v) for v in dict.fromkeys(values))
    out: list[int] = []
    for v in values:
        try:
            found = visible_indices(v, names, uuids, pci_order())
        except Unread as why:
            return None, f"{said} not read here ({why}): every GPU counted"
        out += [i for i in found if i not in out]
    return out, said


def given(
    value: str | None, names: Sequence[str] | None, uuids: Sequence[str | None]
) -> int | None:
    """How many GPUs CUDA gets under ``CUDA_VISIBLE_DEVICES=value`` (``None``: not set) on
    a machine whose GPUs NVML lists as ``names`` (``None``: not read); ``None`` where that
    cannot be told (not set, and the machine not read). A form not read against the
    machine (a MIG id) counts its entries."""
    if value is None:
        return len(names) if names is not None else None
    if names is None:
        return len(listed(value))
    try:
        return len(visible_indices(value, names, uuids, pci_order()))
    except Unread:
        return len(listed(value))


def replica_devices(entries: Sequence[str] | None, k: int, n: int) -> str:
    """``CUDA_VISIBLE_DEVICES`` of replica ``k`` with ``n`` GPUs each: entries k*n ..
    k*n+n-1 of ``entries`` (crossover's own, or those Ray assigned, each in its own form),
    or with ``None`` (nothing chose) the machine's GPUs of those indices."""
    wanted = range(k * n, k * n + n)
    if entries is None:
        return ",".join(str(g) for g in wanted)
    return ",".join(entries[g] for g in wanted if g < len(entries))


def own_entries() -> list[str] | None:
    """crossover's own ``CUDA_VISIBLE_DEVICES`` as :func:`listed` reads it; ``None`` where
    it is not set (the machine's every GPU)."""
    value = own()
    return None if value is None else listed(value)


@dataclass(frozen=True)
class NvmlGpu:
    """One GPU as NVML lists it; ``None`` where NVML (this binding, this driver) does
    not say."""

    index: int
    #: the product name as NVML gives it (decoded, not stripped)
    name: str
    memory_bytes: int
    #: of ``memory_bytes``, what NVML says the driver and firmware reserve (its memory
    #: info v2); ``None`` where this binding or driver does not say
    memory_reserved_bytes: int | None = None
    #: ``GPU-...``, what a ``CUDA_VISIBLE_DEVICES`` of UUIDs names it by
    uuid: str | None = None
    #: ``9.0``
    compute_capability: str | None = None
    cuda_cores: int | None = None
    max_sm_clock_mhz: int | None = None
    max_memory_clock_mhz: int | None = None
    memory_bus_width_bits: int | None = None


@dataclass(frozen=True)
class NvmlPair:
    """The P2P read and NVLink status of two GPUs (NVML indices ``a < b``)."""

    a: int
    b: int
    p2p: bool | None
    nvlink: bool | None


@dataclass(frozen=True)
class NvmlReading:
    """Every GPU of the machine in NVML's order (``CUDA_VISIBLE_DEVICES`` hides none from
    NVML), every pair of them, and the driver and the CUDA version it supports."""

    gpus: tuple[NvmlGpu, ...]
    pairs: tuple[NvmlPair, ...]
    driver: str | None
    #: ``13.0``
    cuda: str | None


class NvmlUnavailable(RuntimeError):
    """``nvmlInit`` failed (no driver, no GPU); its message is NVML's."""


def nvml_module() -> ModuleType | None:
    """The ``pynvml`` module (nvidia-ml-py), ``None`` where it is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    module: ModuleType = pynvml
    return module


def read_nvml(nv: ModuleType) -> NvmlReading:
    """One NVML session (``nv``: the ``pynvml`` module, or a stand-in): every GPU, every
    pair, the driver. A figure a call this binding or driver lacks does not give is
    ``None``; :class:`NvmlUnavailable` where ``nvmlInit`` fails, and the count, a handle,
    a name or a memory size NVML cannot give raises its error."""
    try:
        nv.nvmlInit()
    except Exception as exc:  # NVMLError: no driver, no GPU
        raise NvmlUnavailable(str(exc)) from exc
    try:
        n = int(nv.nvmlDeviceGetCount())
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        gpus = tuple(_nvml_gpu(nv, i, h) for i, h in enumerate(handles))
        pairs = tuple(_nvml_pair(nv, handles, a, b) for a in range(n) for b in range(a + 1, n))
        driver: str | None = None
        with contextlib.suppress(Exception):
            driver = _text(nv.nvmlSystemGetDriverVersion())
        cuda: str | None = None
        with contextlib.suppress(Exception):
            v = int(nv.nvmlSystemGetCudaDriverVersion())
            cuda = f"{v // 1000}.{v % 1000 // 10}"
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
    return NvmlReading(gpus, pairs, driver, cuda)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _optional(nv: ModuleType, fn: str, *args: Any) -> int | None:
    """A figure from an NVML call that older drivers or bindings lack: None if absent
    (:func:`_maybe`) or not a positive count."""
    value = _maybe(nv, fn, *args)
    return int(value) if isinstance(value, int) and value > 0 else None


def _maybe(nv: ModuleType, fn: str, *args: Any) -> Any:
    """What an NVML call gives, ``None`` where the binding lacks it or NVML refuses."""
    call = getattr(nv, fn, None)
    if call is None:
        return None
    try:
        return call(*args)
    except Exception:  # NVMLError_NotSupported and kin
        return None


def _nvml_gpu(nv: ModuleType, index: int, handle: Any) -> NvmlGpu:
    cc = _maybe(nv, "nvmlDeviceGetCudaComputeCapability", handle)
    uuid = _maybe(nv, "nvmlDeviceGetUUID", handle)
    return NvmlGpu(
        index=index,
        name=_text(nv.nvmlDeviceGetName(handle)),
        memory_bytes=int(nv.nvmlDeviceGetMemoryInfo(handle).total),
        memory_reserved_bytes=_reserved(nv, handle),
        uuid=None if uuid is None else _text(uuid),
        compute_capability=None if cc is None else f"{int(cc[0])}.{int(cc[1])}",
        cuda_cores=_optional(nv, "nvmlDeviceGetNumGpuCores", handle),
        max_sm_clock_mhz=_optional(
            nv, "nvmlDeviceGetMaxClockInfo", handle, getattr(nv, "NVML_CLOCK_SM", 1)
        ),
        max_memory_clock_mhz=_optional(
            nv, "nvmlDeviceGetMaxClockInfo", handle, getattr(nv, "NVML_CLOCK_MEM", 2)
        ),
        memory_bus_width_bits=_optional(nv, "nvmlDeviceGetMemoryBusWidth", handle),
    )


def _reserved(nv: ModuleType, handle: Any) -> int | None:
    """The memory NVML's v2 info says the driver and firmware reserve ("reserved for system
    use"), ``None`` where the binding lacks the v2 call or the driver refuses it."""
    version = getattr(nv, "nvmlMemory_v2", None)
    if version is None:
        return None
    try:
        value = nv.nvmlDeviceGetMemoryInfo(handle, version=version).reserved
    except Exception:  # NVMLError_FunctionNotFound on an old driver, a stand-in without it
        return None
    return int(value) if isinstance(value, int) and value >= 0 else None


def _nvml_pair(nv: ModuleType, handles: list[Any], a: int, b: int) -> NvmlPair:
    def status(index_name: str) -> bool | None:
        idx = getattr(nv, index_name, None)
        if idx is None:
            return None
        try:
            ok = nv.nvmlDeviceGetP2PStatus(handles[a], handles[b], idx)
        except Exception:
            return None
        return bool(ok == nv.NVML_P2P_STATUS_OK)

    return NvmlPair(
        a=a,
        b=b,
        p2p=status("NVML_P2P_CAPS_INDEX_READ"),
        nvlink=status("NVML_P2P_CAPS_INDEX_NVLINK"),
    )
