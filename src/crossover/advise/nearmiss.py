"""Near-misses: per engine, the best rejected configuration, its margin and what would fit.

"needs 20.0 GiB per GPU (...), 19.6 usable: 0.4 GiB short; with an 8k context it fits".
The remedies tried, in order: a shorter context or fewer sequences (when the weights
fit), a smaller weight format the engine has kernels for, more GPUs of the same kind,
and smaller engine overheads (``--reserve-gib``) when the shortfall is within them.
"""

from __future__ import annotations

import math
from typing import Any

from crossover.advise import cost, memory, traits
from crossover.advise.candidates import AdviceRequest, Evaluated
from crossover.advise.cost import Layout
from crossover.advise.rules import check_tp_heads, kernel_check

MAX_GPUS = 8


def context_label(tokens: int) -> str:
    """ "a 32k context", "an 8k context", "a 700-token context"."""
    if tokens >= 1024:
        k = 1 << ((tokens // 1024).bit_length() - 1)  # the largest power-of-two k <= tokens
        size = f"{k}k"
    else:
        size = f"{tokens}-token"
    return f"{'an' if size.startswith(('8', '11', '18')) else 'a'} {size} context"


def _fits(req: AdviceRequest, engine: str, layout: Layout, quant: str, c: int, ctx: int) -> bool:
    fit = memory.fit(
        engine, req.model, req.system.gpu, layout, quant, c, ctx, req.reserve_for(engine)
    )
    return fit.fits


def _smaller_quant(
    req: AdviceRequest, engine: str, layout: Layout, quant: str, c: int, ctx: int
) -> str | None:
    """The largest weight format below ``quant`` (same family) that fits and has kernels."""
    gguf = quant.startswith("gguf-")
    here = cost.BYTES_PER_PARAM.get(quant)
    if here is None:
        return None
    options = sorted(
        (
            (b, q)
            for q, b in cost.BYTES_PER_PARAM.items()
            if q.startswith("gguf-") == gguf and b < here
        ),
        reverse=True,
    )
    fam = req.system.gpu.sm_family
    for _, q in options:
        if gguf and req.model.weight_bytes is not None:
            continue  # a GGUF file's own size: another quant is another file, not computable
        if not kernel_check(engine, q, fam, req.engine_versions.get(engine)).ok:
            continue
        if _fits(req, engine, layout, q, c, ctx):
            return q
    return None


def _more_gpus(
    req: AdviceRequest, engine: str, quant: str, c: int, ctx: int, start: int
) -> str | None:
    """The fewest GPUs above ``start`` on which the engine's layout fits."""
    m = req.model
    kind = traits.of(engine).layout
    for n in range(start + 1, MAX_GPUS + 1):
        if kind == "single-device":
            return None
        if kind == "layer-split":
            options = [(Layout(pp=n), f"{n} GPUs (layer split)")]
        else:
            options = [
                (Layout(tp=n), f"{n} GPUs (TP={n})")
                if check_tp_heads(engine, n, m.attention_heads, m.kv_heads) is None
                else (Layout(pp=n), f"{n} GPUs (PP={n})")
            ]
        for layout, label in options:
            if _fits(req, engine, layout, quant, c, ctx):
                return label
    return None


def remedies(req: AdviceRequest, row: dict[str, Any], min_c: int, context: int) -> list[str]:
    fit = row["memory"]
    cfg = row["config"]
    engine = row["engine"]
    layout = Layout(tp=cfg["tp"], pp=cfg["pp"])
    out: list[str] = []
    per_token = fit.get("kv_bytes_per_token_per_gpu") or 0.0
    free_gib = fit["usable_gib_per_gpu"] - fit["weights_gib_per_gpu"]
    if fit["weights_fit"] and per_token > 0:
        tokens = int(free_gib * memory.GIB / per_token / max(1, min_c))
        if tokens >= 1:
            out.append(f"with {context_label(tokens)} it fits")
        if min_c > 1 and fit["max_concurrency"] >= 1:
            out.append(f"with {fit['max_concurrency']} concurrent sequences it fits")
    quant = cfg["quant"]
    smaller = _smaller_quant(req, engine, layout, quant, min_c, context)
    if smaller is not None:
        out.append(f"with {smaller} weights it fits")
    gpus = _more_gpus(req, engine, quant, min_c, context, int(cfg["gpus"]))
    if gpus is not None:
        out.append(f"with {gpus} it fits")
    short = row["short_gib"]
    reserve = fit.get("reserve_gib") or 0.0
    flag = traits.of(engine).kv_fraction_flag
    total = req.system.gpu.budget_gib
    base = memory.kv_fraction(engine, total, layout)
    if flag is not None and base is not None and short > 0:
        # the engine's own knob: a larger share of the GPU for weights and KV (less left
        # for its activations and graphs, which its default keeps)
        need = math.ceil((base + short / total) * 100) / 100
        if need <= 0.95:
            out.append(f"with {flag} {need:.2f} it fits (the default is {base:.2f})")
    if 0 < short < reserve:
        out.append(
            f"with engine overheads of {reserve - short:.1f} GiB instead of {reserve:.1f} "
            "it fits (--reserve-gib, if your own measurement says so)"
        )
    return out


def near_misses(
    req: AdviceRequest,
    rejected: list[dict[str, Any]],
    kept: list[Evaluated],
    min_c: int,
    context: int,
) -> list[dict[str, Any]]:
    """One entry per engine with a rejected configuration: the closest to fitting."""
    recommended = {ev.candidate.engine for ev in kept}
    out: list[dict[str, Any]] = []
    for engine in req.engines:
        rows = [r for r in rejected if r["engine"] == engine]
        if not rows:
            continue
        mem = [r for r in rows if r["rule"] == "memory-fit"]
        if mem:
            best = min(mem, key=lambda r: (r["short_gib"], r["config"]["gpus"]))
            fit = best["memory"]
            entry = {
                "engine": engine,
                "config": best["config"],
                "rule": best["rule"],
                "title": best.get("title"),
                "reason": best["reason"],
                "needs_gib_per_gpu": fit["weights_gib_per_gpu"] + fit["kv_gib_per_gpu"],
                "usable_gib_per_gpu": fit["usable_gib_per_gpu"],
                "short_gib": best["short_gib"],
                "fits_with": remedies(req, best, min_c, context),
            }
        else:
            best = min(rows, key=lambda r: r["config"]["gpus"])
            entry = {
                "engine": engine,
                "config": best["config"],
                "rule": best["rule"],
                "title": best.get("title"),
                "reason": best["reason"],
                "needs_gib_per_gpu": None,
                "usable_gib_per_gpu": None,
                "short_gib": None,
                "fits_with": [],
            }
        entry["engine_recommended"] = engine in recommended
        out.append(entry)
    return out
