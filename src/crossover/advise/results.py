"""Measured figures from a sweep directory (``DIR/sweep.json``, ``crossover.sweep/1``).

A measured target matches an advice candidate when the engine, TP, PP and (if the
target says) quant agree; only ``valid`` runs count. Measurements override predictions.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from statistics import mean
from typing import Any

from pydantic import BaseModel, ValidationError

from crossover.analysis.schema import SweepFile, TargetInfo
from crossover.errors import UsageError, validation_line
from crossover.metrics.summary import RunSummary


class Measured(BaseModel):
    target: str
    engine: str
    tp: int
    pp: int
    quant: str | None
    concurrency: int
    runs: int
    output_tok_s: float | None
    total_tok_s: float | None
    decode_tok_s_per_user: float | None  # 1000 / TPOT p50
    cuda_graphs: bool | None = None  # as the target's settings say (None: not stated)
    stalled: int = 0  # valid repeats left out as stalls (see ``STALL_TTFT_RATIO``)
    #: llama.cpp ``--n-cpu-moe N``: the layers whose experts stayed in host memory
    #: (settings ``cpu_moe_layers``, read from its log; None: all on the GPU)
    n_cpu_moe: int | None = None
    #: the fused-MoE kernel read a tuned config for this GPU and shape (settings
    #: ``moe_tuned_config``, from the engine's log; None: not stated)
    moe_tuned_config: bool | None = None


# A repeat whose TTFT p50 is this many times its level's fastest repeat's measured the
# engine doing something else before serving (llama.cpp saving 255 idle slots to its host
# prompt cache before every new task: TTFT 8.8 s vs 49 ms at one user on the H200), not its
# steady state; models and advice take the level from the other repeats and say so.
STALL_TTFT_RATIO = 10.0


def drop_stalled(summaries: list[RunSummary]) -> tuple[list[RunSummary], int]:
    """``summaries`` of one target and level without the stalled repeats, and their count."""
    ttfts = [s.ttft_ms.p50 for s in summaries]
    known = [t for t in ttfts if t]
    if len(known) < 2:
        return summaries, 0
    floor = min(known)
    kept = [
        s for s, t in zip(summaries, ttfts, strict=True) if not t or t < STALL_TTFT_RATIO * floor
    ]
    return kept, len(summaries) - len(kept)


# 16-bit weights are one format for matching (llama.cpp runs a bf16 checkpoint as F16)
_SIXTEEN_BIT = {"bf16", "fp16", "gguf-f16", "gguf-bf16"}


def same_weights(a: str, b: str) -> bool:
    return a == b or (a in _SIXTEEN_BIT and b in _SIXTEEN_BIT)


class SweepResults(BaseModel):
    path: str
    measured: list[Measured]
    # the sweep's workload and GPU (from sweep.json's workload and roofline; None if absent)
    input_tokens: int | None = None
    output_tokens: int | None = None
    gpu: str | None = None

    def find(
        self,
        engine: str,
        tp: int,
        pp: int,
        quant: str,
        concurrency: int,
        n_cpu_moe: int | None = None,
    ) -> Measured | None:
        found = self.find_all(engine, tp, pp, quant, concurrency, n_cpu_moe)
        return found[0] if found else None

    def find_all(
        self,
        engine: str,
        tp: int,
        pp: int,
        quant: str,
        concurrency: int,
        n_cpu_moe: int | None = None,
    ) -> list[Measured]:
        """Every measured target matching the candidate (a sweep may hold several per
        engine, e.g. CUDA graphs on and off). A target that does not say its weight
        format ran the checkpoint's own 16-bit weights; one that kept experts in host
        memory (``--n-cpu-moe``) matches only a candidate offloading as many layers."""
        return [
            m
            for m in self.measured
            if m.engine == engine
            and m.tp == tp
            and m.pp == pp
            and m.concurrency == concurrency
            and same_weights(m.quant or "bf16", quant)
            and (m.n_cpu_moe or 0) == (n_cpu_moe or 0)
        ]


def _setting(settings: dict[str, Any], key: str) -> Any:
    if key in settings:
        return settings[key]
    launch = settings.get("launch")
    if isinstance(launch, dict):
        return launch.get(key)
    return None


_PP_FLAGS = ("--pipeline-parallel-size", "--pp-size", "--pp_size")


def _pp(settings: dict[str, Any]) -> Any:
    """PP from settings, or from the extra_args an emitted sweep config carries."""
    value = _setting(settings, "pp")
    if value is not None:
        return value
    args = _setting(settings, "extra_args")
    if isinstance(args, list):
        for flag, nxt in itertools.pairwise(args):
            if flag in _PP_FLAGS:
                return nxt
    return None


def _as_int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


_GGUF_TYPE = re.compile(r"[-_.](f16|bf16|q8_0|q6_k|q5_k_m|q5_0|q4_k_m|q4_0|q3_k_m|q2_k)\.gguf$")


def target_quant(target: TargetInfo | None) -> str | None:
    """A sweep target's weight format: settings (quant, else dtype) or the GGUF file name.

    vLLM reads back ``quant: none`` for an unquantized checkpoint: the dtype says then."""
    from crossover.advise.rules import normalize_quant

    if target is None:
        return None
    settings = target.settings
    raw_launch = settings.get("launch")
    launch: dict[str, Any] = raw_launch if isinstance(raw_launch, dict) else {}
    for key in ("quant", "dtype"):
        raw = settings.get(key) or launch.get(key)
        if raw and str(raw).lower() not in ("none", "null"):
            try:
                return normalize_quant(str(raw))
            except UsageError:
                return None
    model = str(target.model or settings.get("model") or launch.get("model") or "")
    m = _GGUF_TYPE.search(model.lower())
    return f"gguf-{m.group(1)}" if m else None


def _workload_int(workload: dict[str, Any] | None, key: str) -> int | None:
    value = (workload or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_sweep(path: Path, flag: str = "--results") -> SweepFile:
    """``DIR/sweep.json`` (or the file itself) as the typed sweep file; a file that cannot
    be read, or is not a ``crossover.sweep/1`` file, is a usage error naming ``flag``."""
    path = path / "sweep.json" if path.is_dir() else path
    try:
        sweep = SweepFile.read(path)
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path} ({exc})") from exc
    except ValidationError as exc:
        raise UsageError(
            f"{flag}: {path} is not a crossover.sweep/1 file ({validation_line(exc)})"
        ) from None
    except ValueError as exc:
        raise UsageError(f"{flag}: cannot read {path} ({exc})") from exc
    if "schema_" not in sweep.model_fields_set:
        raise UsageError(f"{flag}: {path} is not a crossover.sweep/1 file (no schema)")
    return sweep


def tpot_p50(sweep: SweepFile) -> dict[tuple[str, int], float]:
    """Mean TPOT p50 of the valid repeats, per (target, concurrency)."""
    acc: dict[tuple[str, int], list[float]] = {}
    for run in sweep.runs:
        v = run.summary.tpot_ms.p50
        if run.is_valid and v is not None and run.concurrency is not None:
            acc.setdefault((run.target, run.concurrency), []).append(v)
    return {k: sum(v) / len(v) for k, v in acc.items()}


def load_results(sweep_dir: Path) -> SweepResults:
    """The measured figures of ``DIR/sweep.json`` (or of that file)."""
    path = sweep_dir / "sweep.json" if sweep_dir.is_dir() else sweep_dir
    return results_of(read_sweep(path), path)


def results_of(data: SweepFile, path: Path) -> SweepResults:
    """The measured figures of a sweep file read from ``path``."""
    targets = {t.name: t for t in data.targets}
    groups: dict[tuple[str, int], list[RunSummary]] = {}
    for run in data.runs:
        if not run.is_valid:
            continue
        groups.setdefault((run.target, run.concurrency or 0), []).append(run.summary)
    measured: list[Measured] = []
    for (name, conc), every in sorted(groups.items(), key=lambda kv: kv[0]):
        summaries, stalled = drop_stalled(every)
        target = targets.get(name)
        settings = target.settings if target is not None else {}
        engine = str(
            (target.engine if target is not None else None) or settings.get("engine") or ""
        )
        quant = target_quant(target)
        graphs = _setting(settings, "cuda_graphs")
        cpu_moe = _setting(settings, "cpu_moe_layers")
        tuned = _setting(settings, "moe_tuned_config")
        outs = [v for s in summaries if (v := s.throughput.output_tokens_per_s)]
        tots = [v for s in summaries if (v := s.throughput.total_tokens_per_s)]
        tpots = [v for s in summaries if (v := s.tpot_ms.p50)]
        measured.append(
            Measured(
                target=name,
                engine=engine,
                tp=_as_int(_setting(settings, "tp"), 1),
                pp=_as_int(_pp(settings), 1),
                quant=quant,
                concurrency=conc,
                runs=len(summaries),
                output_tok_s=mean(outs) if outs else None,
                total_tok_s=mean(tots) if tots else None,
                decode_tok_s_per_user=1000.0 / mean(tpots) if tpots else None,
                cuda_graphs=graphs if isinstance(graphs, bool) else None,
                stalled=stalled,
                n_cpu_moe=_as_int(cpu_moe, 0) or None,
                moe_tuned_config=tuned if isinstance(tuned, bool) else None,
            )
        )
    gpu = next((r.gpu for r in data.roofline if r.gpu), None)
    return SweepResults(
        path=str(path),
        measured=measured,
        input_tokens=_workload_int(data.workload, "input_tokens"),
        output_tokens=_workload_int(data.workload, "output_tokens"),
        gpu=gpu,
    )
