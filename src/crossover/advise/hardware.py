"""Hardware facts: known GPUs (cited data), flags, or the local machine through NVML.

A ``System`` is what the cost model needs: one GPU kind, how many, how they talk
(``nvlink``, ``pcie``, ``pcie-no-p2p``, ``tcp``) and, when read from NVML, the P2P and
NVLink status of every pair.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from importlib import resources
from types import ModuleType
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field

from crossover.advise import nvml
from crossover.advise.nvml import LocalGpu, PairLink
from crossover.devices import VISIBLE, own, pick, without_uuids
from crossover.errors import UsageError, parse_names
from crossover.words import plural

Interconnect = Literal["nvlink", "pcie", "pcie-no-p2p", "tcp"]
INTERCONNECTS: tuple[str, ...] = ("nvlink", "pcie", "pcie-no-p2p", "tcp")


class Link(BaseModel):
    generation: int | None = None
    bandwidth_gbs: float
    note: str | None = None


Form = Literal["desktop", "laptop", "workstation", "datacenter", "custom"]


class _GpuFacts(BaseModel):
    """What every GPU row says besides the two figures the cost model cannot do without."""

    id: str
    aliases: list[str] = Field(default_factory=list)
    vendor: Literal["nvidia", "amd"] = "nvidia"
    form: Form = "datacenter"
    arch: str
    # NVIDIA: major.minor ("8.9"); AMD: the LLVM target ("gfx942")
    compute_capability: str
    sm_count: int | None = None
    boost_clock_mhz: int | None = None
    memory_gib: float
    #: what CUDA reports as the device's total (``cudaMemGetInfo``, the figure engines size
    #: their budgets from), where measured: the datasheet's less what the driver reserves
    cuda_gib: float | None = None
    fp8_tflops: float | None = None
    fp4_tflops: float | None = None
    nvlink: Link | None = None
    pcie: Link | None = None
    p2p_pcie: bool
    # engines that run on it where that is narrower than all four (AMD: ROCm builds)
    engines: list[str] | None = None
    source: str

    @property
    def sm_family(self) -> str:
        """Kernel-table family: sm80 (Ampere incl. 8.6), sm89, sm90, sm100, sm103, sm120."""
        return sm_family(self.compute_capability)

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 1024**3

    @property
    def budget_gib(self) -> float:
        """The memory an engine's budget is a share of: CUDA's total where measured (vLLM's
        ``--gpu-memory-utilization`` and SGLang's static fraction are of it), else the
        datasheet's."""
        return self.cuda_gib if self.cuda_gib is not None else self.memory_gib


class GpuEntry(_GpuFacts):
    """One row of the GPU table (gpus.yaml): a figure no source states is None."""

    memory_bandwidth_gbs: float | None
    bf16_tflops: float | None


class GpuSpec(_GpuFacts):
    """One GPU as the cost model reads it (tensor figures dense): every needed figure set."""

    memory_bandwidth_gbs: float
    bf16_tflops: float


class InterconnectCost(BaseModel):
    alpha_us: float
    busbw_fraction: float | None = None
    busbw_gbs: float | None = None
    # NCCL's low-latency protocol (LL/LL128): lower alpha, lower bandwidth; the curve
    # takes whichever protocol is faster at each size (absent: one protocol)
    small_alpha_us: float | None = None
    small_busbw_fraction: float | None = None
    source: str


class System(BaseModel):
    """The GPUs an advice is for."""

    gpu: GpuSpec
    count: int = 1
    interconnect: Interconnect
    pairs: list[PairLink] = Field(default_factory=list)
    source: Literal["flags", "nvml"] = "flags"
    #: read from NVML: how many GPUs the machine has (``count`` of them are planned for)
    machine_gpus: int | None = None
    #: read from NVML: the NVML indices of the GPUs planned for (CUDA's order)
    gpu_indices: list[int] | None = None
    #: read from NVML: what chose them of the machine's (``CUDA_VISIBLE_DEVICES=0,1``), or
    #: why every GPU was kept though one was set (a form not read here, a MIG id); ``None``
    #: where nothing chose (every GPU of the machine)
    gpus_chosen: str | None = None

    def assumed(self) -> str | None:
        """Which GPUs of the machine the advice is for, and why, where NVML read them:
        ``2 of the machine's 8 GPUs, NVML indices 0, 1 (CUDA_VISIBLE_DEVICES=0,1)``;
        ``None`` for GPUs named by flags (the header says them)."""
        if self.source != "nvml" or self.machine_gpus is None:
            return None
        return gpus_assumed(self.machine_gpus, self.gpu_indices or [], self.gpus_chosen)

    @property
    def p2p(self) -> bool:
        """Peer-to-peer between GPUs (NVLink, or PCIe P2P that the driver allows)."""
        return self.interconnect in ("nvlink", "pcie")


def sm_family(cc: str) -> str:
    if cc.startswith("gfx"):  # AMD: the kernel tables name the LLVM target itself
        return cc
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


@cache
def _entries() -> tuple[GpuEntry, ...]:
    return tuple(GpuEntry.model_validate(g) for g in _data()["gpus"])


def known_gpus() -> list[GpuEntry]:
    """Every row of the GPU table, in its order."""
    return list(_entries())


def interconnect_costs() -> dict[str, InterconnectCost]:
    return {k: InterconnectCost.model_validate(v) for k, v in _data()["interconnects"].items()}


def _norm(name: str) -> str:
    """A name's key: case, spaces, dashes, "NVIDIA", "GeForce" and a closing "GPU" ignored
    ("NVIDIA GeForce RTX 4090 Laptop GPU" and "rtx-4090-laptop" are one key)."""
    key = re.sub(r"[^a-z0-9]", "", name.lower().replace("nvidia", "").replace("geforce", ""))
    return key.removesuffix("gpu") if key != "gpu" else key


@cache
def _index() -> dict[str, tuple[str, ...]]:
    """Every id and alias key -> the ids it names (several: an ambiguous name)."""
    index: dict[str, list[str]] = {}
    for entry in _entries():
        for name in (entry.id, *entry.aliases):
            ids = index.setdefault(_norm(name), [])
            if entry.id not in ids:
                ids.append(entry.id)
    return {k: tuple(v) for k, v in index.items()}


def _by_id(gpu_id: str) -> GpuEntry:
    return next(e for e in _entries() if e.id == gpu_id)


def closest_names(name: str, n: int = 4) -> list[str]:
    """The table ids whose names are nearest to ``name`` (difflib), best first."""
    index = _index()
    out: list[str] = []
    for key in difflib.get_close_matches(_norm(name), list(index), n=3 * n, cutoff=0.6):
        for gpu_id in index[key]:
            if gpu_id not in out:
                out.append(gpu_id)
    return out[:n]


def find_entry(name: str) -> GpuEntry:
    """The table row a name names exactly (its id or an alias, NVML's full name among
    them); an unknown or ambiguous name is a UsageError naming the closest rows."""
    ids = _index().get(_norm(name), ())
    if len(ids) == 1:
        return _by_id(ids[0])
    if ids:
        raise UsageError(f"GPU name {name!r} is ambiguous: it names {', '.join(ids)}; pick one")
    close = closest_names(name)
    near = f"closest: {', '.join(close)}" if close else "no close name"
    raise UsageError(
        f"unknown GPU {name!r}; {near} (crossover gpus lists the "
        f"{len(_entries())} known; --gpu-spec describes any other)"
    )


# What the advisor cannot estimate without each figure (said when one is missing).
NEEDS = {
    "memory": "which layouts fit",
    "bandwidth": "decode speed (memory-bound)",
    "bf16": "prefill and TTFT (compute-bound)",
    "arch": "which formats each engine has kernels for",
}


def complete(entry: GpuEntry | GpuSpec, how: str = "", lacks: str = "no sourced") -> GpuSpec:
    """The row as the cost model reads it; a missing figure is one line saying what the
    advisor cannot estimate without it and how to give it (``how``: the flag that would;
    ``lacks``: why the figure is missing)."""
    if isinstance(entry, GpuSpec):
        return entry
    missing = [
        k
        for k, v in (("bandwidth", entry.memory_bandwidth_gbs), ("bf16", entry.bf16_tflops))
        if v is None
    ]
    if missing:
        what = " or ".join(NEEDS[k] for k in missing)
        flag = how or f"--gpu-spec {','.join(f'{k}=...' for k in missing)}"
        raise UsageError(
            f"{entry.id}: {lacks} {' or '.join(missing)} figure, so the advisor cannot "
            f"estimate {what}; give {flag}"
        )
    return GpuSpec.model_validate(entry.model_dump())


def find_gpu(name: str) -> GpuSpec:
    """Look a GPU up by id or alias (exactly; case, spaces and dashes ignored)."""
    return complete(find_entry(name))


# --- --gpu-spec -------------------------------------------------------------------

_MEMORY_UNITS = {"gib": 1.0, "gb": 1e9 / 1024**3, "mib": 1 / 1024, "mb": 1e6 / 1024**3,
                 "tib": 1024.0, "tb": 1e12 / 1024**3}  # fmt: skip
_BANDWIDTH_UNITS = {"gb/s": 1.0, "tb/s": 1000.0, "mb/s": 1e-3, "gib/s": 1024**3 / 1e9,
                    "tib/s": 1024**4 / 1e9}  # fmt: skip
_FLOPS_UNITS = {"": 1.0, "tflops": 1.0, "pflops": 1000.0, "gflops": 1e-3}
SPEC_KEYS = ("memory", "bandwidth", "bf16", "fp8", "fp4", "arch", "name")


def _amount(key: str, text: str, units: dict[str, float], example: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z/]*)\s*", text.lower())
    if m is None or m.group(2) not in units:
        known = ", ".join(u for u in units if u) or "none"
        raise UsageError(
            f"--gpu-spec {key}={text!r}: want a number with a unit ({known}), e.g. {key}={example}"
        )
    value = float(m.group(1)) * units[m.group(2)]
    if value <= 0:
        raise UsageError(f"--gpu-spec {key}={text!r}: must be positive")
    return value


def parse_arch(text: str) -> str:
    """``sm89``, ``sm_120``, ``8.9`` or ``gfx942`` -> the compute capability ("8.9")."""
    t = text.strip().lower().replace("_", "")
    if re.fullmatch(r"gfx[0-9a-f]{3,4}", t):
        return t
    m = re.fullmatch(r"sm([0-9]{1,2})([0-9])a?", t) or re.fullmatch(r"([0-9]{1,2})\.([0-9])", t)
    if m is None or not 7 <= int(m.group(1)) <= 12:
        raise UsageError(
            f"--gpu-spec arch={text!r}: want sm70..sm120 (e.g. sm89), a compute "
            "capability (8.9) or an AMD target (gfx942)"
        )
    return f"{int(m.group(1))}.{m.group(2)}"


def parse_gpu_spec(text: str) -> dict[str, Any]:
    """``memory=16GiB,bandwidth=576GB/s,bf16=82,fp8=165,arch=sm89`` -> GpuEntry fields.

    Units are required for memory (GiB, GB, MiB, TB...) and bandwidth (GB/s, TB/s, GiB/s);
    tensor figures are dense TFLOPS (a bare number) or carry TFLOPS/PFLOPS."""
    out: dict[str, Any] = {}
    seen: set[str] = set()
    for item in parse_names(text, "--gpu-spec"):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in SPEC_KEYS or not value.strip():
            raise UsageError(
                f"--gpu-spec wants KEY=VALUE[,...] with KEY in {', '.join(SPEC_KEYS)}; "
                f"got {item.strip()!r}"
            )
        if key in seen:
            raise UsageError(f"--gpu-spec gives {key} twice")
        seen.add(key)
        if key == "memory":
            out["memory_gib"] = _amount(key, value, _MEMORY_UNITS, "16GiB")
        elif key == "bandwidth":
            out["memory_bandwidth_gbs"] = _amount(key, value, _BANDWIDTH_UNITS, "576GB/s")
        elif key in ("bf16", "fp8", "fp4"):
            out[f"{key}_tflops"] = _amount(key, value, _FLOPS_UNITS, "165TFLOPS")
        elif key == "arch":
            out["compute_capability"] = parse_arch(value)
        else:
            out["id"] = value.strip()
    if not out:
        raise UsageError(
            "--gpu-spec is empty; e.g. memory=16GiB,bandwidth=576GB/s,bf16=82,arch=sm89"
        )
    return out


def _arch_name(cc: str) -> str:
    family = sm_family(cc)
    return {"sm70": "volta", "sm75": "turing", "sm80": "ampere", "sm89": "ada",
            "sm90": "hopper", "sm100": "blackwell", "sm103": "blackwell",
            "sm120": "blackwell-consumer"}.get(family, family)  # fmt: skip


def custom_gpu(fields: dict[str, Any]) -> GpuEntry:
    """A GPU the table lacks, from --gpu-spec alone (memory and arch required)."""
    missing = [
        k for k, f in (("memory", "memory_gib"), ("arch", "compute_capability")) if f not in fields
    ]
    if missing:
        what = "; ".join(f"{k} sets {NEEDS[k]}" for k in missing)
        raise UsageError(f"--gpu-spec without --gpu needs {' and '.join(missing)} ({what})")
    cc = fields["compute_capability"]
    return GpuEntry(
        id=fields.get("id", "custom"),
        vendor="amd" if cc.startswith("gfx") else "nvidia",
        form="custom",
        arch=_arch_name(cc),
        compute_capability=cc,
        memory_gib=fields["memory_gib"],
        memory_bandwidth_gbs=fields.get("memory_bandwidth_gbs"),
        bf16_tflops=fields.get("bf16_tflops"),
        fp8_tflops=fields.get("fp8_tflops"),
        fp4_tflops=fields.get("fp4_tflops"),
        p2p_pcie=False,
        source="--gpu-spec",
    )


def with_spec(entry: GpuEntry, fields: dict[str, Any]) -> GpuEntry:
    """A row with --gpu-spec's figures in place of its own (the source says which)."""
    if not fields:
        return entry
    update = {k: v for k, v in fields.items() if k != "id"}
    if "compute_capability" in update:
        update["arch"] = _arch_name(update["compute_capability"])
    named = ", ".join(sorted(update))
    if "memory_gib" in update:  # the row's measured CUDA total was of its own memory
        update["cuda_gib"] = None
    return entry.model_copy(update={**update, "source": f"{entry.source}; --gpu-spec: {named}"})


# --- the local GPU ------------------------------------------------------------------


def match_local(gpu: LocalGpu) -> GpuEntry | None:
    """The table row for NVML's exact product name; where the name covers several memory
    sizes (RTX 4060 Ti 8/16 GB) the one whose memory NVML reports. None: not in the table."""
    ids = _index().get(_norm(gpu.name), ())
    rows = [_by_id(i) for i in ids]
    if len(rows) > 1:
        rows = [r for r in rows if abs(r.memory_gib - gpu.memory_gib) <= 0.1 * r.memory_gib]
    return rows[0] if len(rows) == 1 else None


def local_entry(gpu: LocalGpu) -> GpuEntry:
    """The local GPU as a row: the table's figures for its product, NVML's memory, SM count
    and clock; a product the table lacks keeps NVML's figures and nothing else."""
    figures = {"memory_gib": round(gpu.memory_gib, 2), "sm_count": gpu.sm_count,
            "boost_clock_mhz": gpu.max_sm_clock_mhz}  # fmt: skip
    known = match_local(gpu)
    if known is not None:
        update: dict[str, Any] = {k: v for k, v in figures.items() if v is not None}
        # the row's measured CUDA total holds for this card only where NVML's memory is the
        # row's size (at most it, within 2%: 79.18 of an H100 80GB's 79.65)
        cuda = known.cuda_gib
        if cuda is not None and not (0.98 * gpu.memory_gib <= cuda <= gpu.memory_gib):
            update["cuda_gib"] = None
        if update.get("cuda_gib", cuda) is None and gpu.cuda_gib is not None:
            # NVML's total less what it says the driver reserves: CUDA's total (measured
            # equal on the H100, 79.18 GiB)
            update["cuda_gib"] = round(gpu.cuda_gib, 2)
        return known.model_copy(update={**update, "aliases": [*known.aliases]})
    cc = gpu.compute_capability
    return GpuEntry(
        id=gpu.name,
        form="custom",
        arch=_arch_name(cc),
        compute_capability=cc,
        memory_gib=round(gpu.memory_gib, 2),
        cuda_gib=round(gpu.cuda_gib, 2) if gpu.cuda_gib is not None else None,
        sm_count=gpu.sm_count,
        boost_clock_mhz=gpu.max_sm_clock_mhz,
        memory_bandwidth_gbs=None,
        bf16_tflops=None,
        p2p_pcie=False,
        source=f"NVML ({gpu.name}: memory, compute capability, SMs, clocks); not in the GPU table",
    )


def default_interconnect(gpu: _GpuFacts, count: int) -> Interconnect:
    if count <= 1:
        return "nvlink" if gpu.nvlink is not None and gpu.nvlink.generation else "pcie"
    if gpu.nvlink is not None and "bridge" not in (gpu.nvlink.note or ""):
        return "nvlink"
    return "pcie" if gpu.p2p_pcie else "pcie-no-p2p"


def _link(spec: _GpuFacts, count: int, interconnect: str | None) -> Interconnect:
    if interconnect is None:
        return default_interconnect(spec, count)
    if interconnect in INTERCONNECTS:
        return interconnect  # type: ignore[return-value]
    raise UsageError(f"--interconnect must be one of {', '.join(INTERCONNECTS)}")


#: the most GPUs one piece of advice covers (a rack of 72 fits; 128 takes seconds)
MAX_GPUS = 128


def system_from_flags(
    gpu: str | None, count: int = 1, interconnect: str | None = None, spec: str | None = None
) -> System:
    """The GPUs named by --gpu (a table row) and/or described by --gpu-spec."""
    if not 1 <= count <= MAX_GPUS:
        # the layouts searched grow with the count: --gpus 100000 ran for ever, silent
        raise UsageError(f"--gpus must be 1 to {MAX_GPUS}, got {count}")
    fields = parse_gpu_spec(spec) if spec else {}
    if gpu is not None:
        entry = with_spec(find_entry(gpu), fields)
    elif fields:
        entry = custom_gpu(fields)
    else:
        raise UsageError("name the GPU with --gpu or describe it with --gpu-spec")
    full = complete(entry)
    return System(gpu=full, count=count, interconnect=_link(full, count, interconnect))


def system_from_nvml(
    interconnect: str | None = None, spec: str | None = None, nv: ModuleType | None = None
) -> System:
    """The local GPUs read through NVML (nvidia-ml-py), those ``CUDA_VISIBLE_DEVICES``
    leaves (:func:`visible_local`); UsageError when there is none. ``spec`` (--gpu-spec)
    gives what NVML cannot tell of a product the table lacks."""
    reading = nvml.read(nv)
    gpus, chosen = visible_local(reading.gpus)
    first = gpus[0]
    others = {g.name for g in gpus} - {first.name}
    if others:
        seen = f" ({chosen})" if chosen else ""
        raise UsageError(
            f"NVML sees different GPUs ({first.name}, {', '.join(sorted(others))}){seen}; "
            "the advisor plans for one kind: name it with --gpu and count with --gpus"
        )
    entry = with_spec(local_entry(first), parse_gpu_spec(spec) if spec else {})
    if match_local(first) is None:
        lacks = "not in the GPU table, and NVML tells no"
        full = complete(entry, how="--gpu-spec bandwidth=...GB/s,bf16=...", lacks=lacks)
    else:
        full = complete(entry)
    n = len(gpus)
    ids = [g.index for g in gpus]
    pairs = [p for p in reading.pairs if p.a in ids and p.b in ids]
    link = _classify(pairs, n) if interconnect is None else _link(full, n, interconnect)
    return System(
        gpu=full,
        count=n,
        interconnect=link,
        pairs=pairs,
        source="nvml",
        machine_gpus=len(reading.gpus),
        gpu_indices=ids,
        gpus_chosen=without_uuids(chosen) if chosen is not None else None,
    )


def gpus_assumed(machine: int, ids: list[int], chosen: str | None) -> str:
    """Which of the machine's ``machine`` GPUs crossover uses, and why: ``ids`` their NVML
    indices (CUDA's order), ``chosen`` what chose them (:func:`visible_positions`), as
    advise's ``local GPUs:`` line and ``crossover gpus --local`` say it: ``2 of the
    machine's 8 GPUs, NVML indices 0, 1 (CUDA_VISIBLE_DEVICES=0,1)``."""
    whole = plural(machine, "GPU")
    which = f"NVML {'index' if len(ids) == 1 else 'indices'} {', '.join(map(str, ids))}"
    if chosen is None:
        return f"the machine's {whole} ({VISIBLE} not set: every GPU)"
    if not ids:
        return f"none of the machine's {whole} ({chosen} leaves none)"
    if len(ids) == machine:
        return f"the machine's {whole}, {which} ({chosen})"
    return f"{len(ids)} of the machine's {whole}, {which} ({chosen})"


def visible_positions(gpus: list[LocalGpu]) -> tuple[list[int], str | None]:
    """The positions in ``gpus`` (every GPU NVML lists) of those crossover's own
    ``CUDA_VISIBLE_DEVICES`` leaves, in CUDA's order, read as CUDA reads it
    (:mod:`crossover.devices`); and what chose them (``CUDA_VISIBLE_DEVICES=0,1``), or
    why every GPU is kept though it is set (a form not read here: a MIG id), ``None``
    where it is not set. An empty list where it leaves none."""
    value = own()
    every = list(range(len(gpus)))
    if value is None:
        return every, None
    picked, chosen = pick([value], [g.name for g in gpus], [g.uuid for g in gpus])
    return (every if picked is None else picked), chosen


def visible_local(gpus: list[LocalGpu]) -> tuple[list[LocalGpu], str | None]:
    """The GPUs an engine started here could use, of every GPU NVML lists: those
    crossover's own ``CUDA_VISIBLE_DEVICES`` leaves, read as CUDA reads it
    (:mod:`crossover.devices`); and what chose them (``CUDA_VISIBLE_DEVICES=0,1``), or
    why every GPU is kept though it is set (a form not read here: a MIG id), ``None``
    where it is not set (:func:`visible_positions`). UsageError where it leaves none."""
    picked, chosen = visible_positions(gpus)
    if not picked:
        raise UsageError(
            f"{chosen} leaves none of the machine's {plural(len(gpus), 'GPU')}; {nvml.NAME_IT}"
        )
    return [gpus[i] for i in picked], chosen


def resolve_system(
    gpu: str | None,
    count: int = 1,
    interconnect: str | None = None,
    spec: str | None = None,
    nv: ModuleType | None = None,
) -> System:
    """What --gpu, --gpus, --interconnect and --gpu-spec describe. ``--gpu local``, or no
    --gpu and no --gpu-spec, reads NVML (its GPU count wins over --gpus); a name is a table
    row; --gpu-spec alone describes a GPU the table lacks, and beside a name or ``local``
    replaces the figures it gives."""
    if (gpu is not None and gpu.strip().lower() == "local") or (gpu is None and not spec):
        return system_from_nvml(interconnect, spec, nv)
    return system_from_flags(gpu, count, interconnect, spec)


def _classify(pairs: list[PairLink], n: int) -> Interconnect:
    if n == 1 or not pairs:
        return "pcie"
    if all(p.nvlink for p in pairs):
        return "nvlink"
    if all(p.p2p for p in pairs):
        return "pcie"
    return "pcie-no-p2p"
