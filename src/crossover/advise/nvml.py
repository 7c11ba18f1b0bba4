"""The local GPUs as NVML reports them (nvidia-ml-py, the ``gpu`` extra, imported lazily).

Only facts NVML states are read: the product name, UUID, total memory, compute capability,
CUDA core count (SM count follows from the cores per SM of the compute capability),
the maximum SM and memory clocks, the memory bus width, and the P2P/NVLink status of
every pair. Memory bandwidth and tensor throughput are not among them: NVML's memory
clock does not say the memory's transfers per clock, and it has no tensor rate.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pydantic import BaseModel

from crossover.errors import UsageError

#: FP32 cores per SM by compute capability major.minor (CUDA C++ Programming Guide,
#: "Arithmetic Instructions" throughput table: 64 on 7.x and 8.0, 128 on 8.6 onward)
_CORES_PER_SM = {"7.0": 64, "7.2": 64, "7.5": 64, "8.0": 64}


class LocalGpu(BaseModel):
    """One GPU as NVML sees it; None where NVML (or this driver) does not say."""

    index: int
    name: str
    memory_bytes: int
    compute_capability: str
    cuda_cores: int | None = None
    sm_count: int | None = None
    max_sm_clock_mhz: int | None = None
    max_memory_clock_mhz: int | None = None
    memory_bus_width_bits: int | None = None
    #: ``GPU-...``, what a ``CUDA_VISIBLE_DEVICES`` of UUIDs names it by
    uuid: str | None = None

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / 1024**3


class PairLink(BaseModel):
    a: int
    b: int
    p2p: bool | None
    nvlink: bool | None


class LocalReading(BaseModel):
    gpus: list[LocalGpu]
    pairs: list[PairLink]


def sm_count(cuda_cores: int | None, cc: str) -> int | None:
    """SMs from NVML's core count: cores per SM are fixed per compute capability."""
    if not cuda_cores:
        return None
    per_sm = _CORES_PER_SM.get(cc, 128)
    return cuda_cores // per_sm if cuda_cores % per_sm == 0 else None


def _optional(nv: ModuleType, fn: str, *args: Any) -> int | None:
    """A figure from an NVML call that older drivers or bindings lack: None if absent."""
    call = getattr(nv, fn, None)
    if call is None:
        return None
    try:
        value = call(*args)
    except Exception:  # NVMLError_NotSupported and kin
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


#: what a command that reads the local GPU offers instead when it cannot (advise, plan)
NAME_IT = "name the GPU with --gpu, or describe it with --gpu-spec"


def _import(hint: str) -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:
        raise UsageError(
            f"reading the local GPU needs nvidia-ml-py (pip install 'crossover[gpu]'); or {hint}"
        ) from exc
    module: ModuleType = pynvml
    return module


def read(nv: ModuleType | None = None, hint: str = NAME_IT) -> LocalReading:
    """Every GPU NVML sees (every GPU of the machine: ``CUDA_VISIBLE_DEVICES`` hides none
    from NVML); UsageError (one line, ending with the caller's ``hint``: what
    to do instead) when NVML is missing or sees none."""
    nv = nv or _import(hint)
    try:
        nv.nvmlInit()
    except Exception as exc:  # NVMLError: no driver, no GPU
        raise UsageError(f"NVML is unavailable ({exc}); {hint}") from exc
    try:
        n = int(nv.nvmlDeviceGetCount())
        if n == 0:
            raise UsageError(f"NVML sees no GPU; {hint}")
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        gpus = [_gpu(nv, i, h) for i, h in enumerate(handles)]
        pairs = [_pair(nv, handles, a, b) for a in range(n) for b in range(a + 1, n)]
    finally:
        nv.nvmlShutdown()
    return LocalReading(gpus=gpus, pairs=pairs)


def _gpu(nv: ModuleType, index: int, handle: Any) -> LocalGpu:
    major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
    cc = f"{int(major)}.{int(minor)}"
    cores = _optional(nv, "nvmlDeviceGetNumGpuCores", handle)
    sm_clock = getattr(nv, "NVML_CLOCK_SM", 1)
    mem_clock = getattr(nv, "NVML_CLOCK_MEM", 2)
    return LocalGpu(
        index=index,
        name=_text(nv.nvmlDeviceGetName(handle)).strip(),
        memory_bytes=int(nv.nvmlDeviceGetMemoryInfo(handle).total),
        compute_capability=cc,
        cuda_cores=cores,
        sm_count=sm_count(cores, cc),
        max_sm_clock_mhz=_optional(nv, "nvmlDeviceGetMaxClockInfo", handle, sm_clock),
        max_memory_clock_mhz=_optional(nv, "nvmlDeviceGetMaxClockInfo", handle, mem_clock),
        memory_bus_width_bits=_optional(nv, "nvmlDeviceGetMemoryBusWidth", handle),
        uuid=_uuid(nv, handle),
    )


def _uuid(nv: ModuleType, handle: Any) -> str | None:
    call = getattr(nv, "nvmlDeviceGetUUID", None)
    if call is None:
        return None
    try:
        return _text(call(handle))
    except Exception:  # NVMLError_NotSupported and kin
        return None


def _pair(nv: ModuleType, handles: list[Any], a: int, b: int) -> PairLink:
    def status(index_name: str) -> bool | None:
        idx = getattr(nv, index_name, None)
        if idx is None:
            return None
        try:
            ok = nv.nvmlDeviceGetP2PStatus(handles[a], handles[b], idx)
        except Exception:
            return None
        return bool(ok == nv.NVML_P2P_STATUS_OK)

    return PairLink(
        a=a,
        b=b,
        p2p=status("NVML_P2P_CAPS_INDEX_READ"),
        nvlink=status("NVML_P2P_CAPS_INDEX_NVLINK"),
    )
