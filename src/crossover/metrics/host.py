"""The machine a result was measured on (:class:`HostFacts`): kept with each run summary
(``crossover run``) and each sweep (``sweep.json``'s ``hosts``), read by
:func:`crossover.measure.host.read_host`."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from crossover.words import plural


class HostGpu(BaseModel):
    """One GPU of the machine crossover ran on, as NVML (or nvidia-smi) names it."""

    name: str
    memory_gib: float | None = None
    #: of ``memory_gib``, what NVML says the driver and firmware reserve (memory info v2):
    #: an engine's budget is a share of the rest as CUDA reports it (vLLM logged 79.18 GiB
    #: of an H100's 79.6); ``None`` where not read (nvidia-smi, an old driver or binding)
    reserved_gib: float | None = None


class HostFacts(BaseModel):
    """The machine crossover ran on when a sweep started or resumed: its GPUs (those the
    engines it launched could use, by ``CUDA_VISIBLE_DEVICES``; a URL target's server may
    be elsewhere), CPU and memory, the GPU driver, and the versions of the client.
    ``None`` where a fact cannot be read here (or was not kept yet when it was written)."""

    seen_at: str
    #: the GPUs the sweep's targets could use: the machine's, less those
    #: ``CUDA_VISIBLE_DEVICES`` (crossover's own, or the targets' env) hides
    gpus: list[HostGpu] = Field(default_factory=list)
    #: how many GPUs the machine has, ``gpus`` among them
    machine_gpus: int | None = None
    #: how ``gpus`` were chosen of the machine's (``CUDA_VISIBLE_DEVICES=1``), or why they
    #: are all of them though a choice was made (a form not read here, a MIG id);
    #: ``None`` where nothing chose (every GPU)
    gpus_chosen: str | None = None
    driver: str | None = None
    cuda: str | None = None
    cpu: str | None = None
    cpus: int | None = None
    memory_gib: float | None = None
    os: str | None = None
    python: str | None = None
    crossover: str | None = None
    #: which physical machine: :func:`fingerprint` of every GPU's UUID the machine lists
    #: (``CUDA_VISIBLE_DEVICES`` hiding some leaves it as it is), a hash, never the UUIDs
    #: themselves (hardware identifiers, and results get published); ``None`` where a
    #: UUID was not read, without a GPU, and in records written before it was kept
    machine_id: str | None = None

    def machine(self) -> tuple[tuple[str, ...], str | None, int | None]:
        """What makes it the same kind of machine for timings: its GPUs' names (in
        order; those the targets could use, not the ones hidden from them), its CPU model
        and count (a driver or package update is not a new one)."""
        return tuple(g.name for g in self.gpus), self.cpu, self.cpus

    def same_kind(self, other: HostFacts) -> bool:
        """Whether ``other`` is the same kind of machine for timings: the same
        :meth:`machine`, or, where one was kept before hosts kept the GPUs the targets
        could use (no ``machine_gpus``: its ``gpus`` are every GPU of its machine, which
        of them its targets used it does not say), the same CPU and a machine of as many
        GPUs the other's are among (8 H100s then; 2 of the machine's 8 H100s, by
        ``CUDA_VISIBLE_DEVICES=0,1``, now)."""
        if self.machine() == other.machine():
            return True
        if (self.cpu, self.cpus) != (other.cpu, other.cpus):
            return False
        return _whole_then(self, other) or _whole_then(other, self)

    def same_machine(self, other: HostFacts) -> bool | None:
        """Whether ``other`` is the same physical machine (the same :attr:`machine_id`);
        ``None`` where either does not say. Two machines of one kind (:meth:`same_kind`)
        are not the same machine: machine-to-machine variation is in their ratios."""
        if self.machine_id is None or other.machine_id is None:
            return None
        return self.machine_id == other.machine_id

    def describe(self) -> str:
        """``1x NVIDIA H100 80GB HBM3 (79.6 GiB), driver 580.95, CUDA 13.0; AMD EPYC
        9654 (16 CPUs), 125.8 GiB``: one line for the report and the CLI (``1x ... of the
        machine's 8 GPUs (CUDA_VISIBLE_DEVICES=1), driver ...`` where some were hidden)."""
        counts: dict[str, int] = {}
        for g in self.gpus:
            counts[g.name] = counts.get(g.name, 0) + 1
        memory = {g.name: g.memory_gib for g in self.gpus}
        gpus = ", ".join(
            f"{n}x {name}" + (f" ({memory[name]:.1f} GiB)" if memory[name] else "")
            for name, n in counts.items()
        )
        sw = ", ".join(
            x for x in (f"driver {self.driver}" if self.driver else None,
                        f"CUDA {self.cuda}" if self.cuda else None) if x
        )  # fmt: skip
        cpu = self.cpu or "CPU unknown"
        if self.cpus:
            cpu += f" ({self.cpus} CPUs)"
        if self.memory_gib:
            cpu += f", {self.memory_gib:.1f} GiB"
        seen = gpus or "no GPU seen"
        if self.machine_gpus is not None and self.machine_gpus != len(self.gpus):
            whole = f"the machine's {plural(self.machine_gpus, 'GPU')}"
            seen = f"{gpus} of {whole}" if gpus else f"none of {whole}"
        if self.gpus_chosen:
            seen += f" ({self.gpus_chosen})"
        head = seen + (f", {sw}" if sw else "")
        return f"{head}; {cpu}"


def fingerprint(uuids: Sequence[str | None]) -> str | None:
    """Which machine these GPUs are: ``gpu:`` and the first 12 hex digits of the SHA-256
    of every GPU's UUID (sorted, joined by commas), so the same GPUs in any order, or any
    of them chosen, are the same machine and the UUIDs themselves are not kept; ``None``
    where there is no GPU or a UUID was not read."""
    if not uuids or any(not u for u in uuids):
        return None
    joined = ",".join(sorted(str(u).strip() for u in uuids))
    return "gpu:" + hashlib.sha256(joined.encode()).hexdigest()[:12]


def _whole_then(old: HostFacts, now: HostFacts) -> bool:
    """``old``, kept before hosts kept the targets' GPUs (every GPU of its machine), may be
    the machine ``now`` chose some of: as many GPUs, each chosen one's kind among them."""
    if old.machine_gpus is not None or not old.gpus or now.machine_gpus != len(old.gpus):
        return False
    return Counter(g.name for g in now.gpus) <= Counter(g.name for g in old.gpus)


def kinds(hosts: Sequence[HostFacts]) -> list[HostFacts]:
    """The first of ``hosts`` and each that is another kind of machine than the last one
    kept (:meth:`HostFacts.same_kind`), as a sweep keeps them: where it resumed on another
    kind of machine (a host an earlier crossover kept though it was the same kind, and
    another machine of the same kind, :meth:`HostFacts.same_machine`, are passed over)."""
    kept: list[HostFacts] = []
    for h in hosts:
        if not kept or not kept[-1].same_kind(h):
            kept.append(h)
    return kept


def machine_count(hosts: Sequence[HostFacts]) -> int:
    """How many kinds of machine ``hosts`` were (:meth:`HostFacts.same_kind`); more than
    one where :func:`kinds` finds a resume on another machine."""
    seen: list[HostFacts] = []
    for h in kinds(hosts):
        if not any(h.same_kind(s) for s in seen):
            seen.append(h)
    return len(seen)


def same_machines(a: Sequence[HostFacts], b: Sequence[HostFacts]) -> bool:
    """Whether every host of ``a`` is the same kind of machine as one of ``b``, and the
    other way round."""
    return all(any(x.same_kind(y) for y in b) for x in a) and all(
        any(y.same_kind(x) for x in a) for y in b
    )


def machine_ids(hosts: Sequence[HostFacts]) -> list[str]:
    """Each physical machine ``hosts`` name (:attr:`HostFacts.machine_id`), in the order
    first seen; those without one are not counted. More than one where a sweep resumed on
    another machine, of the same kind or not."""
    seen: list[str] = []
    for h in hosts:
        if h.machine_id is not None and h.machine_id not in seen:
            seen.append(h.machine_id)
    return seen
