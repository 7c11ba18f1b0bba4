"""Startup-log patterns that reveal the settings an engine actually used.

Each pattern names its origin: the source file that prints the line (engine repo path)
or a log captured on this project's machines (*seen here*). For one setting, patterns
are listed strongest first; the first pattern that matches anywhere in the log wins.
``AbsenceRule``s read a setting from a line that is *missing* once the server is ready
(graph capture is logged before serving starts, so no capture line means no graphs).

Canonical settings: ``crossover.engines.effective.SETTINGS`` (first_decode_ms_per_token
is a timing hint, not a setting). SGLang's patterns are in ``logs_sglang``, the MoE lines
of vLLM and llama.cpp in ``logs_moe``; ``WarningRule``s pick out lines the user must see.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

Value = bool | int | float | str

LLAMA_GRAPHS_ENV = "GGML_CUDA_DISABLE_GRAPHS"


@dataclass(frozen=True)
class LogPattern:
    """``value`` reads the setting from a matching line; ``None`` means this line does not
    settle it (a key missing from a repr, a phase not switched off), so the search goes on."""

    setting: str
    regex: re.Pattern[str]
    value: Callable[[re.Match[str]], Value | None]
    origin: str
    evidence: Callable[[re.Match[str]], str] | None = None  # default: the line near the match


@dataclass(frozen=True)
class AbsenceRule:
    """``setting`` is ``value`` when every ``ready`` regex matched but ``missing`` never did."""

    setting: str
    value: Value
    missing: re.Pattern[str]
    ready: tuple[re.Pattern[str], ...]
    origin: str


@dataclass(frozen=True)
class WarningRule:
    """A log line the user must see (a kernel config fallen back to defaults, a kernel
    compiled while serving). ``message`` is formatted with the first match's groups,
    ``count`` (how many lines matched) and the words that agree with it (``count_words``:
    ``{count} line{s} {are}``, never ``1 lines are``), and what ``gather`` makes of every
    matching line. Where the log has a ``context`` line, the matches after the first one
    mean something else (SGLang's long collections with its collector already frozen): the
    finding is ``context_message`` over those, with ``context_before`` appended where some
    came before it (formatted alike over those: ``count``, ``s``, ``are`` and ``gather``'s
    fields), or ``context_none_after`` over the matches before it where none came after."""

    key: str
    level: str  # "warning" or "note"
    regex: re.Pattern[str]
    message: str
    origin: str
    #: more fields for ``message`` from every matching line (a range over all of them,
    #: not the first's alone); None: the first match's groups and the count suffice
    gather: Callable[[list[re.Match[str]]], dict[str, object]] | None = None
    #: a line after which the matches mean something else (the class's docstring)
    context: re.Pattern[str] | None = None
    context_message: str | None = None
    context_before: str | None = None
    context_none_after: str | None = None

    def __post_init__(self) -> None:
        texts = (self.context_message, self.context_before, self.context_none_after)
        if (self.context is None) != all(t is None for t in texts) or (
            self.context is not None and any(t is None for t in texts)
        ):
            raise ValueError(
                f"{self.key}: context, context_message, context_before and "
                "context_none_after go together"
            )


#: the key of a ``WarningRule`` for an engine's long garbage collections: its regex's
#: group 1 is the generation, group 2 the seconds (``crossover.analysis.gc`` ties each to
#: the runs it fell in); its ``context``, where it has one, is the engine's line for its
#: collector frozen (a collection after one came frozen)
LONG_GC_KEY = "long_gc"


def count_words(count: int) -> dict[str, object]:
    """What a ``WarningRule`` message is formatted with besides the groups: ``count`` and
    the words that agree with it, ``s`` (a plural's ending) and ``are``."""
    return {"count": count, "s": "" if count == 1 else "s", "are": "is" if count == 1 else "are"}


def _p(
    setting: str, regex: str, value: Callable[[re.Match[str]], Value | None], origin: str
) -> LogPattern:
    return LogPattern(setting, re.compile(regex), value, origin)


def g1_int(m: re.Match[str]) -> Value:
    return int(m.group(1).replace(",", ""))


def g1_float(m: re.Match[str]) -> Value:
    return float(m.group(1))


def g1_str(m: re.Match[str]) -> Value:
    return m.group(1).strip()


def g1_lower(m: re.Match[str]) -> Value:
    return m.group(1).strip().lower()


def g1_py_true(m: re.Match[str]) -> Value:
    return m.group(1) == "True"


def g1_py_false(m: re.Match[str]) -> Value:
    return m.group(1) != "True"


def const(value: Value) -> Callable[[re.Match[str]], Value]:
    def _value(m: re.Match[str]) -> Value:
        return value

    return _value


def _mib_to_gib(m: re.Match[str]) -> Value:
    return round(float(m.group(1)) / 1024.0, 3)


def _none_or_lower(m: re.Match[str]) -> Value:
    raw = (m.group(1) or "none").strip("'\"")
    return "none" if raw in ("None", "") else raw.lower()


def _on_off(m: re.Match[str]) -> Value:
    return m.group(1).strip().lower() in ("1", "on", "true", "enabled")


def _cuda_device(m: re.Match[str]) -> Value:
    return f"{m.group(1)} (compute capability {m.group(2)})"


def _vllm_graph_mode(m: re.Match[str]) -> Value:
    return m.group(1) != "NONE"


_LLAMA_SRC = "llama.cpp (vendored in llama-cpp-python 0.3.36)"
_LLAMA_CUDA = f"{_LLAMA_SRC} ggml/src/ggml-cuda/ggml-cuda.cu"
# The default log (-lv 3) never states whether CUDA graphs ran: "graphs reused" counts ggml
# compute-graph reuse and appears either way (seen here). At -lv 5 (debug) the CUDA backend
# logs graph reuse and warmup (GGML_LOG_DEBUG); with GGML_CUDA_DISABLE_GRAPHS=1 it logs
# nothing of the kind (both seen here on the H200, 2026-11-30).
LLAMA_GRAPH_USED = r"CUDA graph warmup complete|CUDA Graph id \d+ reused"
LLAMACPP: tuple[LogPattern, ...] = (
    _p("cuda_graphs", LLAMA_GRAPH_USED, const(True), f"{_LLAMA_CUDA} (debug, -lv 5); seen here"),
    # Printed when -ngl is given to a build without GPU support (seen here, CPU build).
    _p(
        "cuda_graphs",
        r"no usable GPU found, --gpu-layers option will be ignored",
        const(False),
        f"{_LLAMA_SRC} common/arg.cpp; seen here",
    ),
    _p(
        "cuda_graphs",
        r"disabling CUDA graphs due to (.+)",
        const(False),
        f"{_LLAMA_CUDA} ggml_cuda_graph_set_enabled (debug, -lv 5)",
    ),
    # The CUDA feature list names USE_GRAPHS only in builds with GGML_CUDA_USE_GRAPHS.
    _p(
        "cuda_graphs",
        r"system_info: .*\| CUDA : (?!.*USE_GRAPHS = 1)",
        const(False),
        f"{_LLAMA_CUDA} ggml_backend_cuda_get_features; common/common.cpp (-lv 4)",
    ),
    _p(
        "device",
        r"(no usable GPU) found, --gpu-layers option will be ignored",
        const("cpu"),
        f"{_LLAMA_SRC} common/arg.cpp; seen here",
    ),
    _p(
        "device",
        r"using device (\w+ \([^)]+\))",
        g1_str,
        f"{_LLAMA_SRC} src/llama.cpp llama_prepare_model_devices (-lv 4); seen here",
    ),
    _p(
        "parallel_slots",
        r"load_model: initializing, n_slots = (\d+)",
        g1_int,
        f"{_LLAMA_SRC} tools/server/server-context.cpp SRV_INF; seen here",
    ),
    _p(
        "parallel_slots",
        r"initializing slots, n_slots = (\d+)",
        g1_int,
        "llama.cpp older tools/server/server.cpp",
    ),
    _p(
        "context_tokens",
        r"n_slots = \d+, n_ctx_slot = (\d+)",
        g1_int,
        f"{_LLAMA_SRC} tools/server/server-context.cpp; seen here",
    ),
    _p(
        "kv_unified",
        r"kv_unified = '(true|false)'",
        _on_off,
        f"{_LLAMA_SRC} tools/server/server-context.cpp",
    ),
    _p(
        "threads",
        r"llama threadpool init, n_threads = (\d+)",
        g1_int,
        f"{_LLAMA_SRC} common/common.cpp; seen here",
    ),
    _p(
        "device",
        r"Device \d+: (.+?), compute capability (\d+\.\d+)",
        _cuda_device,
        f"{_LLAMA_SRC} ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_init",
    ),
    _p(
        "gpu_layers",
        r"offloaded (\d+)/\d+ layers to GPU",
        g1_int,
        f"{_LLAMA_SRC} src/llama-model.cpp",
    ),
    _p(
        "context_total_tokens",
        r"llama_context: n_ctx\s+= (\d+)",
        g1_int,
        f"{_LLAMA_SRC} src/llama-context.cpp",
    ),
    _p(
        "flash_attn",
        r"llama_context: flash_attn\s+= (\w+)",
        _on_off,
        f"{_LLAMA_SRC} src/llama-context.cpp",
    ),
    _p(
        "kv_cache_gib",
        r"llama_kv_cache\w*: +size = +([\d.]+) MiB",
        _mib_to_gib,
        f"{_LLAMA_SRC} src/llama-kv-cache.cpp",
    ),
    _p(
        "kv_cache_tokens",
        r"llama_kv_cache\w*: +size = +[\d.]+ MiB \( *(\d+) cells",
        g1_int,
        f"{_LLAMA_SRC} src/llama-kv-cache.cpp",
    ),
    _p(
        "quant",
        r"file type\s+= (.+)$",
        g1_lower,
        f"{_LLAMA_SRC} src/llama-model-loader.cpp print_info",
    ),
    _p(
        "version",
        r"version: (\S+ \(build \d+, commit \w+\))",
        g1_str,
        f"{_LLAMA_SRC} common/build-info.cpp.in",
    ),
    _p(
        "version",
        r"common_params_print_info: build (\d+ \(\w+\))",
        g1_str,
        f"{_LLAMA_SRC} common/common.cpp (-lv 4); seen here",
    ),
    _p("version", r"build: (\d+ \(\w+\))", g1_str, "llama.cpp older common/common.cpp"),
    # "| eval time" (not "prompt eval time"): the first request's decode rate, a hint only.
    _p(
        "first_decode_ms_per_token",
        r"\|\s+eval time =\s+[\d.]+ ms /\s+\d+ tokens \(\s*([\d.]+) ms per token",
        g1_float,
        f"{_LLAMA_SRC} tools/server/server-context.cpp print_timing; seen here",
    ),
)

# transformers serve: seen here (logs/transformers-serve-*.log, transformers 5.17.0).
# 5.17 logs neither CUDA graphs nor the device; the launch argv is the only record there.
# 5.20 says when continuous batching turns the graphs it was asked for off (a warning, in
# the default log) and, at --log-level info, which paths use them
# (generation/continuous_batching/initialization.py; the warning seen here on the CPU).
_TF_CB = "transformers 5.20 src/transformers/generation/continuous_batching/initialization.py"


def _tf_graph_paths(m: re.Match[str]) -> Value:
    return "True" in m.group(1)


TRANSFORMERS: tuple[LogPattern, ...] = (
    _p(
        "cuda_graphs",
        r"use_cuda_graph = True but no graph backend is available: turning off accelerator graphs",
        const(False),
        f"{_TF_CB}; seen here (CPU)",
    ),
    _p(
        "cuda_graphs",
        r"Using cuda graphs for \(varlen, decode\) paths: \(([^)]*)\)",
        _tf_graph_paths,
        _TF_CB,
    ),
    _p(
        "continuous_batching",
        r"\[Request received\] Model: .*, CB: (True|False)",
        g1_py_true,
        "transformers src/transformers/cli/serve.py; seen here",
    ),
    _p("model", r"^\[transformers\] Loading (.+?)(?:@\S+)?$", g1_str, "seen here"),
)

LLAMACPP_ABSENT: tuple[AbsenceRule, ...] = (
    AbsenceRule(
        "cuda_graphs",
        False,
        re.compile(LLAMA_GRAPH_USED),
        (
            re.compile(r"verbosity = 5"),  # debug lines are in this log
            re.compile(r"- CUDA\d+\s+:|using device CUDA\d+"),  # on a CUDA device
            re.compile(r"\|\s+eval time =\s+[\d.]+ ms /\s+(?:[2-9]|\d\d+) tokens"),  # decoded
        ),
        f"{_LLAMA_CUDA}: at -lv 5 graph use is logged on the first decodes; seen here",
    ),
)


def _vllm_compile_mode(m: re.Match[str]) -> Value:
    return m.group(1) != "NONE"


def _vllm_backends(m: re.Match[str]) -> Value:
    return ",".join(b.strip(" '\"") for b in m.group(1).split(",") if b.strip(" '\""))


#: a log line (never crossover's launch header) that shows an NVLink-multicast all-reduce:
#: FlashInfer's mnnvl backend, or NCCL NVLS / symmetric-memory multicast in use. Any engine;
#: the lifecycle stops an engine at once on such a line when multicast is switched off.
MULTICAST_LINE = (
    r"^(?!# crossover-launch:).*(?:\bmnnvl\b|\bMNNVL\b|NVLS (?:enabled|is enabled)|"
    r"multicast (?:object|memory|buffer)s? (?:created|allocated))"
)


_VLLM_CFG = "vllm/v1/engine/core.py 'Initializing a V1 LLM engine (v%s) with config: %s'"
VLLM: tuple[LogPattern, ...] = (
    _p(
        "cuda_graphs",
        r"Graph capturing finished in \d+ secs?",
        const(True),
        "vllm/v1/worker/gpu_model_runner.py capture_model",
    ),
    _p("cuda_graphs", r"'cudagraph_mode': <CUDAGraphMode\.(\w+)", _vllm_graph_mode, _VLLM_CFG),
    _p("cuda_graphs", r"enforce_eager=(True)", g1_py_false, _VLLM_CFG),
    _p("version", r"Initializing a V1 LLM engine \(v([^)]+)\)", g1_str, _VLLM_CFG),
    _p("tp", r"with config: .*?\btensor_parallel_size=(\d+)", g1_int, _VLLM_CFG),
    _p("pp", r"with config: .*?\bpipeline_parallel_size=(\d+)", g1_int, _VLLM_CFG),
    _p("quant", r"with config: .*?\bquantization=([\w-]+)", _none_or_lower, _VLLM_CFG),
    _p("dtype", r"with config: .*?\bdtype=torch\.(\w+)", g1_str, _VLLM_CFG),
    _p("context_tokens", r"with config: .*?\bmax_seq_len=(\d+)", g1_int, _VLLM_CFG),
    _p(
        "quant_kernel",
        r"(?:Selected|Using) (\w+Kernel) for (\w+)",
        g1_str,
        "vllm/model_executor/layers/quantization/kernels/*/__init__.py",
    ),
    _p(
        "kv_cache_tokens",
        r"GPU KV cache size: ([\d,]+) tokens",
        g1_int,
        "vllm/v1/core/kv_cache_utils.py",
    ),
    _p(
        "kv_cache_gib",
        r"Available KV cache memory: ([\d.]+) GiB",
        g1_float,
        "vllm/v1/worker/gpu_worker.py",
    ),
    _p(
        "max_batched_tokens",
        r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)",
        g1_int,
        "vllm/config/scheduler.py; seen here (0.26.0)",
    ),
    _p(
        "gpu_memory_utilization",
        r"Desired GPU memory utilization is \(([\d.]+),",
        g1_float,
        "vllm/v1/worker/gpu_worker.py; seen here (0.26.0)",
    ),
    _p(
        "torch_compile",
        r"compilation_config=\{'mode': <CompilationMode\.(\w+)",
        _vllm_compile_mode,
        _VLLM_CFG,
    ),
    _p(
        "allreduce_backends",
        r"Using \[([^\]]*)\] all-reduce backends",
        _vllm_backends,
        "vllm/distributed/device_communicators/cuda_communicator.py; seen here (0.26.0)",
    ),
    _p(
        "multicast",
        MULTICAST_LINE,
        const(True),
        "FlashInfer mnnvl all-reduce (NVLink multicast); seen here, 2xH200, 2026-11-30",
    ),
)
VLLM_ABSENT: tuple[AbsenceRule, ...] = (
    AbsenceRule(
        "cuda_graphs",
        False,
        re.compile(r"Graph capturing finished|Capturing CUDA graphs"),
        (re.compile(r"Starting vLLM (?:API )?server|Application startup complete"),),
        "vllm/v1/worker/gpu_model_runner.py: capture precedes the API server start",
    ),
    AbsenceRule(
        "multicast",
        False,
        re.compile(MULTICAST_LINE),
        (re.compile(r"Starting vLLM (?:API )?server|Application startup complete"),),
        "all-reduce backends are chosen before the API server starts; seen here (0.26.0)",
    ),
)

_TRT_ENGINE = "TensorRT-LLM tensorrt_llm/_torch/pyexecutor/model_engine.py"
_TRT_KV = "TensorRT-LLM cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp"
_TRT_EXEC = "TensorRT-LLM tensorrt_llm/_torch/pyexecutor/py_executor_creator.py"
#: lines of TensorRT-LLM's runtime, which trtllm-serve and Triton's tensorrt_llm backend
#: both print: the KV cache it allocated, and its MPI world
_TRT_KV_CACHE: tuple[LogPattern, ...] = (
    _p("kv_cache_tokens", r"for max tokens in paged KV cache \((\d+)\)", g1_int, _TRT_KV),
    _p(
        "kv_cache_gib",
        r"Allocated ([\d.]+) GiB for max tokens in paged KV cache",
        g1_float,
        _TRT_KV,
    ),
)
_TRT_WORLD_SIZE = _p(
    "world_size",
    r"MPI size: (\d+)",
    g1_int,
    "TensorRT-LLM cpp/tensorrt_llm/common/mpiUtils.cpp",
)
TRTLLM: tuple[LogPattern, ...] = (
    _p(
        "cuda_graphs",
        r"Creating CUDA graph instances for (\d+) batch sizes",
        const(True),
        _TRT_ENGINE,
    ),
    _p("cuda_graphs", r"Run generation only CUDA graph warmup", const(True), _TRT_ENGINE),
    *_TRT_KV_CACHE,
    _p(
        "parallel_slots",
        r"max_seq_len=\d+, max_num_requests=\d+, .*?max_batch_size=(\d+)",
        g1_int,
        _TRT_EXEC,
    ),
    _p("parallel_slots", r"max_seq_len=\d+, max_num_requests=(\d+)", g1_int, _TRT_EXEC),
    _p(
        "context_tokens",
        r"\[TRT-LLM\] \[I\] max_seq_len=(\d+), max_num_requests",
        g1_int,
        _TRT_EXEC,
    ),
    _p("tp", r"\btp_size=(\d+)", g1_int, "tensorrt_llm/mapping.py Mapping repr (best knowledge)"),
    _TRT_WORLD_SIZE,
    _p(
        "quant",
        r"quant_algo=<?QuantAlgo\.(\w+)",
        g1_lower,
        "tensorrt_llm/models/modeling_utils.py QuantConfig repr (best knowledge)",
    ),
)
TRTLLM_ABSENT: tuple[AbsenceRule, ...] = (
    AbsenceRule(
        "cuda_graphs",
        False,
        re.compile(r"Creating CUDA graph instances|CUDA graph warmup"),
        (re.compile(r"Application startup complete|Uvicorn running on"),),
        f"{_TRT_ENGINE}: graphs are captured during warmup, before the HTTP server starts",
    ),
)

_TRITON = "triton-inference-server/server src/ (model table, HTTPService)"
TRITON: tuple[LogPattern, ...] = (
    _p("version", r"\|\s*server_version\s*\|\s*(\S+)", g1_str, _TRITON),
    *_TRT_KV_CACHE,
    _p(
        "parallel_slots",
        r"TRTGptModel maxBatchSize: (\d+)",
        g1_int,
        "TensorRT-LLM trtGptModelInflightBatching.cpp",
    ),
    _TRT_WORLD_SIZE,
)
