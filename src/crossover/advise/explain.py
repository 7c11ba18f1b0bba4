"""Explanations: the reasons, cited rules and measured-vs-predicted figures of advice.

Also the NVLink-wall check: where adding TP makes decode per user slower because each
step's all-reduces sit on the small-message latency floor (rule seed-3-tp-over-pp;
docs/engines.md, advisor rules).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from crossover.advise import cost, efficiency, traits
from crossover.advise.candidates import AdviceRequest, Candidate, Evaluated, Regime
from crossover.advise.cost import AllReduceCurve, Layout, MemoryFit, Prediction
from crossover.advise.efficiency import Basis, Calibration
from crossover.advise.formats import quality
from crossover.advise.results import SweepResults
from crossover.advise.rules import cite
from crossover.engines import registry
from crossover.words import plural

# Above this share of a closed-loop cycle spent in prefill, the advice says the estimate
# rests on the least-measured term (one prompt length, one GPU).
PREFILL_SHARE_WARNING = 0.3
# Candidates within this fraction of the best figure count as tied; rule 1 orders them.
TIE_FRACTION = 0.10
#: An estimate on a borrowed profile (an engine never measured) spans this range around
#: its figure (below, above): the engine profiles' held-out mean |error| (12%,
#: docs/results/h200/calibration.md) plus the largest gap seen when a borrowed profile
#: met the engine's own measurement (SGLang on vLLM's profile measured 11-16% below it at
#: 256-512 streams, docs/results/h200/sglang-a), rounded up. It ranks by the low end.
BORROWED: tuple[float, float] = (0.30, 0.12)


def _preference() -> dict[str, tuple[str, ...]]:
    """Rule 1 (seed-1-engine-choice, docs/engines.md): engine order per regime among tied
    candidates, from each engine spec's ``advise.preference``."""
    out: dict[str, tuple[str, ...]] = {}
    for i, regime in enumerate(("low", "mid", "high")):
        ranked = [(t.preference[i], s.name) for s in registry.specs() if (t := s.advise)]
        out[regime] = tuple(name for _, name in sorted(ranked))
    return out


PREFERENCE: dict[str, tuple[str, ...]] = _preference()


class Placement(BaseModel):
    """Where an estimate on a borrowed profile (an engine never measured) ranks among the
    measured candidates, and why (rule measured-before-borrowed)."""

    rank_if_it_holds: int  # its rank by figures and rule 1 alone, as if measured
    after: str | None = None  # the first measured candidate it was moved below
    after_pct: float | None = None  # its figure over that one's (within the tie band)
    above: str | None = None  # the first measured candidate it still ranks above
    lead_pct: float | None = None  # its figure over that one's (more than the tie band)

    def reason(self, basis: Basis, engine: str) -> str:
        if basis.profile is None:  # no profile at all: an upper bound, below every estimate
            return (
                f"{basis.label}: an upper bound, ranked below every measured candidate; it "
                f"would rank #{self.rank_if_it_holds} if the bound were reached"
            )
        holds = f"if the {basis.profile} profile holds for {engine}"
        parts = [basis.label]
        if self.after is not None and self.after_pct is not None:
            parts.append(
                f"ranked below {self.after} (measured; {self.after_pct:+.0f}% on its figure: "
                "a borrowed figure ranks by the low end of its range and wins no tie, "
                f"{TIE_FRACTION:.0%}, against a measured one); it would rank "
                f"#{self.rank_if_it_holds} {holds}"
            )
        if self.above is not None and self.lead_pct is not None:
            parts.append(
                f"ranked above {self.above} (measured): it would lead it by "
                f"{self.lead_pct:.0f}% {holds}"
            )
        return "; ".join(parts)


class Queue(BaseModel):
    """What happens at a concurrency level when fewer sequences fit than are asked for.

    A closed loop of ``concurrency`` users over ``admitted`` slots: the server finishes
    requests at X = output tok/s / output tokens per request, so each request takes
    concurrency / X from send to last token (Little's law); the part beyond its own cycle
    (admitted / X) is the wait for a slot, and TTFT includes it."""

    concurrency: int
    admitted: int
    queued: int
    wait_ms: float  # mean wait for a slot (0 when every sequence fits)
    ttft_ms: float  # the wait plus the prompt's own prefill
    per_user_tok_s: float  # output tokens per user per second, waiting included


def queue(pred: Prediction, output_tokens: int) -> Queue:
    conc, admitted = pred.concurrency, max(1, min(pred.batch, pred.concurrency))
    per_request_s = output_tokens / pred.output_tok_s if pred.output_tok_s > 0 else 0.0
    cycle_ms = admitted * per_request_s * 1e3
    wait = cycle_ms * (conc - admitted) / admitted if conc > admitted else 0.0
    return Queue(
        concurrency=conc,
        admitted=admitted,
        queued=max(0, conc - admitted),
        wait_ms=wait,
        ttft_ms=wait + pred.prefill_ms,
        per_user_tok_s=pred.output_tok_s / conc if conc else 0.0,
    )


def cap_text(q: Queue) -> str:
    """ "8 of 64 fit; 56 queue (each waits 7.1 s for a slot: TTFT 7.2 s)"."""
    if not q.queued:
        return ""
    return (
        f"{q.admitted} of {q.concurrency} fit; {q.queued} queue (each waits "
        f"{q.wait_ms / 1e3:.1f} s for a slot: TTFT {q.ttft_ms / 1e3:.1f} s)"
    )


def predict_candidate(
    req: AdviceRequest,
    c: Candidate,
    curve: AllReduceCurve,
    conc: int,
    max_batch: int | None,
    calibration: Calibration | None,
    cuda_graphs: bool = True,
) -> Prediction:
    """The calibrated estimate for a candidate (its engine's profile in that CUDA-graph
    mode), else the roofline."""
    if c.n_cpu_moe:  # llama.cpp with experts in host memory: the offload model
        from crossover.advise import moe

        return moe.offload_prediction(req, c, conc, max_batch)
    layout = Layout(tp=c.tp, pp=c.pp)
    profile = calibration.profile(c.engine, cuda_graphs) if calibration is not None else None
    if profile is None:
        return cost.predict(
            req.model,
            req.system,
            layout,
            c.quant,
            curve,
            concurrency=conc,
            input_tokens=req.input_tokens,
            output_tokens=req.output_tokens,
            max_batch=max_batch,
            cached_tokens=req.cached_tokens(c.engine),
        )
    pred = efficiency.predict(
        req.model,
        req.system,
        layout,
        c.quant,
        curve,
        profile,
        concurrency=conc,
        input_tokens=req.input_tokens,
        output_tokens=req.output_tokens,
        max_batch=max_batch,
        cached_tokens=req.cached_tokens(c.engine),
    )
    if req.model.is_moe:  # no tuned fused-MoE config here: rule moe-tuned-kernel-config
        from crossover.advise import moe

        pred, _ = moe.apply_untuned(pred, req, c)
    return pred


def metric(regime: Regime, p: Prediction) -> float:
    return p.decode_tok_s_per_user if regime == "low" else p.output_tok_s


def metric_key(regime: Regime) -> str:
    return "decode_tok_s_per_user" if regime == "low" else "output_tok_s"


def measured_figures(
    results: SweepResults | None,
    c: Candidate,
    conc: int,
    pred: Prediction,
    comparisons: list[dict[str, Any]],
    key: str | None = None,
    mode_pred: Callable[[bool], Prediction] | None = None,
) -> dict[str, Any] | None:
    """The measured figures for a candidate, or None. Where several targets match (CUDA
    graphs on and off, say), the best by ``key`` is used and the others are listed;
    every match gets its prediction error in ``comparisons``, against the prediction for
    its own CUDA-graph mode where ``mode_pred`` gives one."""
    if results is None:
        return None
    matches = results.find_all(c.engine, c.tp, c.pp, c.quant, conc, c.n_cpu_moe)
    if not matches:
        return None
    if key is not None:
        matches.sort(key=lambda m: -(getattr(m, key) or 0.0))
    figures: list[dict[str, Any]] = []
    for m in matches:
        p = mode_pred(False) if mode_pred is not None and m.cuda_graphs is False else pred
        out: dict[str, Any] = {
            "target": m.target,
            "runs": m.runs,
            "output_tok_s": m.output_tok_s,
            "total_tok_s": m.total_tok_s,
            "decode_tok_s_per_user": m.decode_tok_s_per_user,
        }
        errors: dict[str, float | None] = {}
        for k in ("output_tok_s", "total_tok_s", "decode_tok_s_per_user"):
            mv = getattr(m, k)
            errors[k] = None if not mv else (getattr(p, k) - mv) / mv * 100
        out["prediction_error_pct"] = errors
        row = {
            "target": m.target,
            "engine": c.engine,
            "concurrency": conc,
            "cuda_graphs": m.cuda_graphs,
            "measured": {k: out[k] for k in ("output_tok_s", "decode_tok_s_per_user")},
            "predicted": {
                "output_tok_s": p.output_tok_s,
                "decode_tok_s_per_user": p.decode_tok_s_per_user,
                "profile": p.profile,
            },
            "error_pct": errors,
        }
        if row not in comparisons:
            comparisons.append(row)
        figures.append(out)
    chosen = figures[0]
    chosen["other_targets"] = [
        {
            "target": m.target,
            "output_tok_s": m.output_tok_s,
            "decode_tok_s_per_user": m.decode_tok_s_per_user,
        }
        for m in matches[1:]
    ]
    return chosen


def recommendation(
    req: AdviceRequest,
    regime: Regime,
    conc: int,
    rank: int,
    value: float,
    best: float,
    ev: Evaluated,
    pred: Prediction,
    measured: dict[str, Any] | None,
    curve: AllReduceCurve,
    scale: float | None = None,
    calibration: Calibration | None = None,
    basis: Basis | None = None,
    placement: Placement | None = None,
    above: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """One ranked row as the advice JSON carries it. ``above``: why it ranks above a
    candidate with a better figure (``ranking.why_above``)."""
    c, fit = ev.candidate, ev.fit
    q = queue(pred, req.output_tokens)
    fmt = quality(c.quant)
    headline: list[str] = []
    if basis is None:
        basis = (
            calibration.basis(c.engine)
            if calibration is not None
            else Basis(kind="roofline", label="roofline: an upper bound, no profile")
        )
    rules = list(ev.rules)
    headroom = (
        fit.usable_gib_per_gpu - fit.weights_gib_per_gpu - fit.kv_gib_per_seq_per_gpu * pred.batch
    )
    overheads = f" after {fit.reserve_gib:.1f} GiB of engine overheads" if fit.reserve_gib else ""
    reasons = [
        f"{'estimated' if pred.profile else 'roofline'}: "
        f"{pred.decode_tok_s_per_user:.0f} decode tok/s per user, "
        f"{pred.output_tok_s:.0f} output tok/s (all users) at concurrency {conc} "
        f"({pred.bound}-bound step {pred.step_ms:.2f} ms, prefill {pred.prefill_ms:.1f} ms)",
        f"fits: {fit.weights_gib_per_gpu:.1f} GiB weights + "
        f"{fit.kv_gib_per_seq_per_gpu * pred.batch:.2f} GiB KV per GPU, "
        f"{headroom:.1f} GiB headroom{overheads}; up to {fit.max_concurrency} sequences",
    ]
    if calibration is not None and pred.profile is not None:
        reasons.append(profile_reason(calibration, c.engine))
        rules.append("calibrated-profile")
        wave = pred.batch * pred.prefill_ms
        share = wave / (wave + req.output_tokens * pred.step_ms)
        if share > PREFILL_SHARE_WARNING:
            reasons.append(
                f"prefill is {share:.0%} of the estimated cycle: the prefill rate was fitted "
                f"to 200-token prompts on {calibration.gpu} only, the least certain term here"
            )
    if q.queued:
        reasons.append(
            f"KV cache holds only {q.admitted} of {conc} sequences: {cap_text(q)}; the "
            "figures are for the admitted batch, per user with the wait "
            f"{q.per_user_tok_s:.1f} output tok/s"
        )
        headline.append(f"c={conc}: {cap_text(q)}")
        raise_to = _utilization_for(req, c.engine, fit, conc, Layout(tp=c.tp, pp=c.pp))
        if raise_to is not None:
            reasons.append(raise_to)
            headline.append(raise_to)
    own = traits.of(c.engine)
    for note in (own.kv_budget_note, own.latency_note):
        if note is not None:
            reasons.append(note.note)
            rules.append(note.rule)
    rules.append("quant-format-quality")
    fmt_line = f"{c.quant}: quality cost {fmt.cost}" + ("" if fmt.measured else " (cited)")
    reasons.append(f"{fmt_line}; {fmt.source}")
    if fmt.rank:
        headline.append(f"{c.quant} {fmt.cost}" + ("" if fmt.measured else " (cited)"))
    if c.tp > 1:
        reasons.append(
            f"TP={c.tp}: {2 * req.model.layers} all-reduces per step cost "
            f"{pred.comm_ms:.2f} ms ({curve.name})"
        )
        rules.append("seed-3-tp-over-pp")
    if c.pp > 1:
        reasons.append(
            f"{'layer split' if own.layer_split else 'PP'}={c.pp}: stages run in sequence per token"
        )
    lead: list[str] = []  # the reasons that say where the row ranks and why, first
    if placement is not None:
        lead.append(placement.reason(basis, c.engine))
    span = None
    if basis.kind == "borrowed":
        point = metric(regime, pred)
        low, high = point * (1 - BORROWED[0]), point * (1 + BORROWED[1])
        span = {"low": low, "high": high}
        lead.append(
            f"an estimate on a borrowed profile ({basis.label}): {metric(regime, pred):.0f} "
            f"within {low:.0f}-{high:.0f}, ranked by {low:.0f}, the low end",
        )
        headline.insert(
            0,
            f"borrowed estimate ({basis.label.removeprefix('borrowed: ')}): ranked by the low "
            f"end of its range (-{BORROWED[0]:.0%}/+{BORROWED[1]:.0%})",
        )
    if above is not None:
        lead.append(above[0])
        headline.append(above[1])
    reasons[:0] = lead
    if basis.kind == "borrowed" or (calibration is not None and basis.kind == "roofline"):
        rules.append("measured-before-borrowed")
    # a borrowed estimate ranks by its low end; the tie band is about its own figure
    tie_value = value / (1 - BORROWED[0]) if basis.kind == "borrowed" else value
    if tie_value >= best * (1 - TIE_FRACTION):
        pref = (
            f"{registry.get(c.engine).display_name} for MoE tensor parallelism"
            if (req.model.is_moe and c.tp > 1 and own.moe_tensor_parallel)
            else (f"engine order for {regime} concurrency: {', '.join(PREFERENCE[regime])}")
        )
        reasons.append(f"within {TIE_FRACTION:.0%} of the best figure; {pref}")
        rules.append("seed-1-engine-choice")
    spec = registry.get(c.engine)
    if spec.advise is not None and spec.advise.graphs_matter and regime != "high":
        reasons.append("CUDA graphs on: confirm from the startup log")
        rules.append("seed-5-cuda-graphs-verify")
    if req.shared_prefix_tokens:
        cached = req.cached_tokens(c.engine)
        reasons.append(
            f"prefix cache: {cached} of {req.input_tokens} prompt tokens served from it, "
            "not prefilled"
            if cached
            else f"no prefix cache: all {req.input_tokens} prompt tokens prefilled"
        )
    cache_off = own.host_prompt_cache
    if cache_off is not None:
        reasons.append(cache_off.reason)
        rules.append(cache_off.rule)
        most, slots = max(req.concurrency), own.slots
        start = f"start {spec.display_name} with {cache_off.flag}"
        if slots is not None and most > slots.default:
            wait = most - slots.default
            reasons.append(
                f"{slots.flag} {most}: {spec.display_name}'s default is {slots.default} slots, "
                f"with which {wait} of {most} requests would wait for one; "
                "the figures assume a slot per request"
            )
            rules.append(slots.rule)
            headline.append(
                f"{start} {slots.flag} {most} (by default "
                f"{slots.default} slots: {wait} of {most} would queue)"
            )
        else:
            headline.append(start)
    if measured is not None:
        err = measured["prediction_error_pct"].get(metric_key(regime))
        others = [o["target"] for o in measured.get("other_targets") or []]
        reasons.insert(
            0,
            f"measured ({measured['target']}, {measured['runs']} valid runs"
            + (f"; best of it and {', '.join(others)}" if others else "")
            + "); "
            + (f"prediction error {err:+.0f}%" if err is not None else ""),
        )
    elif scale is not None:
        reasons.append(f"ranked at {scale:.0%} of its prediction (measured/predicted ratio)")
    reasons.extend(ev.notes)
    if ev.moe_config == "absent":
        headline.append("no tuned fused-MoE config for this GPU (default tiles)")
    rules.append("seed-6-rerun-sweep")
    return {
        "rank": rank,
        "engine": c.engine,
        "config": c.config(),
        "regime": regime,
        "concurrency": conc,
        "figures_from": "measured" if measured else "predicted",
        # what the figure rests on: the run (measured), the engine's own profile
        # (calibrated), another engine's (borrowed) or none (roofline); "label" says it
        "basis": basis.model_dump(),
        # a borrowed estimate's place among the measured candidates, and its rank as if
        # the borrowed profile held (None: not borrowed, or below every measured one)
        "borrowed_rank": placement.model_dump() if placement is not None else None,
        # what the ranking used: the measured figure, the prediction, or the prediction
        # scaled by the measured/predicted ratio of the measured candidates
        "ranked_by": {"metric": metric_key(regime), "value": value, "scale": scale},
        "predicted": pred.model_dump(),
        # the weight format's quality cost (formats.yaml: measured or cited)
        "quality": fmt.model_dump(),
        # fewer sequences admitted than asked for: the queue, its wait and TTFT with it
        "queue": q.model_dump(),
        # a borrowed estimate's range for the ranked metric (None: not borrowed)
        "range": span,
        # the row's reasons in a few words, for the terminal
        "headline": headline,
        "measured": measured,
        "memory": fit.model_dump(),
        "reasons": reasons,
        "rules": cite(rules),
    }


def _utilization_for(
    req: AdviceRequest, engine: str, fit: MemoryFit, conc: int, layout: Layout
) -> str | None:
    """For an engine whose KV budget is a fraction of the whole GPU (vLLM, SGLang): the
    fraction at which ``conc`` sequences fit, or what 0.95 admits (None: other engines)."""
    from crossover.advise import memory

    flag = traits.of(engine).kv_fraction_flag
    total = req.system.gpu.budget_gib
    base = memory.kv_fraction(engine, total, layout)
    if base is None or base >= 0.95 or flag is None:
        return None
    short = fit.kv_gib_per_seq_per_gpu * conc - (fit.usable_gib_per_gpu - fit.weights_gib_per_gpu)
    need = base + short / total
    if need <= 0.95:
        return f"{flag} {math.ceil(need * 100) / 100:.2f} admits all {conc}"
    free = fit.usable_gib_per_gpu - fit.weights_gib_per_gpu + (0.95 - base) * total
    more = int(free // fit.kv_gib_per_seq_per_gpu) if fit.kv_gib_per_seq_per_gpu > 0 else 0
    return f"{flag} 0.95 admits {more}" if more > fit.max_concurrency else None


def profile_reason(calibration: Calibration, engine: str) -> str:
    """Where a candidate's estimate comes from, and how far off that source was."""
    basis = calibration.basis(engine)
    held = calibration.errors.get("heldout_levels")
    err = f"{held.mean_abs_error_pct:.0f}%" if held and held.mean_abs_error_pct else "-"
    if basis.kind == "borrowed":
        return (
            f"{engine} was never measured: estimated with the borrowed {basis.profile} "
            f"profile ({basis.profile} measured in {', '.join(basis.sweeps)} on "
            f"{calibration.gpu}; held-out mean |error| {err} for the measured engines)"
        )
    profile = calibration.profile(engine)
    per = held.per_engine.get(engine) if held else None
    return (
        f"estimate from the {engine} profile, {basis.label} "
        f"({plural(profile.points if profile else 0, 'level')}; held-out mean |error| "
        + (f"{per:.0f}%" if per is not None else err)
        + ")"
    )


def nvlink_wall(
    req: AdviceRequest,
    kept: list[Evaluated],
    conc: int,
    curve: AllReduceCurve,
    calibration: Calibration | None = None,
) -> list[str]:
    """Say where adding TP makes decode per user slower (the all-reduce latency floor)."""
    by_tp: dict[int, float] = {}
    for ev in kept:
        c = ev.candidate
        if c.pp != 1 or not traits.of(c.engine).tensor_parallel or c.tp in by_tp:
            continue
        p = predict_candidate(req, c, curve, conc, ev.fit.max_concurrency, calibration)
        by_tp[c.tp] = p.decode_tok_s_per_user
    if len(by_tp) < 2:
        return []
    best_tp = max(by_tp, key=lambda t: by_tp[t])
    top = max(by_tp)
    if best_tp < top:
        return [
            f"the {'NVLink' if req.system.interconnect == 'nvlink' else 'all-reduce'} wall "
            f"(seed-3-tp-over-pp): at concurrency {conc} decode per user "
            f"peaks at TP={best_tp} ({by_tp[best_tp]:.0f} tok/s); TP={top} gives "
            f"{by_tp[top]:.0f} tok/s because each step's all-reduces sit on the "
            "small-message latency floor"
        ]
    return []


def dedupe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in rows:
        if row not in out:
            out.append(row)
    return out
