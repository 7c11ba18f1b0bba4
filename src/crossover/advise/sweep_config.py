"""``--emit-sweep``: a sweep config that measures the advice's top candidates.

The shape is the one the sweep runner reads (``name``, ``concurrency``, ``targets`` with a
``launch`` block per target); the measurements come back through ``--results``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from crossover import defaults
from crossover.engines import registry


class Launch(BaseModel):
    model: str
    tp: int = 1
    parallel: int = 1
    cuda_graphs: bool = True
    quant: str | None = None
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class SweepTarget(BaseModel):
    name: str
    engine: str
    launch: Launch


class SweepConfig(BaseModel):
    name: str
    concurrency: list[int]
    requests_per_level: int
    output_tokens: int
    input_tokens: int
    repeats: int = 3
    targets: list[SweepTarget]


def target_name(engine: str, config: dict[str, Any]) -> str:
    name = f"{engine}-tp{config['tp']}"
    if config.get("pp", 1) > 1:
        name += f"-pp{config['pp']}"
    return f"{name}-{config['quant']}"


def _extra_args(engine: str, config: dict[str, Any]) -> list[str]:
    pp = int(config.get("pp", 1))
    spec = registry.get(engine)
    if spec.plan is not None and spec.plan.formats == "gguf":  # one process, split modes
        return ["--split-mode", str(config.get("split_mode") or "none")]
    if pp <= 1:
        return []
    try:
        flag = spec.flags.by_knob("pp").names[0]
    except KeyError:
        return []
    return [flag, str(pp)]


def emit_sweep(
    advice: dict[str, Any], model_path: str, *, max_targets: int = 4, repeats: int = 3
) -> SweepConfig:
    """Top recommendation of each regime first, then runners-up, up to ``max_targets``.

    A candidate ranked below measured ones only because its figure is borrowed (an engine
    never measured) is placed where it would rank if the borrowed profile held: a sweep
    is how it gets measured (seed-6-rerun-sweep)."""
    workload = advice["workload"]
    levels: list[int] = list(workload["concurrency"])

    def order(rec: dict[str, Any]) -> tuple[int, int, int]:
        lent = rec.get("borrowed_rank")
        rank = min(int(rec["rank"]), int(lent["rank_if_it_holds"])) if lent else int(rec["rank"])
        return (rank, 0 if lent else 1, int(rec["concurrency"]))

    recs = sorted(advice["recommendations"], key=order)
    targets: list[SweepTarget] = []
    seen: set[str] = set()
    for rec in recs:
        name = target_name(rec["engine"], rec["config"])
        if name in seen:
            continue
        seen.add(name)
        cfg = rec["config"]
        quant = cfg.get("quant")
        targets.append(
            SweepTarget(
                name=name,
                engine=rec["engine"],
                launch=Launch(
                    model=model_path,
                    tp=int(cfg["tp"]),
                    parallel=max(levels),
                    cuda_graphs=bool(cfg.get("cuda_graphs", True)),
                    quant=None if quant in ("bf16", "fp16") else quant,
                    extra_args=_extra_args(rec["engine"], cfg),
                ),
            )
        )
        if len(targets) >= max_targets:
            break
    return SweepConfig(
        name=f"advise-{advice['model']['name']}-{advice['hardware']['gpu']}".replace("/", "_"),
        concurrency=levels,
        requests_per_level=defaults.level_requests(max(levels)),
        output_tokens=int(workload["output_tokens"]),
        input_tokens=int(workload["input_tokens"]),
        repeats=repeats,
        targets=targets,
    )
