"""vLLM (``vllm serve``).

Flags: vllm/engine/arg_utils.py (--tensor-parallel-size, --pipeline-parallel-size,
--max-num-seqs, --max-model-len, --dtype, --quantization, --enforce-eager,
--compilation-config, --load-format dummy, --gpu-memory-utilization,
--max-num-batched-tokens); docs.vllm.ai serving/openai_compatible_server.
vLLM parses --compilation-config once: a second flag replaces the first, so every key
(CUDA-graph mode, the multicast-free all-reduce pass) goes into one merged mapping.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crossover.dialects import VLLMDialect
from crossover.engines import logpatterns as lp
from crossover.engines import logs_moe
from crossover.engines.config import EngineConfig
from crossover.engines.flags import Flag, FlagTable, GpuAsk, Switch, fmt_g
from crossover.engines.ready import ReadyClock
from crossover.engines.spec import (
    AdvisorTraits,
    EngineSpec,
    LaunchSpec,
    MeasuredStarts,
    PlanFields,
    PlanLaunch,
    PlanTraits,
    QualityAPI,
    TritonHostedTraits,
    VersionProbe,
    refuse,
    split_plan_fields,
)
from crossover.errors import UsageError
from crossover.multicast import MULTICAST_OFF

FLAGS = FlagTable(
    flags=(
        Flag("tp", ("--tensor-parallel-size", "-tp"), "tp", requested=True, echoed=True),
        Flag("pp", ("--pipeline-parallel-size", "-pp"), "pp", requested=True, echoed=True),
        Flag("parallel_slots", ("--max-num-seqs",), "parallel", requested=True),
        Flag("context_tokens", ("--max-model-len",), "context_tokens", echoed=True),
        Flag(
            "max_batched_tokens",
            ("--max-num-batched-tokens",),
            "max_batched_tokens",
            requested=True,
            echoed=True,
        ),
        Flag(
            "gpu_memory_utilization",
            ("--gpu-memory-utilization",),
            "gpu_memory_utilization",
            requested=True,
            echoed=True,
            render=fmt_g,
        ),
        Flag("dtype", ("--dtype",), "dtype", requested=True, echoed=True),
        Flag("quant", ("--quantization", "-q"), "quant", requested=True, echoed=True),
        Flag("load_format", ("--load-format",), "load_format"),
        # read back only: the GPUs one launch uses (launch_gpus)
        Flag("dp", ("--data-parallel-size", "-dp")),
        Flag("dp_backend", ("--data-parallel-backend", "-dpb")),
    ),
    switches=(Switch("--enforce-eager", "cuda_graphs", False, requested=True, echoed=True),),
)
#: flags of a data-parallel deployment over several nodes (vllm/engine/arg_utils.py):
#: this launch's share of the GPUs is not tp x pp x dp, and is not guessed
MULTI_NODE = (
    "--data-parallel-size-local",
    "-dpl",
    "--data-parallel-address",
    "-dpa",
    "--data-parallel-start-rank",
    "-dpr",
    "--data-parallel-rank",
    "-dpn",
    "--data-parallel-hybrid-lb",
    "-dph",
    "--data-parallel-external-lb",
    "-dpe",
    "--headless",
    "--nnodes",
    "-n",
    "--node-rank",
    "-r",
)
_ONE_NODE_GPUS = FLAGS.gpus("tp", "pp", "dp", unknown=MULTI_NODE)


def launch_gpus(argv: list[str]) -> GpuAsk | None:
    """tp x pp x dp: one ``vllm serve`` starts its ``--data-parallel-size`` engines, each
    of tp x pp GPUs, on this node; ``None`` (not guessed) for a launch that may span
    nodes (:data:`MULTI_NODE`, or ``--data-parallel-backend ray``, which places the
    data-parallel ranks over a Ray cluster)."""
    backend = FLAGS.given(argv, "dp_backend")
    if backend is not None and backend[0] == "ray":
        return None
    return _ONE_NODE_GPUS(argv)


COMPILATION_FLAGS = ("--compilation-config", "-cc", "-O")

#: NVLink multicast off for every vLLM start (docs/engines.md, "Several GPUs"): vLLM 0.26
#: picks FlashInfer's ``mnnvl`` all-reduce (multicast objects) by itself for TP>1 even with
#: the NCCL/torch switches set; the backend choice and the fused all-reduce pass are forced
#: too. Names from vllm/envs.py and vllm/config/compilation.py (0.26.0).
NO_MULTICAST_ENV: dict[str, str] = {
    **MULTICAST_OFF,
    "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def compilation_config(config: EngineConfig) -> dict[str, Any] | None:
    """The one ``--compilation-config`` mapping: the user's, plus what the knobs need."""
    merged: dict[str, Any] = dict(config.compilation_config or {})
    if config.cuda_graphs is True:
        mode = merged.get("cudagraph_mode")
        if mode is not None and str(mode).upper() == "NONE":
            raise UsageError("vLLM: cuda_graphs=true contradicts compilation_config.cudagraph_mode")
        merged.setdefault("cudagraph_mode", "FULL_AND_PIECEWISE")
    if config.tp * config.pp > 1:
        fused = (merged.get("pass_config") or {}).get("fuse_allreduce_rms")
        if fused:
            raise UsageError(
                "vLLM: compilation_config.pass_config.fuse_allreduce_rms=true needs NVLink "
                "multicast (FlashInfer mnnvl), which crossover keeps off"
            )
        merged = _merge(merged, {"pass_config": {"fuse_allreduce_rms": False}})
    return merged or None


def build(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    refuse(
        config,
        "vLLM",
        gpu_layers="llama.cpp only",
        device="use CUDA_VISIBLE_DEVICES in env",
        prompt_cache_mib="llama.cpp only (vLLM's prefix cache lives in GPU KV blocks)",
        gc_warning_s="SGLang only (its front end's long garbage-collection line)",
    )
    clash = [a for a in config.extra_args if a.split("=")[0] in COMPILATION_FLAGS]
    if clash:
        raise UsageError(
            f"vLLM: {clash[0].split('=')[0]} in extra_args would replace crossover's "
            "--compilation-config; put its keys in compilation_config instead"
        )
    argv = ["serve", config.model, "--host", config.host, "--port", str(port)]
    argv += FLAGS.args(
        config,
        "tp",
        "pp",
        "parallel",
        "context_tokens",
        "max_batched_tokens",
        "gpu_memory_utilization",
        "dtype",
        "quant",
    )
    if config.cuda_graphs is False:
        argv.append("--enforce-eager")
    compilation = compilation_config(config)
    if compilation:
        argv += ["--compilation-config", json.dumps(compilation, sort_keys=True)]
    argv += FLAGS.args(config, "load_format")
    # usage.prompt_tokens_details.cached_tokens, the prefix-cache evidence of every run
    # (vLLM sends it only with this flag)
    if "--enable-prompt-tokens-details" not in config.extra_args:
        argv.append("--enable-prompt-tokens-details")
    # config.env is applied over these (launch_spec): a user may still decide otherwise
    return LaunchSpec(argv=argv + list(config.extra_args), env_set=dict(NO_MULTICAST_ENV))


def plan_fields(s: PlanLaunch) -> PlanFields:
    # the adapters' own settings (one flag table: the launch a sweep would make)
    own: dict[str, object] = {
        "max_batched_tokens": s.max_num_tokens,
        "gpu_memory_utilization": 0.90,
    }
    if s.load_format is not None:
        own["load_format"] = s.load_format
    return split_plan_fields(s, SPEC.ep_flag, **own)


SPEC = EngineSpec(
    name="vllm",
    display_name="vLLM",
    dialect=VLLMDialect(name="vllm"),
    default_executable=("vllm",),
    build=build,
    flags=FLAGS,
    health_path="/health",
    metrics_path="/metrics",
    # also vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds
    # (histograms, left out: crossover measures both per request)
    metric_names=(
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
    ),
    kv_usage_metric="vllm:kv_cache_usage_perc",
    waiting_metric="vllm:num_requests_waiting",
    running_metric="vllm:num_requests_running",
    counter="vllm:generation_tokens_total",
    version_probes=(VersionProbe("http", ("/version",), json_key="version"),),
    log_patterns=lp.VLLM + logs_moe.VLLM_MOE,
    absence_rules=lp.VLLM_ABSENT,
    warning_rules=logs_moe.VLLM_WARN,
    detect=(
        r"Initializing a V1 LLM engine",
        r"\[gpu_model_runner\.py",
        r"Starting vLLM API server",
    ),
    model_is_local=False,
    ready_clock=ReadyClock(
        ready=r"Application startup complete",
        stamp=r"\b(?:INFO|WARNING|DEBUG|ERROR) (?P<month>\d\d)-(?P<day>\d\d) "
        r"(?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d) ",
        kind="wall",
        source="vllm/logger.py format (%m-%d %H:%M:%S); uvicorn's startup line; seen here (0.26.0)",
    ),
    source="vllm/engine/arg_utils.py; docs.vllm.ai/en/latest/cli/serve.html",
    # launch to ready in the committed engine logs (compile and CUDA graphs, or a GGUF load)
    measured_starts=MeasuredStarts(median_s=107.0, count=24, low_s=62.0, high_s=186.0),
    added_flags={
        "--enable-prompt-tokens-details": "for the prompt tokens each response says its "
        "cache served; a vLLM without it is older than crossover supports",
    },
    tp_heads_rule="seed-4-vllm-tp-heads",
    custom_allreduce_tps=(2, 4, 6, 8),
    ep_flag="--enable-expert-parallel",
    quality=QualityAPI(completion_fields={"ignore_eos": True, "return_tokens_as_token_ids": True}),
    plan=PlanTraits(fields=plan_fields, online_quants=("fp8",), load_format=True),
    advise=AdvisorTraits(preference=(2, 1, 0), prefix_cache=True),
    launch_gpus=launch_gpus,
    # its async engine in the Python backend (crossover.plan.triton_python)
    triton_hosted=TritonHostedTraits(
        model_file="vllm_model.py",
        parameters="crossover.plan.triton_hosted:vllm_launch_parameters",
        settings={
            "model": ("model", str),
            "tensor_parallel_size": ("tp", int),
            "pipeline_parallel_size": ("pp", int),
            "max_num_seqs": ("parallel_slots", int),
            "max_model_len": ("context_tokens", int),
            "enforce_eager": ("cuda_graphs", lambda v: not bool(v)),
            "gpu_memory_utilization": ("gpu_memory_utilization", float),
            "quantization": ("quant", str),
        },
        cuda_graphs=True,
        load_format=True,
    ),
)
