"""llama.cpp's llama-server.

Flags: common/arg.cpp (-np/--parallel, -c, -ngl, -fa [on|off|auto], --metrics);
GGML_CUDA_DISABLE_GRAPHS is read in ggml/src/ggml-cuda/common.cuh (llama.cpp vendored in
llama-cpp-python 0.3.36). -c is the total context, split across the slots.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from crossover.dialects import LlamaCppDialect
from crossover.engines import logpatterns as lp
from crossover.engines import logs_moe
from crossover.engines.config import EngineConfig
from crossover.engines.flags import Flag, FlagTable
from crossover.engines.launchrec import Fact, LaunchRecord
from crossover.engines.logs_moe import llamacpp_moe_launch
from crossover.engines.ready import ReadyClock
from crossover.engines.spec import (
    AdvisorTraits,
    EngineSpec,
    InstallTraits,
    LaunchSpec,
    MeasuredStarts,
    PlanFields,
    PlanLaunch,
    PlanTraits,
    QualityAPI,
    TritonHostedTraits,
    VersionProbe,
    on_off,
    refuse,
)
from crossover.errors import UsageError

# tools/server/server-context.cpp (the pinned source): before a new task starts, idle
# slots are saved into the host-RAM prompt cache (--cache-ram) on the main loop; once it
# is full, each save first evicts its oldest entry with this line (the saves before then
# are not logged at the default verbosity, so the count is a lower bound)
HOST_CACHE_EVICTIONS = lp.WarningRule(
    "host_prompt_cache_evictions",
    "warning",
    re.compile(
        r"making room for prompt cache entry, removing oldest entry \(size = ([\d.]+) MiB\)"
    ),
    "llama-server saved slot state into its full host prompt cache at least {count} time{s} "
    "({0} MiB per entry): each save copies a slot's KV cache to host RAM on the server's "
    "main loop while every slot waits (0.18 s per 280 MiB on an H200 host, where it cost "
    "12x in TTFT at one user). --cache-ram 0 (prompt_cache_mib: 0) turns it off; a slot "
    "still reuses its own prompt's prefix without it",
    "llama.cpp tools/server/server-context.cpp (prompt cache, --cache-ram); seen on the H200",
)

FLAGS = FlagTable(
    flags=(
        Flag("parallel_slots", ("-np", "--parallel"), "parallel", requested=True, echoed=True),
        Flag("gpu_layers", ("-ngl",), "gpu_layers", requested=True),
        Flag("flash_attn", ("-fa",), "flash_attn", render=on_off),
        # --cache-ram (server: host-memory prompt caching, llama.cpp PR #16391; 8192 MiB by
        # default, 0 disables it). With many slots its default stalls the server: each new
        # task first saves the idle slots into the full cache, one eviction each
        # (docs/engines.md, "llama.cpp's host prompt cache").
        Flag("prompt_cache_mib", ("--cache-ram", "-cram"), "prompt_cache_mib", requested=True),
    )
)


def build(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    refuse(
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
        gc_warning_s="SGLang only (its front end's long garbage-collection line)",
    )
    argv = ["-m", str(config.model_path()), "--host", config.host, "--port", str(port)]
    argv += FLAGS.args(config, "parallel")
    if config.context_tokens is not None:
        argv += ["-c", str(config.context_tokens * (config.parallel or 1))]
    layers = config.gpu_layers if config.gpu_layers is not None else 999
    argv += [FLAGS.by_knob("gpu_layers").names[0], str(layers)]
    argv += FLAGS.args(config, "flash_attn", "prompt_cache_mib")
    argv += ["--metrics", *config.extra_args]
    env_set: dict[str, str] = {}
    env_unset: tuple[str, ...] = ()
    if config.cuda_graphs is False:
        env_set[lp.LLAMA_GRAPHS_ENV] = "1"
    elif config.cuda_graphs is True:
        env_unset = (lp.LLAMA_GRAPHS_ENV,)  # an inherited value would turn them off
    return LaunchSpec(argv=argv, env_set=env_set, env_unset=env_unset)


def launch_facts(launch: LaunchRecord) -> dict[str, Fact]:
    """CUDA graphs (an environment switch llama.cpp obeys silently), the split mode, and
    the MoE offload flags."""
    argv = launch.argv
    facts = {"cuda_graphs": _graphs(launch)}
    row = any(a in ("-sm", "--split-mode") and b == "row" for a, b in itertools.pairwise(argv))
    if not row:  # llama.cpp splits tensors across GPUs only with --split-mode row
        facts["tp"] = Fact(
            setting="tp", value=1, basis="launch-argv", verified=True,
            evidence="no --split-mode row at launch",
            origin="llama.cpp common/arg.cpp (--split-mode none|layer|row)",
        )  # fmt: skip
    for setting, (value, evidence) in llamacpp_moe_launch(argv, launch.env).items():
        facts[setting] = Fact(
            setting=setting, value=value, basis="launch-argv", verified=False,
            evidence=evidence, origin="llama.cpp common/arg.cpp (-cmoe, -ncmoe, -ot)",
            note="requested at launch; at -lv 5 the log lists each tensor moved to CPU",
        )  # fmt: skip
    facts.update(_model_file_facts(argv))
    return facts


def _model_file_facts(argv: list[str]) -> dict[str, Fact]:
    """Expert counts from the GGUF the server was started with, when that file is on this
    machine: llama-server's default log level (3) prints no ``print_info`` lines, so a log
    alone does not say whether the model is a mixture of experts (seen on the H200,
    docs/results/h200/moe/)."""
    model = next((b for a, b in itertools.pairwise(argv) if a in ("-m", "--model")), None)
    if model is None or not Path(model).is_file():
        return {}
    try:
        from gguf import GGUFReader

        fields = GGUFReader(model, "r").fields
        arch = fields["general.architecture"].contents()
        count = fields.get(f"{arch}.expert_count")
        used = fields.get(f"{arch}.expert_used_count")
        values = {
            "n_expert": count.contents() if count is not None else None,
            "n_expert_used": used.contents() if used is not None else None,
        }
    except Exception:  # an unreadable file says nothing; the log still counts
        return {}
    out = {}
    for (name, v), key in zip(values.items(), ("expert_count", "expert_used_count"), strict=True):
        if isinstance(v, int) and v > 0:
            out[name] = Fact(
                setting=name, value=v, basis="model-file", verified=True,
                evidence=f"{Path(model).name}: {arch}.{key}",
                origin="the GGUF header (gguf package)",
            )  # fmt: skip
    return out


def _graphs(launch: LaunchRecord) -> Fact:
    env_value = launch.env.get(lp.LLAMA_GRAPHS_ENV)
    origin = "llama.cpp ggml/src/ggml-cuda/common.cuh: getenv(GGML_CUDA_DISABLE_GRAPHS) != nullptr"
    if env_value is not None:
        return Fact(
            setting="cuda_graphs",
            value=False,
            basis="launch-env",
            verified=True,  # any value, even "0", disables them, and nothing is logged
            evidence=f"{lp.LLAMA_GRAPHS_ENV}={env_value} in the launch environment",
            origin=origin,
        )
    argv = launch.argv
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-sm", "--split-mode") and argv[i + 1] == "row":
            return Fact(
                setting="cuda_graphs", value=False, basis="launch-argv", verified=True,
                evidence=f"{arg} row", origin="docs/engines.md: -sm row disables CUDA graphs",
            )  # fmt: skip
    return Fact(
        setting="cuda_graphs",
        value=True,
        basis="launch-env",
        verified=False,
        evidence=f"{lp.LLAMA_GRAPHS_ENV} not set at launch",
        origin=origin,
        note=(
            "on where the build and GPU allow (CUDA build, Volta or newer); llama.cpp does "
            "not log it ('graphs reused' is ggml graph reuse): confirm by measurement"
        ),
    )


def plan_fields(s: PlanLaunch) -> PlanFields:
    """One process over the GPUs: split by layer (--pp) or by row (--tp)."""
    gpus = s.tp * s.pp
    if s.tp > 1 and s.pp > 1:
        raise UsageError("llama.cpp splits by layer (--pp) or by row (--tp), not both")
    mode = "none" if gpus == 1 else ("row" if s.tp > 1 else "layer")
    fields: dict[str, object] = {
        "parallel": s.max_concurrency,
        "context_tokens": s.max_seq_len,
        "flash_attn": True,
    }
    env = {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(gpus))}
    return fields, ["--split-mode", mode], env


SPEC = EngineSpec(
    name="llamacpp",
    display_name="llama-server",
    dialect=LlamaCppDialect(name="llamacpp"),
    default_executable=("llama-server",),
    build=build,
    flags=FLAGS,
    health_path="/health",  # 503 while loading, 200 when ready (tools/server/README.md)
    metrics_path="/metrics",
    # tools/server/server-task.cpp (0.3.36 vendor); kv_cache_usage_ratio is in older builds.
    # Not its counter: llama-server adds a request's tokens to tokens_predicted_total when
    # its slot is reused (callback_on_reset, tools/server/server-context.cpp), so after a
    # level it trails by the last request of every slot.
    metric_names=(
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
        "llamacpp:kv_cache_usage_ratio",
        "llamacpp:n_busy_slots_per_decode",
        "llamacpp:tokens_predicted_total",
    ),
    kv_usage_metric="llamacpp:kv_cache_usage_ratio",
    waiting_metric="llamacpp:requests_deferred",
    running_metric="llamacpp:requests_processing",
    version_probes=(
        # a tree without git metadata (llama-cpp-python's sdist, which crossover builds)
        # says b0-unknown here and "commit unknown" below: those pass to the stamp
        VersionProbe("http", ("/props",), json_key="build_info", regex=r"^(?!b0-unknown$)(.+)$"),
        # common/build-info.cpp.in: "version: %s (build %d, commit %s)" on stderr
        # (this tree's: "version: 0.5.0-dev (build 0, commit unknown)")
        VersionProbe(
            "cmd",
            ("--version",),
            regex=r"version: (?!.*\bcommit unknown\b)(?!0 \(unknown\))(.+?)\s*$",
        ),
        # the build.json crossover writes beside the build (crossover.builds.llamacpp)
        VersionProbe(
            "stamp",
            ("build.json",),
            template="llama.cpp of {source} (built by crossover: {label})",
        ),
    ),
    log_patterns=lp.LLAMACPP + logs_moe.LLAMACPP_MOE,
    absence_rules=lp.LLAMACPP_ABSENT,
    warning_rules=(*logs_moe.LLAMACPP_WARN, HOST_CACHE_EVICTIONS),
    detect=(
        r"llama_server: ",
        r"srv +load_model:",
        r"llama_model_loader:",
        r"slot print_timing:",
    ),
    model_is_local=True,
    ready_clock=ReadyClock(
        ready=r"llama_server: listening on|server is listening on",
        stamp=r"^(?P<minutes>\d+)\.(?P<seconds>\d\d)\.(?P<ms>\d{3})\.(?P<us>\d{3}) ",
        kind="elapsed",
        source="llama.cpp common/log.cpp (timestamps since the log began); seen here",
    ),
    source="llama.cpp common/arg.cpp, tools/server/README.md",
    # launch to ready in the committed engine logs (compile and CUDA graphs, or a GGUF load)
    measured_starts=MeasuredStarts(median_s=4.0, count=23, low_s=2.0, high_s=6.6),
    added_flags={
        "--metrics": "for /metrics, the generated-token counter that witnesses every "
        "level; a llama-server without it is older than crossover supports",
    },
    launch_facts=launch_facts,
    unknown_notes={
        "cuda_graphs": "unknown from log: llama.cpp does not log the CUDA-graph setting "
        "('graphs reused' counts ggml compute-graph reuse, present either way)"
    },
    tp_heads_rule=None,
    quality=QualityAPI(tokenize_text_key="content", completion_fields={"ignore_eos": True}),
    plan=PlanTraits(
        writer="crossover.plan.builder:gguf_script", fields=plan_fields, formats="gguf"
    ),
    advise=AdvisorTraits(preference=(1, 2, 3), prefix_cache=True),
    model_kind="one GGUF file",
    install=InstallTraits(find="crossover.builds.llamacpp:find_llama_server"),
    # llama-cpp-python's Llama in the Python backend (crossover.plan.triton_python)
    triton_hosted=TritonHostedTraits(
        model_file="llamacpp_model.py",
        parameters="crossover.plan.triton_hosted:llamacpp_launch_parameters",
        settings={
            "n_ctx": ("context_tokens", int),
            "n_threads": ("threads", int),
            "n_gpu_layers": ("gpu_layers", int),
            "model_path": ("model", str),
        },
        formats="gguf",
    ),
)
