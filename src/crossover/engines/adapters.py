"""Declarative engine adapters: one frozen record per engine in a plain dict registry.

Each adapter knows its launch argument list (never a shell string), health and metrics
paths, request dialect, how to read its version, and the startup-log patterns that show
which settings took effect (``crossover.engines.logpatterns``). Flags are taken from the
engines' own sources and docs; the path or URL is given beside each.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossover.engines import logpatterns as lp
from crossover.engines import logs_moe, logs_sglang
from crossover.engines.config import EngineConfig
from crossover.errors import UsageError
from crossover.multicast import MULTICAST_OFF


@dataclass(frozen=True)
class LaunchSpec:
    """What the lifecycle starts: argv, environment changes, and files to write first."""

    argv: list[str]
    env_set: dict[str, str] = field(default_factory=dict)
    env_unset: tuple[str, ...] = ()
    files: dict[Path, str] = field(default_factory=dict)


@dataclass(frozen=True)
class VersionProbe:
    """One way to read an engine's version: an HTTP GET or a command; first hit wins."""

    kind: str  # "http" (path on the server) or "cmd" (args appended to the executable)
    target: tuple[str, ...]
    json_key: str | None = None  # for "http": the key holding the version
    regex: str | None = None  # applied to the body / command output; group 1 is the version


Builder = Callable[[EngineConfig, int, Path], LaunchSpec]


@dataclass(frozen=True)
class EngineAdapter:
    name: str
    display_name: str  # used in messages: "llama-server exited with status 1 ..."
    dialect: str  # request dialect name (docs/interfaces.md: openai, vllm, sglang, ...)
    default_executable: tuple[str, ...]
    build: Builder
    health_path: str
    metrics_path: str | None
    metric_names: tuple[str, ...]
    version_probes: tuple[VersionProbe, ...]
    log_patterns: tuple[lp.LogPattern, ...]
    absence_rules: tuple[lp.AbsenceRule, ...]  # settings read from a line that never came
    detect: tuple[str, ...]  # regexes that identify this engine's log
    model_is_local: bool  # the model must exist on disk (no hub download)
    source: str  # where the flags were checked
    warning_rules: tuple[lp.WarningRule, ...] = ()  # log lines the user must see

    def executable(self, config: EngineConfig) -> list[str]:
        return list(config.executable) if config.executable else list(self.default_executable)


def _refuse(config: EngineConfig, engine: str, **knobs: str) -> None:
    """Refuse knobs the engine cannot take, naming the alternative."""
    for knob, why in knobs.items():
        value = getattr(config, knob)
        if value is not None and value is not False and not (knob in ("tp", "pp") and value == 1):
            raise UsageError(f"{engine} does not take {knob}={value}: {why}")


def _on_off(value: bool) -> str:
    return "on" if value else "off"


# --- llama.cpp llama-server -------------------------------------------------------------
# Flags: common/arg.cpp (-np/--parallel, -c, -ngl, -fa [on|off|auto], --metrics);
# GGML_CUDA_DISABLE_GRAPHS is read in ggml/src/ggml-cuda/common.cuh (llama.cpp vendored in
# llama-cpp-python 0.3.36). -c is the total context, split across the slots.
def _llamacpp(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    _refuse(
        config,
        "llama-server",
        quant="the quantization is the GGUF file's; pick another file",
        dtype="the weight type is the GGUF file's",
        tp="split over GPUs with extra_args --split-mode/-ts instead",
        pp="split over GPUs with extra_args --split-mode layer instead",
        load_format="not a llama-server option",
        device="use -ngl/--main-gpu or CUDA_VISIBLE_DEVICES in env",
        gpu_memory_utilization="llama.cpp allocates what -c and the slots need",
        max_batched_tokens="use extra_args -b/--batch-size and -ub/--ubatch-size",
        compilation_config="vLLM only",
    )
    argv = ["-m", str(config.model_path()), "--host", config.host, "--port", str(port)]
    if config.parallel is not None:
        argv += ["-np", str(config.parallel)]
    if config.context_tokens is not None:
        argv += ["-c", str(config.context_tokens * (config.parallel or 1))]
    argv += ["-ngl", str(config.gpu_layers if config.gpu_layers is not None else 999)]
    if config.flash_attn is not None:
        argv += ["-fa", _on_off(config.flash_attn)]
    if config.prompt_cache_mib is not None:
        # --cache-ram (server: host-memory prompt caching, llama.cpp PR #16391; 8192 MiB by
        # default, 0 disables it). With many slots its default stalls the server: each new
        # task first saves the idle slots into the full cache, one eviction each
        # (docs/engines.md, "llama.cpp's host prompt cache").
        argv += ["--cache-ram", str(config.prompt_cache_mib)]
    argv += ["--metrics", *config.extra_args]
    env_set: dict[str, str] = {}
    env_unset: tuple[str, ...] = ()
    if config.cuda_graphs is False:
        env_set[lp.LLAMA_GRAPHS_ENV] = "1"
    elif config.cuda_graphs is True:
        env_unset = (lp.LLAMA_GRAPHS_ENV,)  # an inherited value would turn them off
    return LaunchSpec(argv=argv, env_set=env_set, env_unset=env_unset)


# --- transformers serve -------------------------------------------------------------------
# Flags: transformers 5.x src/transformers/cli/serve.py (--continuous-batching,
# --cb-use-cuda-graph, --device, --dtype, --host, --port); the start line worked with
# transformers 5.17.0 on the project's H200 machine (docs/engines.md, transformers serve notes).
TRANSFORMERS_ENTRY = "from transformers.cli.transformers import app; app()"


def _transformers(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    _refuse(
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
    )
    argv = ["serve", str(config.model_path()), "--continuous-batching"]
    if config.cuda_graphs:
        argv.append("--cb-use-cuda-graph")
    argv += ["--device", config.device or "cuda:0"]
    argv += ["--dtype", config.dtype or "bfloat16"]
    argv += ["--host", config.host, "--port", str(port), *config.extra_args]
    return LaunchSpec(argv=argv)


# --- vLLM ---------------------------------------------------------------------------------
# Flags: vllm/engine/arg_utils.py (--tensor-parallel-size, --pipeline-parallel-size,
# --max-num-seqs, --max-model-len, --dtype, --quantization, --enforce-eager,
# --compilation-config, --load-format dummy, --gpu-memory-utilization,
# --max-num-batched-tokens); docs.vllm.ai serving/openai_compatible_server.
# vLLM parses --compilation-config once: a second flag replaces the first, so every key
# (CUDA-graph mode, the multicast-free all-reduce pass) goes into one merged mapping.
VLLM_COMPILATION_FLAGS = ("--compilation-config", "-cc", "-O")

#: NVLink multicast off for every vLLM start (docs/engines.md, "Several GPUs"): vLLM 0.26
#: picks FlashInfer's ``mnnvl`` all-reduce (multicast objects) by itself for TP>1 even with
#: the NCCL/torch switches set; the backend choice and the fused all-reduce pass are forced
#: too. Names from vllm/envs.py and vllm/config/compilation.py (0.26.0).
VLLM_NO_MULTICAST_ENV: dict[str, str] = {
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


def vllm_compilation_config(config: EngineConfig) -> dict[str, Any] | None:
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


def _vllm(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    _refuse(
        config,
        "vLLM",
        gpu_layers="llama.cpp only",
        device="use CUDA_VISIBLE_DEVICES in env",
        prompt_cache_mib="llama.cpp only (vLLM's prefix cache lives in GPU KV blocks)",
    )
    clash = [a for a in config.extra_args if a.split("=")[0] in VLLM_COMPILATION_FLAGS]
    if clash:
        raise UsageError(
            f"vLLM: {clash[0].split('=')[0]} in extra_args would replace crossover's "
            "--compilation-config; put its keys in compilation_config instead"
        )
    argv = ["serve", config.model, "--host", config.host, "--port", str(port)]
    argv += ["--tensor-parallel-size", str(config.tp), "--pipeline-parallel-size", str(config.pp)]
    if config.parallel is not None:
        argv += ["--max-num-seqs", str(config.parallel)]
    if config.context_tokens is not None:
        argv += ["--max-model-len", str(config.context_tokens)]
    if config.max_batched_tokens is not None:
        argv += ["--max-num-batched-tokens", str(config.max_batched_tokens)]
    if config.gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", f"{config.gpu_memory_utilization:g}"]
    if config.dtype:
        argv += ["--dtype", config.dtype]
    if config.quant:
        argv += ["--quantization", config.quant]
    if config.cuda_graphs is False:
        argv.append("--enforce-eager")
    compilation = vllm_compilation_config(config)
    if compilation:
        argv += ["--compilation-config", json.dumps(compilation, sort_keys=True)]
    if config.load_format:
        argv += ["--load-format", config.load_format]
    # config.env is applied over these (launch_spec): a user may still decide otherwise
    return LaunchSpec(argv=argv + list(config.extra_args), env_set=dict(VLLM_NO_MULTICAST_ENV))


# --- SGLang -------------------------------------------------------------------------------
# Flags: python/sglang/srt/server_args.py (--model-path, --tp-size, --pp-size,
# --max-running-requests, --context-length, --chunked-prefill-size, --mem-fraction-static,
# --dtype, --quantization, --disable-cuda-graph, --cuda-graph-max-bs, --load-format,
# --enable-metrics, --enforce-disable-flashinfer-allreduce-fusion); every flag this builder
# and ``crossover plan`` emit is checked against SGLang 0.5.17's own ``--help``
# (tests/fixtures/sglang). 0.5.17 keeps --disable-cuda-graph and --cuda-graph-max-bs as
# deprecated aliases of --cuda-graph-backend-{decode,prefill}=disabled and
# --cuda-graph-max-bs-decode; the aliases are what older releases take too.
#: SGLang >= 0.5 auto-enables FlashInfer's fused all-reduce for several MoE architectures
#: (Qwen3-MoE, DeepSeek-V3, GLM-4-MoE ...) when TP > 1; its "auto" backend is mnnvl (NVLink
#: multicast) on Blackwell (sglang/srt/arg_groups/overrides.py, 0.5.17). Kept off, as for vLLM.
SGLANG_NO_FUSED_ALLREDUCE = "--enforce-disable-flashinfer-allreduce-fusion"


def _sglang(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    _refuse(
        config,
        "SGLang",
        gpu_layers="llama.cpp only",
        device="use CUDA_VISIBLE_DEVICES in env",
        compilation_config="vLLM only",
        prompt_cache_mib="llama.cpp only (its host-RAM prompt cache)",
        flash_attn="pick the kernel with extra_args --attention-backend (fa3, flashinfer, ...)",
    )
    argv = ["--model-path", config.model, "--host", config.host, "--port", str(port)]
    argv += ["--tp-size", str(config.tp), "--pp-size", str(config.pp)]
    if config.parallel is not None:
        argv += ["--max-running-requests", str(config.parallel)]
    if config.context_tokens is not None:
        argv += ["--context-length", str(config.context_tokens)]
    if config.max_batched_tokens is not None:
        argv += ["--chunked-prefill-size", str(config.max_batched_tokens)]
    if config.gpu_memory_utilization is not None:
        argv += ["--mem-fraction-static", f"{config.gpu_memory_utilization:g}"]
    if config.dtype:
        argv += ["--dtype", config.dtype]
    if config.quant:
        argv += ["--quantization", config.quant]
    if config.cuda_graphs is False:
        argv.append("--disable-cuda-graph")  # decode and prefill graphs both (0.5.x)
    elif config.cuda_graphs is True and config.parallel is not None:
        # SGLang's own decode-graph limit depends on GPU memory (8 on a T4, 256 on an
        # H200 with TP < 4, server_args.py); it clamps the captured sizes to
        # --max-running-requests, so asking for `parallel` covers every batch it can run
        argv += ["--cuda-graph-max-bs", str(config.parallel)]
    if config.load_format:
        argv += ["--load-format", config.load_format]
    if config.tp * config.pp > 1 and SGLANG_NO_FUSED_ALLREDUCE not in config.extra_args:
        argv.append(SGLANG_NO_FUSED_ALLREDUCE)
    # /metrics (sglang:generation_tokens_total, the engine-counter witness) needs it
    argv.append("--enable-metrics")
    # config.env is applied over these (launch_spec): a user may still decide otherwise
    return LaunchSpec(argv=argv + list(config.extra_args), env_set=dict(MULTICAST_OFF))


# --- TensorRT-LLM trtllm-serve -----------------------------------------------------------
# Flags: tensorrt_llm/commands/serve.py (--tp_size --pp_size --max_batch_size --max_seq_len
# --extra_llm_api_options). YAML: 1.x top-level ``cuda_graph_config: {enable_padding,
# max_batch_size}`` (``null`` turns graphs off; TorchLlmArgs.cuda_graph_config defaults on);
# 0.20 nests ``pytorch_backend_config: {use_cuda_graph}``. A wrongly nested key is ignored.
def trtllm_extra_options(config: EngineConfig) -> dict[str, object]:
    opts: dict[str, object] = {}
    legacy = (config.engine_version or "").startswith("0.")
    if config.cuda_graphs is not None:
        if legacy:
            backend: dict[str, object] = {"use_cuda_graph": config.cuda_graphs}
            if config.cuda_graphs:
                backend["cuda_graph_padding_enabled"] = True
                if config.parallel is not None:
                    backend["cuda_graph_max_batch_size"] = config.parallel
            opts["pytorch_backend_config"] = backend
        elif config.cuda_graphs:
            graphs: dict[str, object] = {"enable_padding": True}
            if config.parallel is not None:
                graphs["max_batch_size"] = config.parallel
            opts["cuda_graph_config"] = graphs
        else:
            opts["cuda_graph_config"] = None
    if config.dtype:
        opts["dtype"] = config.dtype
    return opts


def _trtllm(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    _refuse(
        config,
        "trtllm-serve",
        quant="the quantization is the checkpoint's (ModelOpt); pick a quantized checkpoint",
        gpu_layers="llama.cpp only",
        device="use CUDA_VISIBLE_DEVICES in env",
        load_format="not a trtllm-serve option",
        compilation_config="vLLM only",
        prompt_cache_mib="llama.cpp only (its host-RAM prompt cache)",
    )
    argv = [config.model, "--host", config.host, "--port", str(port)]
    argv += ["--tp_size", str(config.tp), "--pp_size", str(config.pp)]
    if config.parallel is not None:
        argv += ["--max_batch_size", str(config.parallel)]
    if config.context_tokens is not None:
        argv += ["--max_seq_len", str(config.context_tokens)]
    if config.max_batched_tokens is not None:
        argv += ["--max_num_tokens", str(config.max_batched_tokens)]
    if config.gpu_memory_utilization is not None:
        argv += ["--kv_cache_free_gpu_memory_fraction", f"{config.gpu_memory_utilization:g}"]
    files: dict[Path, str] = {}
    opts = trtllm_extra_options(config)
    if opts:
        if "--extra_llm_api_options" in config.extra_args:
            raise UsageError(
                "trtllm-serve: give either cuda_graphs/dtype or your own --extra_llm_api_options"
            )
        import yaml

        path = workdir / f"trtllm-extra-options-{port}.yaml"
        files[path] = yaml.safe_dump(opts, sort_keys=True)
        argv += ["--extra_llm_api_options", str(path)]
    return LaunchSpec(argv=argv + list(config.extra_args), files=files)


# --- Triton Inference Server (tensorrt_llm backend) ----------------------------------------
# Flags: tritonserver --help (--model-repository, --http-port, --http-address, --allow-grpc,
# --allow-metrics); health /v2/health/ready (KServe v2 protocol, docs/protocol).
def _triton(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    _refuse(
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


ADAPTERS: dict[str, EngineAdapter] = {
    "llamacpp": EngineAdapter(
        name="llamacpp",
        display_name="llama-server",
        dialect="llamacpp",
        default_executable=("llama-server",),
        build=_llamacpp,
        health_path="/health",  # 503 while loading, 200 when ready (tools/server/README.md)
        metrics_path="/metrics",
        # tools/server/server-task.cpp (0.3.36 vendor); kv_cache_usage_ratio is in older builds
        metric_names=(
            "llamacpp:requests_processing",
            "llamacpp:requests_deferred",
            "llamacpp:n_busy_slots_per_decode",
            "llamacpp:tokens_predicted_total",
            "llamacpp:prompt_tokens_total",
            "llamacpp:n_decode_total",
            "llamacpp:kv_cache_usage_ratio",
        ),
        version_probes=(
            VersionProbe("http", ("/props",), json_key="build_info"),
            # common/build-info.cpp.in: "version: %s (build %d, commit %s)" on stderr
            VersionProbe("cmd", ("--version",), regex=r"version: (.+?)\s*$"),
        ),
        log_patterns=lp.LLAMACPP + logs_moe.LLAMACPP_MOE,
        absence_rules=lp.LLAMACPP_ABSENT,
        warning_rules=logs_moe.LLAMACPP_WARN,
        detect=lp.DETECT["llamacpp"],
        model_is_local=True,
        source="llama.cpp common/arg.cpp, tools/server/README.md",
    ),
    "transformers": EngineAdapter(
        name="transformers",
        display_name="transformers serve",
        dialect="transformers",
        default_executable=("python3", "-c", TRANSFORMERS_ENTRY),
        build=_transformers,
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
        detect=lp.DETECT["transformers"],
        model_is_local=True,
        source="transformers src/transformers/cli/serve.py; docs/engines.md (transformers serve)",
    ),
    "vllm": EngineAdapter(
        name="vllm",
        display_name="vLLM",
        dialect="vllm",
        default_executable=("vllm",),
        build=_vllm,
        health_path="/health",
        metrics_path="/metrics",
        metric_names=(
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:kv_cache_usage_perc",
            "vllm:time_to_first_token_seconds",
            "vllm:inter_token_latency_seconds",
        ),
        version_probes=(VersionProbe("http", ("/version",), json_key="version"),),
        log_patterns=lp.VLLM + logs_moe.VLLM_MOE,
        absence_rules=lp.VLLM_ABSENT,
        warning_rules=logs_moe.VLLM_WARN,
        detect=lp.DETECT["vllm"],
        model_is_local=False,
        source="vllm/engine/arg_utils.py; docs.vllm.ai/en/latest/cli/serve.html",
    ),
    "sglang": EngineAdapter(
        name="sglang",
        display_name="SGLang",
        dialect="sglang",
        default_executable=("python3", "-m", "sglang.launch_server"),
        build=_sglang,
        health_path="/health",
        metrics_path="/metrics",  # only with --enable-metrics
        metric_names=(
            "sglang:token_usage",
            "sglang:num_running_reqs",
            "sglang:num_queue_reqs",
            "sglang:generation_tokens_total",
        ),
        version_probes=(
            VersionProbe("http", ("/get_server_info",), json_key="version"),
            VersionProbe("http", ("/version",), json_key="version"),
        ),
        log_patterns=logs_sglang.SGLANG,
        absence_rules=logs_sglang.SGLANG_ABSENT,
        warning_rules=logs_sglang.SGLANG_WARN,
        detect=lp.DETECT["sglang"],
        model_is_local=False,
        source="sglang python/sglang/srt/server_args.py; docs.sglang.ai backend/server_arguments",
    ),
    "trtllm": EngineAdapter(
        name="trtllm",
        display_name="trtllm-serve",
        dialect="trtllm",
        default_executable=("trtllm-serve",),
        build=_trtllm,
        health_path="/health",
        metrics_path="/prometheus/metrics",
        metric_names=(),  # names differ by release: scrape what /prometheus/metrics lists
        version_probes=(VersionProbe("http", ("/version",), json_key="version"),),
        log_patterns=lp.TRTLLM,
        absence_rules=lp.TRTLLM_ABSENT,
        detect=lp.DETECT["trtllm"],
        model_is_local=False,
        source="tensorrt_llm/commands/serve.py; tensorrt_llm/llmapi/llm_args.py",
    ),
    "triton": EngineAdapter(
        name="triton",
        display_name="tritonserver",
        dialect="triton",
        default_executable=("tritonserver",),
        build=_triton,
        health_path="/v2/health/ready",
        metrics_path=None,  # metrics are on their own port (8002 by default): --metrics-port
        metric_names=("nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics"),
        version_probes=(VersionProbe("http", ("/v2",), json_key="version"),),
        log_patterns=lp.TRITON,
        absence_rules=(),
        detect=lp.DETECT["triton"],
        model_is_local=True,
        source="triton-inference-server/server docs/customization_guide; tritonserver --help",
    ),
}


def get_adapter(engine: str) -> EngineAdapter:
    try:
        return ADAPTERS[engine]
    except KeyError:
        raise UsageError(
            f"unknown engine {engine!r}; choose one of {', '.join(ADAPTERS)}"
        ) from None


def launch_spec(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    """The complete argv (executable included) and environment changes for ``config``."""
    adapter = get_adapter(config.engine)
    spec = adapter.build(config, port, workdir)
    env_set = {**spec.env_set, **config.env}
    return LaunchSpec(
        argv=adapter.executable(config) + spec.argv,
        env_set=env_set,
        env_unset=tuple(k for k in spec.env_unset if k not in config.env),
        files=spec.files,
    )
