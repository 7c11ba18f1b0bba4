"""Candidates: every engine x TP/PP layout for the GPUs, screened by the cited rules.

A candidate is rejected with the id of the rule that rejects it (no kernel for the quant
format on this architecture and engine version, TP not dividing the heads, TP over TCP,
not enough memory); the survivors carry the rule ids and notes that apply to them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from crossover.advise import memory, moe, traits
from crossover.advise.cost import Layout, MemoryFit, cached_prefix_tokens
from crossover.advise.formats import default_formats, parse_quants
from crossover.advise.hardware import System
from crossover.advise.model import ModelFacts, quant_from_config
from crossover.advise.rules import ENGINES, Verdict, check_tp_heads, cite, kernel_check, rule
from crossover.engines import registry
from crossover.errors import UsageError

Regime = Literal["low", "mid", "high"]
#: a candidate's identity: every field of it, the engine first
CandidateKey = tuple[Any, ...]


class AdviceRequest(BaseModel):
    system: System
    model: ModelFacts
    quant: str | None = None
    engine_versions: dict[str, str] = Field(default_factory=dict)
    input_tokens: int = 512
    output_tokens: int = 256
    #: the start of every prompt shared with other requests (a system prompt): served
    #: from the prefix cache by the engines that keep one (``AdvisorTraits.prefix_cache``)
    shared_prefix_tokens: int = 0
    concurrency: list[int] = Field(default_factory=lambda: [1, 8, 64])
    engines: list[str] = Field(default_factory=lambda: list(ENGINES))
    # GiB per GPU replacing an engine's measured overheads (key "*": every engine)
    reserve_gib: dict[str, float] = Field(default_factory=dict)
    # "calibrated": engine profiles fitted to measurements; "roofline": the upper bound
    predictions: Literal["calibrated", "roofline"] = "calibrated"
    # host memory bandwidth for llama.cpp's CPU expert offload: GB/s or a platform name of
    # data/offload.yaml (None: its default platform, said in the row)
    host_mem_bandwidth: str | float | None = None

    def cached_tokens(self, engine: str) -> int:
        """The prompt tokens ``engine`` serves from its prefix cache."""
        return cached_prefix_tokens(engine, self.shared_prefix_tokens)

    def reserve_for(self, engine: str) -> float | None:
        return self.reserve_gib.get(engine, self.reserve_gib.get("*"))


class Candidate(BaseModel):
    engine: str
    tp: int
    pp: int
    quant: str
    split_mode: str | None = None  # llama.cpp: none | layer
    n_cpu_moe: int | None = None  # llama.cpp: the experts of this many layers in host memory
    host_memory: str | None = None  # with n_cpu_moe: the host bandwidth assumed, in words

    @property
    def key(self) -> CandidateKey:
        """Engine, layout, format and whatever else tells two candidates apart."""
        return tuple(self.model_dump().values())

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "tp": self.tp,
            "pp": self.pp,
            "gpus": self.tp * self.pp,
            "quant": self.quant,
            "cuda_graphs": True,
        }
        if self.split_mode is not None:
            cfg["split_mode"] = self.split_mode
        if self.n_cpu_moe is not None:
            cfg["n_cpu_moe"] = self.n_cpu_moe
        return cfg


class Evaluated(BaseModel):
    candidate: Candidate
    fit: MemoryFit
    notes: list[str] = Field(default_factory=list)
    rules: list[str] = Field(default_factory=list)
    # MoE: the engine's tuned fused-MoE kernel config for this GPU and shape
    moe_config: Literal["present", "absent", "unknown"] | None = None


def regimes_for(concurrency: list[int]) -> list[tuple[Regime, int]]:
    """Lowest level -> low, highest -> high, the middle one (if any) -> mid."""
    levels = sorted(set(concurrency))
    if not levels or levels[0] < 1:
        raise UsageError("--concurrency needs positive integers, e.g. 1,8,64")
    out: list[tuple[Regime, int]] = [("low", levels[0])]
    if len(levels) >= 3:
        out.append(("mid", levels[len(levels) // 2]))
    if len(levels) >= 2:
        out.append(("high", levels[-1]))
    return out


def layouts(engine: str, system: System) -> list[tuple[int, int, str | None]]:
    """(TP, PP, split mode) of every layout the engine can take on the system's GPUs."""
    n = system.count
    layout = traits.of(engine).layout
    if layout == "single-device":
        return [(1, 1, None)]
    if layout == "layer-split":
        modes: list[tuple[int, int, str | None]] = [(1, 1, "none")]
        return modes + [(1, k, "layer") for k in range(2, n + 1)]
    return [(tp, pp, None) for tp in range(1, n + 1) for pp in range(1, n + 1) if tp * pp <= n]


def _reject(engine: str, cfg: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    return {
        "engine": engine,
        "config": cfg,
        "reason": verdict.reason,
        "rule": verdict.rule,
        "title": cite([verdict.rule])[0]["title"],
        "source": cite([verdict.rule])[0]["source"],
    }


def memory_reason(fit: MemoryFit, min_c: int, context: int, gpu: str) -> str:
    """ "needs 20.0 GiB per GPU (...), 19.6 usable on GPU: 0.4 GiB short"."""
    need = fit.weights_gib_per_gpu + fit.kv_gib_per_gpu
    what = (
        f"{fit.weights_gib_per_gpu:.1f} weights + {fit.kv_gib_per_gpu:.2f} KV for {min_c} "
        f"x {context} tokens"
    )
    after = f" after {fit.reserve_gib:.1f} GiB of overheads" if fit.reserve_gib else ""
    return (
        f"does not fit: needs {need:.1f} GiB per GPU ({what}), {fit.usable_gib_per_gpu:.1f} "
        f"usable on {gpu}{after}: {need - fit.usable_gib_per_gpu:.1f} GiB short"
    )


def _memory_reject(
    engine: str, cfg: dict[str, Any], fit: MemoryFit, min_c: int, context: int, gpu: str
) -> dict[str, Any]:
    row = _reject(
        engine, cfg, Verdict(rule="memory-fit", reason=memory_reason(fit, min_c, context, gpu))
    )
    row["memory"] = fit.model_dump()
    row["short_gib"] = fit.weights_gib_per_gpu + fit.kv_gib_per_gpu - fit.usable_gib_per_gpu
    return row


def formats_for(
    req: AdviceRequest, engine: str, extra: dict[str, list[str]] | None = None
) -> tuple[list[str], bool]:
    """The weight formats weighed for ``engine`` and whether they were asked for.

    ``--quant`` (one format or a comma list) or a quantized checkpoint's own format
    narrows them (asked: a format without a kernel is a rejected candidate); otherwise
    the engine's defaults (``formats.default_formats``), 16-bit as the checkpoint's
    dtype, plus ``extra`` (the formats of measured targets, ``--results``; not asked: a
    format without a kernel on this GPU is left out quietly). llama.cpp loads no HF
    quantized checkpoint: it weighs its GGUF formats (a conversion) for one."""
    model = req.model
    ckpt = quant_from_config(model)
    gguf = registry.get(engine).reads_gguf
    if gguf and ckpt is not None and not ckpt.startswith("gguf-"):
        ckpt = None  # an FP8/AWQ/MXFP4 checkpoint: llama.cpp serves a GGUF made from it
    asked = parse_quants(req.quant) or ([ckpt] if ckpt is not None else None)
    sixteen = "fp16" if (model.dtype or "").lower() in ("float16", "fp16", "half") else "bf16"
    if asked is None:
        fam, version = req.system.gpu.sm_family, req.engine_versions.get(engine)
        if sixteen == "bf16" and not kernel_check(engine, "bf16", fam, version).ok:
            # no BF16 tensor cores (Volta, Turing): the 16-bit weights run as FP16
            sixteen = "fp16" if kernel_check(engine, "fp16", fam, version).ok else "bf16"
        names = [sixteen if q == "bf16" else q for q in default_formats(engine)]
        names += (extra or {}).get(engine, [])
        return list(dict.fromkeys(names)), False
    out = []
    for q in asked:
        if gguf and q in ("bf16", "fp16") and model.gguf_file_type is None:
            q = "gguf-f16" if q == "fp16" else "gguf-bf16"
        out.append(q)
    return list(dict.fromkeys(out)), True


def screen(
    req: AdviceRequest, context: int, min_c: int, extra: dict[str, list[str]] | None = None
) -> tuple[list[Evaluated], list[dict[str, Any]]]:
    """Every engine x weight format x layout: kept with its rules, or rejected by one."""
    kept: list[Evaluated] = []
    rejected: list[dict[str, Any]] = []
    for engine in req.engines:
        if engine not in ENGINES:
            raise UsageError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
        names, asked = formats_for(req, engine, extra)
        for quant in names:
            k, r = _screen_format(req, engine, quant, asked, context, min_c)
            kept.extend(k)
            rejected.extend(r)
    return kept, rejected


def _screen_format(
    req: AdviceRequest, engine: str, eng_quant: str, asked: bool, context: int, min_c: int
) -> tuple[list[Evaluated], list[dict[str, Any]]]:
    system, model = req.system, req.model
    fam = system.gpu.sm_family
    spec, own = registry.get(engine), traits.of(engine)
    # the sizes its custom all-reduce runs at (None: the advisor has no rule for one)
    allreduce_tps = spec.custom_allreduce_tps if own.custom_allreduce_rule else None
    kept: list[Evaluated] = []
    rejected: list[dict[str, Any]] = []
    quant = {"gguf-bf16": "bf16", "gguf-f16": "fp16"}.get(eng_quant, eng_quant)
    if model.gguf_file_type is not None:
        quant = eng_quant
    kc = kernel_check(engine, quant, fam, req.engine_versions.get(engine))
    if not kc.ok and not asked:
        # a default format this GPU has no kernel for: left out, and said (--explain)
        cfg = Candidate(engine=engine, tp=1, pp=1, quant=eng_quant).config()
        row = _reject(engine, cfg, Verdict(rule=kc.rule, reason=kc.reason))
        row["not_asked"] = True
        return [], [row]
    for tp, pp, split in layouts(engine, system):
        cand = Candidate(engine=engine, tp=tp, pp=pp, quant=eng_quant, split_mode=split)
        cfg = cand.config()
        if not kc.ok:
            rejected.append(_reject(engine, cfg, Verdict(rule=kc.rule, reason=kc.reason)))
            continue
        bad = check_tp_heads(engine, tp, model.attention_heads, model.kv_heads)
        if bad is None and tp > 1 and system.interconnect == "tcp":
            bad = Verdict(
                rule="tp-over-tcp",
                reason=f"TP={tp} over TCP: "
                f"{2 * model.layers} all-reduces per token at the TCP latency floor",
            )
        if bad is not None and allreduce_tps is not None and tp not in allreduce_tps:
            bad = Verdict(
                rule=bad.rule,
                reason=f"{bad.reason}; {spec.display_name}'s custom all-reduce "
                f"does not run at {tp} GPUs either ({own.custom_allreduce_rule})",
            )
        if bad is None and "trtllm-sm120-fp8-block-moe" in kc.notes and model.experts:
            per_gpu = model.experts / tp
            if per_gpu != int(per_gpu) or int(per_gpu) & (int(per_gpu) - 1):
                bad = Verdict(
                    rule="trtllm-sm120-fp8-block-moe",
                    reason=f"block-FP8 MoE on SM120 needs a power-of-2 expert count per "
                    f"GPU; {model.experts} experts over TP={tp} gives {per_gpu:g}",
                )
        if bad is not None:
            rejected.append(_reject(engine, cfg, bad))
            continue
        fit = memory.fit(
            engine,
            model,
            system.gpu,
            Layout(tp=tp, pp=pp),
            eng_quant,
            min_c,
            context,
            req.reserve_for(engine),
        )
        if not fit.fits:
            row = _memory_reject(engine, cfg, fit, min_c, context, system.gpu.id)
            if own.cpu_moe_offload_rule is not None:
                off = moe.cpu_offload(model, eng_quant, fit, tp * pp)
                if off is not None:
                    row["moe_offload"] = {**off.model_dump(), "rule": own.cpu_moe_offload_rule}
                    row["reason"] += f"; {off.reason}"
                    kept.append(moe.offload_variant(req, cand, fit, off))
            rejected.append(row)
            continue
        ev = Evaluated(candidate=cand, fit=fit, rules=["seed-2-kernel-check", "memory-fit"])
        for note_rule in kc.notes:
            ev.rules.append(note_rule)
            ev.notes.append(rule(note_rule).text)
        if kc.convert:
            ev.notes.append(f"convert the checkpoint to GGUF first: {kc.convert}")
            ev.rules.append("format-engine")
        if own.pipeline_rule is not None and pp > 1:
            ev.rules.append(own.pipeline_rule)
            if system.interconnect == "tcp" and own.pipeline_over_tcp is not None:
                ev.rules.append(own.pipeline_over_tcp.rule)
                ev.notes.append(own.pipeline_over_tcp.note)
        if own.multi_gpu_rule is not None and system.count > 1:
            ev.rules.append(own.multi_gpu_rule)
        if tp > 1:
            ev.rules.append("tp-divides-heads")
            if (
                allreduce_tps is not None
                and own.custom_allreduce_rule is not None
                and (tp not in allreduce_tps or (tp > 2 and not system.p2p))
            ):
                ev.rules.append(own.custom_allreduce_rule)
                ev.notes.append(
                    f"{spec.display_name} custom all-reduce off at TP={tp} on "
                    f"{system.interconnect}: NCCL fallback"
                )
            if not system.p2p:
                ev.rules.extend(["seed-3-tp-over-pp", "consumer-no-p2p"])
                ev.notes.append("no P2P: TP all-reduces go through host memory")
        if model.is_moe:
            _moe_notes(ev, req, eng_quant)
        kept.append(ev)
    return kept, rejected


def _moe_notes(ev: Evaluated, req: AdviceRequest, quant: str) -> None:
    """Memory counts every expert; the tuned-kernel check; expert parallelism on TP > 1."""
    c, model = ev.candidate, req.model
    ev.rules.append("moe-memory-all-experts")
    tuned = moe.tuned_config(
        c.engine, req.system.gpu.id, model, quant, c.tp, batches=req.concurrency
    )
    if tuned is not None:
        ev.moe_config = tuned.status
        ev.rules.append("moe-tuned-kernel-config")
        ev.notes.append(tuned.reason)
    ep = moe.expert_parallel_note(c.engine, model, c.tp)
    if ep is not None:
        ev.rules.append("moe-expert-parallel")
        ev.notes.append(ep)
