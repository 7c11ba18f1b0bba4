"""Hugging Face transformers serve.

Flags: transformers 5.x src/transformers/cli/serve.py (--continuous-batching,
--cb-use-cuda-graph, --device, --dtype, --host, --port); the start line worked with
transformers 5.17.0 on the project's H200 machine (docs/engines.md, transformers serve notes).
"""

from __future__ import annotations

from pathlib import Path

from crossover.dialects import TransformersDialect
from crossover.engines import logpatterns as lp
from crossover.engines.config import EngineConfig
from crossover.engines.flags import Flag, FlagTable
from crossover.engines.launchrec import Fact, LaunchRecord
from crossover.engines.spec import (
    AdvisorTraits,
    EngineSpec,
    LaunchSpec,
    PlanFields,
    PlanLaunch,
    PlanTraits,
    VersionProbe,
    refuse,
)
from crossover.errors import UsageError

ENTRY = "from transformers.cli.transformers import app; app()"
FLAGS = FlagTable(
    flags=(
        Flag("device", ("--device",), "device", requested=True),
        Flag("dtype", ("--dtype",), "dtype", requested=True),
    )
)
GRAPHS_FLAG = "--cb-use-cuda-graph"


def build(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    refuse(
        config,
        "transformers serve",
        quant="load a pre-quantized checkpoint instead",
        tp="transformers serve runs one device",
        pp="transformers serve runs one device",
        parallel="continuous batching sizes itself (--cb-max-batch-tokens in extra_args)",
        load_format="not a transformers serve option",
        gpu_layers="llama.cpp only",
        context_tokens="not a transformers serve option",
        gpu_memory_utilization="not a transformers serve option",
        max_batched_tokens="use extra_args --cb-max-batch-tokens",
        compilation_config="vLLM only",
        prompt_cache_mib="llama.cpp only (its host-RAM prompt cache)",
        gc_warning_s="SGLang only (its front end's long garbage-collection line)",
    )
    argv = ["serve", str(config.model_path()), "--continuous-batching"]
    if config.cuda_graphs:
        argv.append(GRAPHS_FLAG)
    defaults = {"device": config.device or "cuda:0", "dtype": config.dtype or "bfloat16"}
    argv += FLAGS.args(config.model_copy(update=defaults), "device", "dtype")
    argv += ["--host", config.host, "--port", str(port), *config.extra_args]
    return LaunchSpec(argv=argv)


def launch_facts(launch: LaunchRecord) -> dict[str, Fact]:
    asked = GRAPHS_FLAG in launch.argv
    graphs = Fact(
        setting="cuda_graphs",
        value=asked,
        basis="launch-argv",
        verified=False,
        evidence=GRAPHS_FLAG if asked else f"no {GRAPHS_FLAG}",
        origin="transformers src/transformers/cli/serve.py; logs seen here",
        note=(
            "transformers serve 5.17 does not log whether CUDA graphs are used "
            "(5.20 logs it when continuous batching turns them off)"
        ),
    )
    return {"cuda_graphs": graphs}


def plan_fields(s: PlanLaunch) -> PlanFields:
    if s.tp * s.pp > 1:
        raise UsageError("transformers serve runs on one device: use --tp 1 --pp 1")
    return {}, [], {}


SPEC = EngineSpec(
    name="transformers",
    display_name="transformers serve",
    dialect=TransformersDialect(name="transformers"),
    default_executable=("python3", "-c", ENTRY),
    build=build,
    flags=FLAGS,
    health_path="/health",  # /v1/models crashes without an HF cache dir (seen here)
    metrics_path=None,
    metric_names=(),
    version_probes=(
        VersionProbe(
            "python",
            ("import transformers; print(transformers.__version__)",),
            regex=r"(\S+)",
        ),
    ),
    log_patterns=lp.TRANSFORMERS,
    absence_rules=(),
    detect=(r"^\[transformers\] ", r"ContinuousBatchingLogger", r"CB: (True|False)$"),
    model_is_local=True,
    source="transformers src/transformers/cli/serve.py; docs/engines.md (transformers serve)",
    launch_facts=launch_facts,
    unknown_notes={
        "cuda_graphs": "unknown from log: this transformers serve does not log it (5.17 does not)"
    },
    tp_heads_rule=None,
    plan=PlanTraits(fields=plan_fields, formats="16-bit"),
    advise=AdvisorTraits(preference=(4, 4, 4), graphs_matter=False),
    model_kind="an HF model folder",
)
