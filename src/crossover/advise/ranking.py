"""Ranking one load regime's candidates: rule 1 in the tie band, then figures; and no
borrowed estimate above a measured one unless its row says why.

Each candidate's figure rests on something (``efficiency.Basis``): a run of ``--results``,
its engine's own profile fitted to measurements, another engine's profile (an engine never
measured: borrowed), or the roofline. Rule ``seed-1-engine-choice`` orders candidates
within ``TIE_FRACTION`` of the best figure (less quality loss first, then the engine
order); rule ``measured-before-borrowed`` keeps a borrowed figure out of ties with
measured ones (``measured_first``) and ranks it by the low end of its range
(``explain.BORROWED``). A row ranked above one with a better figure says why
(``why_above``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from crossover.advise import traits
from crossover.advise.candidates import Candidate, CandidateKey, Evaluated, Regime
from crossover.advise.cost import Prediction
from crossover.advise.efficiency import Basis, Calibration
from crossover.advise.explain import BORROWED, PREFERENCE, TIE_FRACTION, Placement
from crossover.advise.formats import quality
from crossover.advise.model import ModelFacts
from crossover.advise.results import SweepResults


def borrowed_low(value: float) -> float:
    """The low end of a borrowed estimate's range (``explain.BORROWED``): what it ranks by."""
    return value * (1 - BORROWED[0])


def prefers(engine: str, regime: Regime, model: ModelFacts, tp: int) -> int:
    order = PREFERENCE[regime]
    if model.is_moe and tp > 1 and traits.of(engine).moe_tensor_parallel:
        return -1  # rule 1: vLLM for MoE tensor parallelism
    return order.index(engine)


class Scored(NamedTuple):
    """A candidate's figure in one regime, and what the figure rests on."""

    value: float
    ev: Evaluated
    pred: Prediction
    measured: dict[str, Any] | None
    basis: Basis
    #: a borrowed estimate's own figure (``value`` is the low end of its range, what it
    #: ranks by); None: ``value`` is the figure
    point: float | None = None

    @property
    def figure(self) -> float:
        return self.point if self.point is not None else self.value

    @property
    def key(self) -> CandidateKey:
        return self.ev.candidate.key


def basis_of(
    c: Candidate,
    measured: dict[str, Any] | None,
    results: SweepResults | None,
    cal: Calibration | None,
) -> Basis:
    if measured is not None and results is not None:
        where = Path(results.path)
        folder = where.parent.name if where.suffix == ".json" else where.name
        return Basis(kind="measured", label=f"measured: {measured['target']} in {folder}")
    if c.n_cpu_moe:  # llama.cpp with experts in host memory: no sweep measured it
        return Basis(
            kind="borrowed",
            profile=c.engine,
            label=f"offload model, --n-cpu-moe {c.n_cpu_moe}: {c.host_memory or 'host memory'}"
            ", never measured",
        )
    if cal is not None:
        return cal.basis(c.engine)
    return Basis(kind="roofline", label="roofline: an upper bound, no profile")


def order(rows: list[Scored], regime: Regime, model: ModelFacts) -> list[tuple[Scored, float]]:
    """Rule 1's order (and each row's best figure): the tie band first, ordered by the
    format's quality cost, then engine preference; the rest by figure. One row per
    (engine, TP, PP, format)."""
    if not rows:
        return []
    best = max(s.value for s in rows)
    band = best * (1 - TIE_FRACTION)
    rows = sorted(
        rows,
        key=lambda s: (
            s.value < band,  # the tie band first, ordered by rule 1; the rest by figure
            # MoE: in the band, an engine without a tuned fused-MoE kernel config for
            # this GPU goes after those with one (its MoE layers run default tiles)
            s.value >= band and s.ev.moe_config == "absent",
            # in the band, the format that loses less quality first (formats.yaml rank)
            quality(s.ev.candidate.quant).rank if s.value >= band else 0,
            prefers(s.ev.candidate.engine, regime, model, s.ev.candidate.tp)
            if s.value >= band
            else 0,
            -s.value,
            s.ev.candidate.tp * s.ev.candidate.pp,
        ),
    )
    out: list[tuple[Scored, float]] = []
    seen: set[CandidateKey] = set()
    for s in rows:
        if s.key not in seen:
            seen.add(s.key)
            out.append((s, best))
    return out


def measured_first(
    scored: list[Scored], regime: Regime, model: ModelFacts, calibrated: bool
) -> tuple[list[tuple[Scored, float]], dict[CandidateKey, Placement]]:
    """Issue 30: an estimate on a borrowed profile (an engine never measured) never ranks
    above a measured candidate unless its row says why.

    Calibrated advice ranks the candidates whose figures rest on their own measurements
    by rule 1 and figures; each borrowed one goes below every measured candidate whose
    figure is higher or within the tie band of its own (a borrowed figure wins no tie),
    and its row says where it would rank if the borrowed profile held and by how much it
    leads the measured candidates it still ranks above (measured-before-borrowed). A
    candidate with no profile at all (its roofline) goes below every measured one."""
    if not calibrated:
        return order(scored, regime, model), {}
    # where each would rank on its own figure (a borrowed one as if its profile held)
    everything = order([s._replace(value=s.figure) for s in scored], regime, model)
    mine = order([s for s in scored if s.basis.measured], regime, model)
    lent = order([s for s in scored if s.basis.kind == "borrowed"], regime, model)
    lent += order([s for s in scored if s.basis.kind == "roofline"], regime, model)
    best_all = max(s.value for s in scored)
    final: list[tuple[Scored, float]] = list(mine)
    last = -1
    for s, _ in lent:
        cut = max(
            (
                i + 1
                for i, (b, _) in enumerate(final)
                if b.basis.measured
                # a roofline (no profile at all) is an upper bound, not an estimate: after
                # every measured candidate
                and (s.basis.kind == "roofline" or b.value >= s.value * (1 - TIE_FRACTION))
            ),
            default=0,
        )
        last = max(cut, last + 1)
        final.insert(last, (s, best_all))
    where = {s.key: i for i, (s, _) in enumerate(final)}
    placed: dict[CandidateKey, Placement] = {}
    for i, (s, _) in enumerate(everything):
        if s.basis.measured:
            continue
        at = where[s.key]
        after = next(
            (b for b, _ in everything[i + 1 :] if b.basis.measured and where[b.key] < at), None
        )
        above = next((b for b, _ in final[at + 1 :] if b.basis.measured), None)
        if after is None and above is None:
            continue
        placed[s.key] = Placement(
            rank_if_it_holds=i + 1,
            after=after.ev.candidate.engine if after else None,
            after_pct=_pct(s.figure, after.value) if after else None,
            above=above.ev.candidate.engine if above else None,
            lead_pct=_pct(s.figure, above.value) if above else None,
        )
    return final, placed


def _pct(a: float, b: float) -> float:
    return (a / b - 1) * 100 if b > 0 else 0.0


def label(c: Candidate) -> str:
    """ "vllm fp8 tp=2", "llamacpp gguf-q4_k_m split=2" (the terminal's row name)."""
    if traits.of(c.engine).layer_split:
        lay = f"split={c.pp}" if c.pp > 1 else "1 GPU"
    else:
        lay = f"tp={c.tp}" + (f" pp={c.pp}" if c.pp > 1 else "")
    return f"{c.engine} {c.quant} {lay}"


def why_above(
    a: Scored, b: Scored, regime: Regime, model: ModelFacts, calibrated: bool
) -> tuple[str, str] | None:
    """Why ``a`` ranks above ``b`` although ``b``'s figure is better, in full and in a few
    words (None: ``b``'s figure is not better)."""
    if b.value <= a.value:
        return None
    ca, cb = a.ev.candidate, b.ev.candidate
    lead = f"ranked above {label(cb)} ({b.value:.0f}, {_pct(b.value, a.value):+.0f}%)"
    band = f"within {TIE_FRACTION:.0%}"
    if calibrated and a.basis.measured and not b.basis.measured:
        why = "its figure is borrowed and wins no tie"
        return f"{lead}: {why}", f"{lead}: {why}"
    if quality(ca.quant).rank < quality(cb.quant).rank:
        return (
            f"{lead}: {band}, and {ca.quant} loses less quality than {cb.quant}",
            f"{lead}: {ca.quant} loses less quality",
        )
    if a.ev.moe_config != "absent" and b.ev.moe_config == "absent":
        why = f"{cb.engine} has no tuned MoE config for this GPU"
        return f"{lead}: {band}; {why}", f"{lead}: {why}"
    pa = prefers(ca.engine, regime, model, ca.tp)
    pb = prefers(cb.engine, regime, model, cb.tp)
    if pa < pb:
        if pa < 0:
            why = "vLLM for MoE tensor parallelism (engine order)"
            return f"{lead}: {band}; {why}", f"{lead}: {why}"
        order = ", ".join(PREFERENCE[regime])
        return (
            f"{lead}: {band}; engine order at {regime} load: {order}",
            f"{lead}: engine order at {regime} load",
        )
    return f"{lead}: {band}", f"{lead}: {band}"
