"""A decision begun before, as ``decide --check --out DIR`` says it: what ``DIR``'s
database already holds, what of the first pass is left, and the measurement the policy
would make next (the same command without ``--check`` resumes from there). Read only:
nothing is measured, the folder is not locked or changed.

What follows the first pass depends on what it finds, so it is not listed; along rates the
runs left are counted at their arrivals (:func:`crossover.decide.estimate.arrival_seconds`,
a floor), plus one start for each target with runs left that launches an engine (a new
session starts every engine again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crossover.decide.estimate import arrival_seconds
from crossover.decide.live import live_policy, observations_in
from crossover.decide.model import Decision, LevelNum, Measure, Question, fmt_level
from crossover.decide.policy import first_pass_left, next_step
from crossover.decide.starts import estimated_start
from crossover.decide.state import PolicyConfig, Prior
from crossover.records.store import Store
from crossover.sweep.config import SweepConfig, settings_refusal
from crossover.sweep.driver import held_axes, held_settings
from crossover.words import plural


@dataclass(frozen=True)
class Resume:
    """``kept``: runs the database holds per target (the question's order); ``left``: the
    (level, repeat) runs the policy's first pass still wants, per target (its repeats
    while an engine is up among them); ``next``: what the policy
    measures next (``None``: what is kept settles it); ``left_s``: along rates, the left
    runs' arrivals; ``starts``: each target with runs left that launches, its start's
    estimate."""

    folder: Path
    kept: dict[str, int]
    left: dict[str, list[tuple[LevelNum, int]]]
    next: Measure | None
    left_s: float | None
    starts: dict[str, float]
    #: the workload settings the database holds that differ from the YAML's (the live
    #: command refuses such a folder: nothing kept, nothing next)
    refused: tuple[str, ...] = ()
    #: targets with stored runs whose settings the YAML changes, each as ``key: was, now``
    #: (``SweepConfig.settings_differ``): the live command refuses such a folder too
    changed: dict[str, list[str]] = field(default_factory=dict)
    #: where ``next`` is ``None`` because the time budget ended the decision: the
    #: measurements it deferred (``Decision.deferred``), not an answer settled
    deferred: int = 0


def resume_of(
    cfg: SweepConfig,
    q: Question,
    folder: Path,
    policy: PolicyConfig,
    prior: Prior | None = None,
) -> Resume:
    """What ``folder``'s database holds of question ``q`` and what comes next."""
    db = folder / "sweep.db"
    obs = []
    if db.is_file() and db.stat().st_size > 0:  # an empty file holds no run (nor a schema)
        with Store(db, read_only=True) as store:
            # the live command resumes only the same workload (SweepRunner._check_resume)
            differ = cfg.identity_differs(store.get_meta("identity"), held_axes(store))
            if differ:
                return Resume(folder, {}, {}, None, None, {}, refused=tuple(differ))
            held = held_settings(store)
            changed = cfg.settings_differ(held, set(held))
            if changed:
                return Resume(folder, {}, {}, None, None, {}, changed=changed)
            obs = observations_in(store, q.targets, q.axis)
    done = {(o.target, o.level, o.repeat) for o in obs}
    kept = {t: len({(lv, r) for n, lv, r in done if n == t}) for t in q.targets}
    live = live_policy(cfg, policy)
    left: dict[str, list[tuple[LevelNum, int]]] = {}
    for m in first_pass_left(q, obs, live, prior):
        left.setdefault(m.target, []).append((m.level, m.repeat))
    step = next_step(q, obs, live, prior)
    launched = {t.name: t.engine for t in cfg.targets if t.launch is not None}
    starts = {t: estimated_start(launched[t]).seconds for t in left if t in launched}
    if not isinstance(step, Decision) and step.target in launched:
        starts.setdefault(step.target, estimated_start(launched[step.target]).seconds)
    left_s = (
        sum(arrival_seconds(cfg, float(c)) for mine in left.values() for c, _ in mine)
        if q.axis == "rate"
        else None
    )
    return Resume(
        folder=folder,
        kept=kept,
        left=left,
        next=None if isinstance(step, Decision) else step,
        left_s=left_s,
        starts=starts,
        deferred=len(step.deferred) if isinstance(step, Decision) else 0,
    )


def resume_json(r: Resume) -> dict[str, object]:
    """The plan JSON's ``resume`` (``decide --check --out DIR --json F``)."""
    m = r.next
    return {
        "folder": str(r.folder),
        "refused": list(r.refused),
        "settings_changed": {t: list(d) for t, d in r.changed.items()},
        "deferred": r.deferred,
        "kept": dict(r.kept),
        "first_pass_left": {
            t: [{"level": c, "repeat": k} for c, k in v] for t, v in r.left.items()
        },
        "arrivals_left_s": r.left_s,
        "starts_s": dict(r.starts),
        "next": None
        if m is None
        else {"target": m.target, "level": m.level, "repeat": m.repeat, "why": m.why},
    }


def _runs(runs: Sequence[tuple[LevelNum, int]]) -> str:
    return ", ".join(f"{fmt_level(c)} r={r}" for c, r in runs)


def resume_lines(r: Resume, q: Question) -> list[str]:
    """``decide --check --out DIR``'s lines after the plan."""
    if r.refused:
        return [
            f"resume: {r.folder} holds a sweep with a different workload "
            f"({', '.join(r.refused)}): the live command refuses it (another --out, or the "
            "same settings to resume)"
        ]
    if r.changed:
        refusal = settings_refusal(r.folder, r.changed, "decide")
        return [f"resume: the live command refuses this folder: {refusal}"]
    total = sum(r.kept.values())
    if not total:
        return [
            f"resume: {r.folder} holds no run of this question: the decision starts from nothing"
        ]
    each = ", ".join(f"{t} {n}" for t, n in r.kept.items() if n)
    lines = [f"resume: {r.folder} holds {plural(total, 'run')} of this question ({each}), kept"]
    n_left = sum(len(v) for v in r.left.values())
    if n_left:
        where = "; ".join(f"{t} {_runs(v)}" for t, v in r.left.items())
        lines.append(f"  the first pass has {plural(n_left, 'run')} left: {where}")
    else:
        lines.append("  the first pass is whole")
    if r.left_s is not None and n_left:
        starts = sum(r.starts.values())
        said = ", ".join(f"{t} {s:,.0f} s" for t, s in r.starts.items())
        lines.append(
            f"  their arrivals {r.left_s:,.0f} s + {plural(len(r.starts), 'start')}"
            + (f" ({said})" if said else "")
            + f" = {(r.left_s + starts) / 60:.1f} GPU-min at least; then what the policy asks"
        )
    if r.next is None and r.deferred:
        lines.append(
            "  next: nothing within the time budget: it defers "
            f"{plural(r.deferred, 'measurement')} (the same command prints the answer and "
            "says which)"
        )
    elif r.next is None:
        lines.append(
            "  next: nothing: what is kept settles it (the same command prints the answer)"
        )
    else:
        m = r.next
        unit = "rate" if q.axis == "rate" else "c"
        lines.append(f"  next: {m.target} {unit}={fmt_level(m.level)} r={m.repeat} ({m.why})")
    return lines
