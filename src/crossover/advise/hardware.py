"""Hardware facts: known GPUs (cited data), flags, or the local machine through NVML.

A ``System`` is what the cost model needs: one GPU kind, how many, how they talk
(``nvlink``, ``pcie``, ``pcie-no-p2p``, ``tcp``) and, when read from NVML, the P2P and
NVLink status of every pair.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field

from crossover.errors import UsageError

Interconnect = Literal["nvlink", "pcie", "pcie-no-p2p", "tcp"]
INTERCONNECTS: tuple[str, ...] = ("nvlink", "pcie", "pcie-no-p2p", "tcp")


class Link(BaseModel):
    generation: int | None = None
    bandwidth_gbs: float
    note: str | None = None


class GpuSpec(BaseModel):
    """One GPU product as its datasheet states it (tensor figures dense)."""

    id: str
    aliases: list[str] = Field(default_factory=list)
    arch: str
    compute_capability: str
    memory_gib: float
    memory_bandwidth_gbs: float
    bf16_tflops: float
    fp8_tflops: float | None = None
    fp4_tflops: float | None = None
    nvlink: Link | None = None
    pcie: Link | None = None
    p2p_pcie: bool
    source: str

    @property
    def sm_family(self) -> str:
        """Kernel-table family: sm80 (Ampere incl. 8.6), sm89, sm90, sm100, sm103, sm120."""
        return sm_family(self.compute_capability)

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 1024**3


class InterconnectCost(BaseModel):
    alpha_us: float
    busbw_fraction: float | None = None
    busbw_gbs: float | None = None
    # NCCL's low-latency protocol (LL/LL128): lower alpha, lower bandwidth; the curve
    # takes whichever protocol is faster at each size (absent: one protocol)
    small_alpha_us: float | None = None
    small_busbw_fraction: float | None = None
    source: str


class PairLink(BaseModel):
    a: int
    b: int
    p2p: bool | None
    nvlink: bool | None


class System(BaseModel):
    """The GPUs an advice is for."""

    gpu: GpuSpec
    count: int = 1
    interconnect: Interconnect
    pairs: list[PairLink] = Field(default_factory=list)
    source: Literal["flags", "nvml"] = "flags"

    @property
    def p2p(self) -> bool:
        """Peer-to-peer between GPUs (NVLink, or PCIe P2P that the driver allows)."""
        return self.interconnect in ("nvlink", "pcie")


def sm_family(cc: str) -> str:
    try:
        major, minor = (int(x) for x in cc.split(".", 1))
    except ValueError as exc:
        raise UsageError(f"bad compute capability {cc!r} (want e.g. 9.0)") from exc
    if major == 8:
        return "sm89" if minor >= 9 else "sm80"
    if major == 10:
        return "sm103" if minor >= 3 else "sm100"
    if major >= 12:
        return "sm120"
    return f"sm{major}{minor}"


@cache
def _data() -> dict[str, Any]:
    text = resources.files("crossover.advise").joinpath("data/gpus.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def known_gpus() -> list[GpuSpec]:
    return [GpuSpec.model_validate(g) for g in _data()["gpus"]]


def interconnect_costs() -> dict[str, InterconnectCost]:
    return {k: InterconnectCost.model_validate(v) for k, v in _data()["interconnects"].items()}


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower().replace("nvidia", "").replace("geforce", ""))


def find_gpu(name: str) -> GpuSpec:
    """Look a GPU up by id or alias (case, spaces and dashes ignored)."""
    want = _norm(name)
    gpus = known_gpus()
    for gpu in gpus:
        if want in {_norm(gpu.id), *(_norm(a) for a in gpu.aliases)}:
            return gpu
    # NVML names carry suffixes ("NVIDIA H100 80GB HBM3"): accept a unique prefix match.
    hits = [g for g in gpus if any(want.startswith(_norm(a)) for a in [g.id, *g.aliases])]
    if len({g.id for g in hits}) == 1:
        return hits[0]
    ids = ", ".join(g.id for g in gpus)
    raise UsageError(f"unknown GPU {name!r}; known: {ids}")


def default_interconnect(gpu: GpuSpec, count: int) -> Interconnect:
    if count <= 1:
        return "nvlink" if gpu.nvlink is not None and gpu.nvlink.generation else "pcie"
    if gpu.nvlink is not None and "bridge" not in (gpu.nvlink.note or ""):
        return "nvlink"
    return "pcie" if gpu.p2p_pcie else "pcie-no-p2p"


def system_from_flags(gpu: str, count: int = 1, interconnect: str | None = None) -> System:
    if count < 1:
        raise UsageError(f"--gpus must be >= 1, got {count}")
    spec = find_gpu(gpu)
    if interconnect is None:
        link: Interconnect = default_interconnect(spec, count)
    elif interconnect in INTERCONNECTS:
        link = interconnect  # type: ignore[assignment]
    else:
        raise UsageError(f"--interconnect must be one of {', '.join(INTERCONNECTS)}")
    return System(gpu=spec, count=count, interconnect=link)


def system_from_nvml() -> System:
    """Read the local GPUs through NVML (nvidia-ml-py); UsageError when there is none."""
    try:
        import pynvml
    except ImportError as exc:
        raise UsageError(
            "no --gpu given and nvidia-ml-py is not installed (pip install 'crossover[gpu]')"
        ) from exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError: no driver, no GPU
        raise UsageError(f"no --gpu given and NVML is unavailable: {exc}") from exc
    try:
        n = int(pynvml.nvmlDeviceGetCount())
        if n == 0:
            raise UsageError("no --gpu given and NVML sees no GPU")
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        name = pynvml.nvmlDeviceGetName(handles[0])
        name = name.decode() if isinstance(name, bytes) else str(name)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handles[0])
        mem = pynvml.nvmlDeviceGetMemoryInfo(handles[0]).total
        try:
            spec = find_gpu(name)
        except UsageError:
            # Unknown product: keep what NVML tells, leave the rest to flags.
            raise UsageError(
                f"GPU {name!r} (cc {major}.{minor}) is not in the known-GPU table; pass --gpu"
            ) from None
        spec = spec.model_copy(update={"memory_gib": mem / 1024**3})
        pairs = [_pair(pynvml, handles, a, b) for a in range(n) for b in range(a + 1, n)]
    finally:
        pynvml.nvmlShutdown()
    return System(gpu=spec, count=n, interconnect=_classify(pairs, n), pairs=pairs, source="nvml")


def _pair(nv: Any, handles: list[Any], a: int, b: int) -> PairLink:
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


def _classify(pairs: list[PairLink], n: int) -> Interconnect:
    if n == 1 or not pairs:
        return "pcie"
    if all(p.nvlink for p in pairs):
        return "nvlink"
    if all(p.p2p for p in pairs):
        return "pcie"
    return "pcie-no-p2p"
