"""The local GPUs as NVML reports them (nvidia-ml-py, the ``gpu`` extra, imported lazily),
the advisor's view of the one NVML reading (:func:`crossover.devices.read_nvml`) the sweep's
host record is made from too.

Only facts NVML states are read: the product name, UUID, total memory, compute capability,
CUDA core count (SM count follows from the cores per SM of the compute capability),
the maximum SM and memory clocks, the memory bus width, and the P2P/NVLink status of
every pair. Memory bandwidth and tensor throughput are not among them: NVML's memory
clock does not say the memory's transfers per clock, and it has no tensor rate.
"""

from __future__ import annotations

from types import ModuleType

from pydantic import BaseModel

from crossover.devices import NvmlGpu, NvmlReading, NvmlUnavailable, nvml_module, read_nvml
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
    #: what the driver reserves of its memory (NVML memory info v2); the total less it is
    #: the total CUDA reports (an H100 80GB: 79.65 - 0.47 = 79.18 GiB, as vLLM logged)
    memory_reserved_bytes: int | None = None

    @property
    def cuda_gib(self) -> float | None:
        """CUDA's total as NVML tells it (the total less the driver's reserve), ``None``
        where this driver does not say what it reserves."""
        if self.memory_reserved_bytes is None:
            return None
        return (self.memory_bytes - self.memory_reserved_bytes) / 1024**3

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


#: what a command that reads the local GPU offers instead when it cannot (advise, plan)
NAME_IT = "name the GPU with --gpu, or describe it with --gpu-spec"


def read(nv: ModuleType | None = None, hint: str = NAME_IT) -> LocalReading:
    """Every GPU NVML sees (every GPU of the machine: ``CUDA_VISIBLE_DEVICES`` hides none
    from NVML), read by :func:`crossover.devices.read_nvml` as the sweep's host record
    reads them; UsageError (one line, ending with the caller's ``hint``: what to do
    instead) when NVML is missing or sees none."""
    nv = nv or nvml_module()
    if nv is None:
        raise UsageError(
            f"reading the local GPU needs nvidia-ml-py (pip install 'crossover[gpu]'); or {hint}"
        )
    try:
        reading = read_nvml(nv)
    except NvmlUnavailable as exc:
        raise UsageError(f"NVML is unavailable ({exc}); {hint}") from exc
    return local_reading(reading, hint)


def local_reading(reading: NvmlReading, hint: str = NAME_IT) -> LocalReading:
    """The advisor's view of an NVML reading (:func:`crossover.devices.read_nvml`): names
    stripped, SMs from the cores; UsageError (ending with ``hint``) where NVML sees no GPU
    or does not tell a GPU's compute capability."""
    if not reading.gpus:
        raise UsageError(f"NVML sees no GPU; {hint}")
    return LocalReading(
        gpus=[_gpu(g, hint) for g in reading.gpus],
        pairs=[PairLink(a=p.a, b=p.b, p2p=p.p2p, nvlink=p.nvlink) for p in reading.pairs],
    )


def _gpu(gpu: NvmlGpu, hint: str) -> LocalGpu:
    cc = gpu.compute_capability
    if cc is None:
        raise UsageError(f"NVML does not tell GPU {gpu.index}'s compute capability; {hint}")
    return LocalGpu(
        index=gpu.index,
        name=gpu.name.strip(),
        memory_bytes=gpu.memory_bytes,
        compute_capability=cc,
        cuda_cores=gpu.cuda_cores,
        sm_count=sm_count(gpu.cuda_cores, cc),
        max_sm_clock_mhz=gpu.max_sm_clock_mhz,
        max_memory_clock_mhz=gpu.max_memory_clock_mhz,
        memory_bus_width_bits=gpu.memory_bus_width_bits,
        uuid=gpu.uuid,
        memory_reserved_bytes=gpu.memory_reserved_bytes,
    )
