"""Which machine each run of a resumed sweep was measured on, where there were several.

A sweep keeps a host record each time it starts or resumes (``SweepFile.hosts``: its
``seen_at`` and ``machine_id``, a hash of the GPUs' UUIDs). A run belongs to the last host
seen at or before it started (``RunSummary.started_at``). A sweep or decision resumed on
another machine of one kind then holds runs of two machines: a difference between two
targets measured on two machines, or between the repeats of one level, holds
machine-to-machine variation as well as the engines'. On two H100 80GB HBM3 machines one
YAML's throughput and ITL p50 moved up to 8% and a closed-loop burst's TTFT p50 up to 56%
(docs/results/h100/reproducibility.md). The live open-loop decision of docs/results/h100/
moe-open-decide-freeze ran over three sessions on three such machines: vLLM's runs all on
the first, SGLang's at 8-20 requests/s on the second and third.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from crossover.analysis.schema import SweepFile, SweepRun
from crossover.metrics.host import HostFacts

#: what two machines of one kind moved one YAML's results by (docs/results/h100/
#: reproducibility.md: the largest ratios of its 60 metric-levels)
MACHINE_VARIATION = (
    "on two H100 80GB HBM3 machines one YAML's throughput and ITL p50 moved up to 8%, a "
    "closed-loop burst's TTFT p50 up to 56%, docs/results/h100/reproducibility.md"
)


def _when(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


def machine_of(hosts: Sequence[HostFacts], run: SweepRun) -> str | None:
    """The ``machine_id`` of the host ``run`` was measured on: the last one seen at or
    before its start; ``None`` where that host, or the run's start, does not say."""
    started = _when(run.summary.started_at)
    if started is None:
        return None
    found: str | None = None
    for h in hosts:
        seen = _when(h.seen_at)
        if seen is None or seen > started:
            continue
        found = h.machine_id
    return found


@dataclass(frozen=True)
class TargetMachines:
    """One target's runs by the machine they were measured on, in the order first seen."""

    target: str
    #: machine_id -> the (level, repeat) pairs measured on it
    runs: dict[str, list[tuple[float, int]]]


def target_machines(
    sweep: SweepFile,
    targets: Sequence[str] | None = None,
    read: set[tuple[str, float, int]] | None = None,
) -> list[TargetMachines]:
    """Per target (of ``targets``, when given; the sweep's order) its valid runs by
    machine (those in ``read``, ``(target, level, repeat)``, when given: a replay's);
    ``[]`` where those runs were all measured on one machine (or none says which)."""
    ids = {h.machine_id for h in sweep.hosts if h.machine_id is not None}
    if len(ids) < 2:
        return []
    by_target: dict[str, dict[str, list[tuple[float, int]]]] = {}
    for r in sweep.runs:
        if not r.is_valid or (targets is not None and r.target not in targets):
            continue
        if read is not None and (r.target, r.level, r.repeat) not in read:
            continue
        m = machine_of(sweep.hosts, r)
        if m is None:
            continue
        by_target.setdefault(r.target, {}).setdefault(m, []).append((r.level, r.repeat))
    seen = {m for runs in by_target.values() for m in runs}
    if len(seen) < 2:
        return []
    return [
        TargetMachines(t, {m: sorted(v) for m, v in by_target[t].items()})
        for t in sorted(by_target, key=sweep.target_rank())
    ]


def _runs_text(runs: list[tuple[float, int]], repeats: dict[float, int]) -> str:
    """``1, 4, 8 r=0``: a level whose every valid repeat is here by its value alone, else
    each repeat (``8 r=0``)."""
    here: dict[float, list[int]] = {}
    for level, rep in runs:
        here.setdefault(level, []).append(rep)
    parts = []
    for level, reps in sorted(here.items()):
        name = f"{level:g}"
        if len(reps) == repeats.get(level, len(reps)):
            parts.append(name)
        else:
            parts += [f"{name} r={k}" for k in sorted(reps)]
    return ", ".join(parts)


def format_machines(found: Sequence[TargetMachines]) -> list[str]:
    """One line where the runs compared came from several machines: each target's runs by
    machine, and what it means for the answer."""
    if not found:
        return []
    parts = []
    for tm in found:
        repeats: dict[float, int] = {}
        for runs in tm.runs.values():
            for level, _ in runs:
                repeats[level] = repeats.get(level, 0) + 1
        if len(tm.runs) == 1:
            (m,) = tm.runs
            parts.append(f"{tm.target} on {m} (all its runs)")
        else:
            each = [f"{m} ({_runs_text(runs, repeats)})" for m, runs in tm.runs.items()]
            parts.append(f"{tm.target} on {', '.join(each[:-1])} and {each[-1]}")
    ids = list(dict.fromkeys(m for tm in found for m in tm.runs))
    return [
        f"the runs compared came from {len(ids)} machines: {'; '.join(parts)}: a difference "
        "between runs of two machines, two targets' or one level's repeats, holds "
        f"machine-to-machine variation as well as the engines' ({MACHINE_VARIATION})"
    ]


def machines_json(
    found: Sequence[TargetMachines],
) -> dict[str, dict[str, list[list[float | int]]]]:
    """``{target: {machine_id: [[level, repeat], ...]}}``, as a decision's JSON lists them
    under ``machines`` (``{}`` where one machine measured every run compared)."""
    return {
        tm.target: {m: [[level, rep] for level, rep in runs] for m, runs in tm.runs.items()}
        for tm in found
    }
