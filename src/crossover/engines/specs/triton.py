"""Triton Inference Server: the tensorrt_llm ensemble, or an engine in the Python backend.

Flags: tritonserver --help (--model-repository, --http-port, --http-address, --allow-grpc,
--metrics-port, --metrics-address, --backend-directory); health /v2/health/ready (KServe v2
protocol, docs/protocol). Metrics are served on a port of their own: the launch picks a
free one (unless extra_args name --metrics-port) and the sweep scrapes it. Without an
``executable`` and with no ``tritonserver`` on PATH, the server ``crossover engines install
triton`` unpacked into the cache is used, with its libraries and the stub's environment
(``crossover.builds.triton``).
"""

from __future__ import annotations

from pathlib import Path

from crossover.dialects import TritonDialect
from crossover.engines import logpatterns as lp
from crossover.engines.config import EngineConfig
from crossover.engines.flags import FlagTable
from crossover.engines.logs_triton import read_triton_log
from crossover.engines.processes import free_port
from crossover.engines.ready import ReadyClock
from crossover.engines.spec import (
    EngineSpec,
    InstallTraits,
    LaunchSpec,
    PlanTraits,
    VersionProbe,
    refuse,
)


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
        gc_warning_s="SGLang only (its front end's long garbage-collection line)",
    )
    argv = [f"--model-repository={config.model_path()}", f"--http-port={port}"]
    argv += [f"--http-address={config.host}", "--allow-grpc=false"]
    env: dict[str, str] = {}
    program = SPEC.executable(config)[0]
    from crossover.builds.triton import install_of  # a cached install: its env and backends

    installed = install_of(program) if "/" in program else None
    if installed is not None:
        env = installed.launch_env()
        if not any(a.startswith("--backend-directory") for a in config.extra_args):
            argv += installed.launch_args()
    metrics_port: int | None = _flag_int(config.extra_args, "--metrics-port")
    if metrics_port is None and "--allow-metrics=false" not in config.extra_args:
        metrics_port = free_port(config.host)
        argv += [f"--metrics-port={metrics_port}", f"--metrics-address={config.host}"]
    return LaunchSpec(argv=argv + list(config.extra_args), env_set=env, metrics_port=metrics_port)


def _flag_int(args: list[str], flag: str) -> int | None:
    for i, arg in enumerate(args):
        value = arg.partition("=")[2] if arg.startswith(flag + "=") else None
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        if value is not None and value.isdigit():
            return int(value)
    return None


SPEC = EngineSpec(
    name="triton",
    display_name="tritonserver",
    dialect=TritonDialect(name="triton"),
    default_executable=("tritonserver",),
    build=build,
    flags=FlagTable(),  # every setting lives in the model repository (crossover plan)
    health_path="/v2/health/ready",
    metrics_path=None,  # metrics are on their own port (8002 by default): --metrics-port
    metric_names=(
        "nv_trt_llm_request_metrics",
        "nv_trt_llm_kv_cache_block_metrics",
        "nv_inference_request_success",
        "nv_inference_queue_duration_us",
        "nv_inference_compute_infer_duration_us",
        "nv_inference_request_duration_us",
        "crossover_generated_tokens_total",
    ),
    version_probes=(VersionProbe("http", ("/v2",), json_key="version"),),
    log_patterns=lp.TRITON,
    # crossover's Python-backend models count generated tokens (pb_utils.MetricFamily)
    # before each request's final response is sent (crossover.plan.triton_python)
    counter="crossover_generated_tokens_total",
    read_log=read_triton_log,
    absence_rules=(),
    # checked first: Triton's tensorrt_llm backend prints TensorRT-LLM lines too
    detect=(r"Started HTTPService at", r"model_lifecycle\.cc", r"\|\s*server_version\s*\|"),
    detect_first=True,
    model_is_local=True,
    ready_clock=ReadyClock(
        ready=r"Started HTTPService at",
        stamp=r"^[IWEF](?P<month>\d\d)(?P<day>\d\d) (?P<hour>\d\d):(?P<minute>\d\d):"
        r"(?P<second>\d\d)\.(?P<frac>\d+) ",
        kind="wall",
        source="glog line prefix (Immdd hh:mm:ss.uuuuuu); tritonserver 2.51, seen here",
    ),
    source="triton-inference-server/server docs/customization_guide; tritonserver --help",
    plan=PlanTraits(writer="crossover.plan.nvidia:plan_triton", versioned=True, hosts=True),
    model_kind="a Triton model repository folder",
    install=InstallTraits(find="crossover.builds.triton:find_tritonserver", kind="wheel"),
)
