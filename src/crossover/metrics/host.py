"""The machine a result was measured on (:class:`HostFacts`): kept with each run summary
(``crossover run``) and each sweep (``sweep.json``'s ``hosts``), read by
:func:`crossover.measure.host.read_host`."""

from __future__ import annotations

from pydantic import BaseModel, Field

from crossover.words import plural


class HostGpu(BaseModel):
    """One GPU of the machine crossover ran on, as NVML (or nvidia-smi) names it."""

    name: str
    memory_gib: float | None = None


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

    def machine(self) -> tuple[tuple[str, ...], str | None, int | None]:
        """What makes it the same kind of machine for timings: its GPUs' names (in
        order; those the targets could use, not the ones hidden from them), its CPU model
        and count (a driver or package update is not a new one)."""
        return tuple(g.name for g in self.gpus), self.cpu, self.cpus

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
