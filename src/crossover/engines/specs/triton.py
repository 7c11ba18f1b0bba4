"""Triton Inference Server with the tensorrt_llm backend.

Flags: tritonserver --help (--model-repository, --http-port, --http-address, --allow-grpc,
--allow-metrics); health /v2/health/ready (KServe v2 protocol, docs/protocol).
"""

from __future__ import annotations

from pathlib import Path

from crossover.engines import logpatterns as lp
from crossover.engines.config import EngineConfig
from crossover.engines.flags import FlagTable
from crossover.engines.spec import EngineSpec, LaunchSpec, PlanTraits, VersionProbe, refuse


def build(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    refuse(
        config,
        "tritonserver",
        quant="set in the model repository (crossover plan)",
        dtype="set in the model repository",
        tp="set at checkpoint conversion",
        pp="set at checkpoint conversion",
        parallel="set max_batch_size in the model repository",
        cuda_graphs="set cuda_graph_mode in tensorrt_llm/config.pbtxt",
        gpu_layers="llama.cpp only",
        load_format="not a tritonserver option",
        context_tokens="set in the model repository",
        gpu_memory_utilization="set kv_cache_free_gpu_mem_fraction in the model repository",
        max_batched_tokens="set max_num_tokens at engine build",
        compilation_config="vLLM only",
        prompt_cache_mib="llama.cpp only (its host-RAM prompt cache)",
    )
    argv = [f"--model-repository={config.model_path()}", f"--http-port={port}"]
    argv += [f"--http-address={config.host}", "--allow-grpc=false"]
    if not any(a.startswith("--metrics-port") for a in config.extra_args):
        argv.append("--allow-metrics=false")
    return LaunchSpec(argv=argv + list(config.extra_args))


SPEC = EngineSpec(
    name="triton",
    display_name="tritonserver",
    dialect="triton",
    default_executable=("tritonserver",),
    build=build,
    flags=FlagTable(),  # every setting lives in the model repository (crossover plan)
    health_path="/v2/health/ready",
    metrics_path=None,  # metrics are on their own port (8002 by default): --metrics-port
    metric_names=("nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics"),
    version_probes=(VersionProbe("http", ("/v2",), json_key="version"),),
    log_patterns=lp.TRITON,
    absence_rules=(),
    # checked first: Triton's tensorrt_llm backend prints TensorRT-LLM lines too
    detect=(r"Started HTTPService at", r"model_lifecycle\.cc", r"\|\s*server_version\s*\|"),
    detect_first=True,
    model_is_local=True,
    source="triton-inference-server/server docs/customization_guide; tritonserver --help",
    plan=PlanTraits(writer="crossover.plan.nvidia:plan_triton", versioned=True),
)
