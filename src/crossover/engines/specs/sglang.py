"""SGLang (``python -m sglang.launch_server``).

Flags: python/sglang/srt/server_args.py (--model-path, --tp-size, --pp-size,
--max-running-requests, --context-length, --chunked-prefill-size, --mem-fraction-static,
--dtype, --quantization, --disable-cuda-graph, --cuda-graph-max-bs, --load-format,
--enable-metrics, --enforce-disable-flashinfer-allreduce-fusion); every flag this builder
and ``crossover plan`` emit is checked against SGLang 0.5.17's own ``--help``
(tests/fixtures/sglang). 0.5.17 keeps --disable-cuda-graph and --cuda-graph-max-bs as
deprecated aliases of --cuda-graph-backend-{decode,prefill}=disabled and
--cuda-graph-max-bs-decode; the aliases are what older releases take too. Its log
patterns are in ``crossover.engines.logs_sglang``.
"""

from __future__ import annotations

from pathlib import Path

from crossover.dialects import SGLangDialect
from crossover.engines import logs_sglang
from crossover.engines.config import EngineConfig
from crossover.engines.flags import Flag, FlagTable, GpuAsk, Switch, fmt_g
from crossover.engines.launchrec import Fact
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
    VersionProbe,
    refuse,
    split_plan_fields,
)
from crossover.multicast import MULTICAST_OFF

NAME = "sglang"

GC_WARNING = "--gc-warning-threshold-secs"
#: crossover's default for ``gc_warning_s``: SGLang's is 0 (off), so its front end's
#: collections of ~0.5 s (a million objects, measured on an H100: docs/engines.md) go
#: unseen without it; 0.05 logs those and leaves the frequent short ones out
GC_WARNING_S = 0.05

FLAGS = FlagTable(
    flags=(
        # --tp: argparse's abbreviation of --tp-size, as SGLang's docs write it (--pp is
        # ambiguous there: --pp-size, --pp-max-micro-batch-size, ...)
        Flag(
            "tp",
            ("--tp-size", "--tensor-parallel-size", "--tp"),
            "tp",
            requested=True,
            echoed=True,
        ),
        Flag("pp", ("--pp-size", "--pipeline-parallel-size"), "pp", requested=True, echoed=True),
        # read back only (launch_gpus); --dp as SGLang's docs write it, like --tp
        Flag("dp", ("--dp-size", "--data-parallel-size", "--dp")),
        Flag("ep", ("--ep-size",), requested=True, echoed=True),
        Flag(
            "parallel_slots",
            ("--max-running-requests",),
            "parallel",
            requested=True,
            echoed=True,
        ),
        Flag(
            "context_tokens", ("--context-length",), "context_tokens", requested=True, echoed=True
        ),
        Flag(
            "max_batched_tokens",
            ("--chunked-prefill-size",),
            "max_batched_tokens",
            requested=True,
            echoed=True,
        ),
        Flag(
            "gpu_memory_utilization",
            ("--mem-fraction-static",),
            "gpu_memory_utilization",
            requested=True,
            echoed=True,
            render=fmt_g,
        ),
        Flag("dtype", ("--dtype",), "dtype", requested=True, echoed=True),
        Flag("quant", ("--quantization",), "quant", requested=True, echoed=True),
        Flag(
            "cuda_graph_max_bs",
            ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
            requested=True,
            echoed=True,
        ),
        Flag("load_format", ("--load-format",), "load_format", echoed=True),
        Flag("schedule_policy", ("--schedule-policy",), echoed=True),
        Flag("tokenizer_workers", ("--tokenizer-worker-num",), echoed=True),
        Flag("stream_interval", ("--stream-interval",), echoed=True),
        Flag("attention_backend", ("--attention-backend",), echoed=True),
        # times every collection of its front end, logs the long ones (nothing else
        # changes); in 0.5.17's server_args.py, gc_warning_threshold_secs: float = 0.0
        Flag("gc_warning_s", (GC_WARNING,), "gc_warning_s", render=fmt_g),
    ),
    switches=(
        Switch("--disable-cuda-graph", "cuda_graphs", False, requested=True, echoed=True),
        Switch("--enable-metrics", "metrics", True, echoed=True),
        Switch("--enable-mixed-chunk", "mixed_chunk", True, echoed=True),
        Switch("--enable-torch-compile", "torch_compile", True, echoed=True),
    ),
)  # fmt: skip

#: SGLang >= 0.5 auto-enables FlashInfer's fused all-reduce for several MoE architectures
#: (Qwen3-MoE, DeepSeek-V3, GLM-4-MoE ...) when TP > 1; its "auto" backend is mnnvl (NVLink
#: multicast) on Blackwell (sglang/srt/arg_groups/overrides.py, 0.5.17). Kept off, as for vLLM.
NO_FUSED_ALLREDUCE = "--enforce-disable-flashinfer-allreduce-fusion"


#: SGLang's own decode-graph limit where crossover asks for none: by GPU memory, 256 at
#: most below TP 4 (8 on a T4, 24 on a 4090, 256 on an H100/H200; server_args.py, 0.5.x)
GRAPH_MAX_BS_BELOW_TP4 = 256


#: SGLang's own list of decode batch sizes to capture: given, it sets the largest itself
GRAPH_BS = "--cuda-graph-bs"


def launch_notes(config: EngineConfig) -> list[str]:
    """A ``parallel`` above the decode batches SGLang captures graphs for, where nothing
    asks for more: the larger batches decode without graphs (measured, docs/engines.md).
    TP x PP as the launch gives them, ``extra_args`` included (``--tp 4`` there is TP 4)."""
    if config.cuda_graphs is not None or config.parallel is None:
        return []
    # read as launch_gpus reads a launch: extra_args, given after the config's, win
    ask = FLAGS.gpus("tp", "pp")(FLAGS.args(config, "tp", "pp") + config.extra_args)
    if ask is None or ask.count >= 4:
        return []
    if config.parallel <= GRAPH_MAX_BS_BELOW_TP4 or "--disable-cuda-graph" in config.extra_args:
        return []
    if FLAGS.given(config.extra_args, "cuda_graph_max_bs") is not None or any(
        a.partition("=")[0] == GRAPH_BS for a in config.extra_args
    ):
        return []
    return [
        f"parallel {config.parallel} is above the decode batches SGLang captures CUDA graphs "
        f"for on its own (at most {GRAPH_MAX_BS_BELOW_TP4} below TP 4, by GPU memory): "
        f"decode batches above that run without graphs, slower per token (on an H100, "
        "parallel 512 at 20 requests/s ran up to 402 requests at TPOT p50 76 ms against "
        "43-45 ms with 256 slots); cuda_graphs: true captures them up to parallel"
    ]


def build(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    refuse(
        config,
        "SGLang",
        gpu_layers="llama.cpp only",
        device="use CUDA_VISIBLE_DEVICES in env",
        compilation_config="vLLM only",
        prompt_cache_mib="llama.cpp only (its host-RAM prompt cache)",
        flash_attn="pick the kernel with extra_args --attention-backend (fa3, flashinfer, ...)",
    )
    argv = ["--model-path", config.model, "--host", config.host, "--port", str(port)]
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
        argv.append("--disable-cuda-graph")  # decode and prefill graphs both (0.5.x)
    elif config.cuda_graphs is True and config.parallel is not None:
        # SGLang's own decode-graph limit depends on GPU memory (8 on a T4, 256 on an
        # H200 with TP < 4, server_args.py); it clamps the captured sizes to
        # --max-running-requests, so asking for `parallel` covers every batch it can run
        argv += ["--cuda-graph-max-bs", str(config.parallel)]
    argv += FLAGS.args(config, "load_format")
    if config.tp * config.pp > 1 and NO_FUSED_ALLREDUCE not in config.extra_args:
        argv.append(NO_FUSED_ALLREDUCE)
    # /metrics (sglang:generation_tokens_total, the engine-counter witness) needs it
    argv.append("--enable-metrics")
    # usage.prompt_tokens_details.cached_tokens, the prefix-cache evidence of every run
    # (off by default in SGLang: the H200 prefix sweep of 2026-12-02 got none without it)
    if "--enable-cache-report" not in config.extra_args:
        argv.append("--enable-cache-report")
    # SGLang's long garbage collections logged (logs_sglang.LONG_GC), unless the user's
    # extra_args set the threshold themselves (theirs wins, never given twice)
    gc_s = GC_WARNING_S if config.gc_warning_s is None else config.gc_warning_s
    if gc_s > 0 and FLAGS.given(config.extra_args, "gc_warning_s") is None:
        argv += [GC_WARNING, fmt_g(gc_s)]
    # config.env is applied over these (launch_spec): a user may still decide otherwise
    return LaunchSpec(argv=argv + list(config.extra_args), env_set=dict(MULTICAST_OFF))


def derive(facts: dict[str, Fact]) -> None:
    """ServerArgs says dtype='auto'; a 16/32-bit KV cache has the model's dtype unless
    --kv-cache-dtype said otherwise (sglang model_runner: kv_cache_dtype='auto')."""
    kv = facts.get("kv_cache_dtype")
    if "dtype" not in facts and kv is not None and kv.value in ("bfloat16", "float16", "float32"):
        facts["dtype"] = kv.model_copy(
            update={
                "setting": "dtype",
                "note": "dtype='auto': read from the KV cache's dtype, which follows "
                "the model's unless --kv-cache-dtype is given",
            }
        )


def plan_fields(s: PlanLaunch) -> PlanFields:
    return split_plan_fields(s, SPEC.ep_flag)


#: a launch over several nodes: this node's share of tp x pp is not guessed
MULTI_NODE = ("--nnodes", "--node-rank", "--dist-init-addr")
_TP_PP = FLAGS.gpus("tp", "pp", unknown=MULTI_NODE)
_DP_TP_PP = FLAGS.gpus("tp", "pp", "dp", unknown=MULTI_NODE)


def launch_gpus(argv: list[str]) -> GpuAsk | None:
    """tp x pp x dp: without ``--enable-dp-attention`` SGLang's data-parallel controller
    starts ``--dp-size`` workers of tp x pp GPUs each on this node; with it the dp
    ranks split the attention of the same tp GPUs (dp at most tp), so tp x pp."""
    return (_TP_PP if "--enable-dp-attention" in argv else _DP_TP_PP)(argv)


SPEC = EngineSpec(
    name=NAME,
    display_name="SGLang",
    dialect=SGLangDialect(name=NAME),
    default_executable=("python3", "-m", "sglang.launch_server"),
    build=build,
    flags=FLAGS,
    health_path="/health",
    metrics_path="/metrics",  # only with --enable-metrics
    metric_names=(
        "sglang:token_usage",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:generation_tokens_total",
    ),
    kv_usage_metric="sglang:token_usage",
    waiting_metric="sglang:num_queue_reqs",
    running_metric="sglang:num_running_reqs",
    # added per finished request, in the tokenizer manager's output loop that also hands
    # the request its last chunk (TokenizerManager.collect_metrics ->
    # observe_one_finished_request, sglang 0.5.17 srt/managers/tokenizer_manager.py,
    # srt/observability/metrics_collector.py): the request's completion_tokens, the
    # number usage reports, labelled is_streaming and model_name; requests with
    # log_metrics=False (its own health checks) are not counted
    counter="sglang:generation_tokens_total",
    version_probes=(
        VersionProbe("http", ("/get_server_info",), json_key="version"),
        VersionProbe("http", ("/version",), json_key="version"),
    ),
    log_patterns=logs_sglang.SGLANG,
    absence_rules=logs_sglang.SGLANG_ABSENT,
    warning_rules=logs_sglang.SGLANG_WARN,
    detect=(logs_sglang.SERVER_ARGS, logs_sglang.READY),
    model_is_local=False,
    ready_clock=ReadyClock(
        ready=logs_sglang.READY,
        stamp=r"^\[(?P<year>\d{4})-(?P<month>\d\d)-(?P<day>\d\d) "
        r"(?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)",
        kind="wall",
        source="sglang srt/utils log format [%Y-%m-%d %H:%M:%S]; seen here (0.5.17)",
    ),
    source="sglang python/sglang/srt/server_args.py; docs.sglang.ai backend/server_arguments",
    # launch to ready in the committed engine logs (compile and CUDA graphs, or a GGUF load)
    measured_starts=MeasuredStarts(median_s=106.0, count=21, low_s=70.0, high_s=204.0),
    added_flags={
        GC_WARNING: "to log its front end's long garbage collections; gc_warning_s: 0 "
        "under the target's launch leaves it out",
        "--enable-cache-report": "for the prompt tokens each response says its cache "
        "served; an SGLang without it is older than crossover supports",
        "--enable-metrics": "for /metrics, the generated-token counter that witnesses "
        "every level; an SGLang without it is older than crossover supports",
        NO_FUSED_ALLREDUCE: "at TP > 1, to keep FlashInfer's fused all-reduce (NVLink "
        "multicast) off; an SGLang without it is older than crossover supports",
    },
    derive=derive,
    ep_flag="--ep-size {n}",
    quality=QualityAPI(completion_fields={"ignore_eos": True}),
    plan=PlanTraits(fields=plan_fields, online_quants=("fp8",)),
    advise=AdvisorTraits(preference=(3, 3, 1), borrows_profile="vllm", prefix_cache=True),
    launch_gpus=launch_gpus,
    launch_notes=launch_notes,
    # GET or POST (python/sglang/srt/entrypoints/http_server.py, 0.5.17):
    # TokenizerManager.freeze_gc sends the scheduler a FreezeGCReq, then freezes its own
    freeze_gc_path="/freeze_gc",
)
