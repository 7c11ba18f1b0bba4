"""LMDeploy's OpenAI-compatible server (``lmdeploy serve api_server``).

Written as the example of adding an engine (docs/architecture.md, "Adding an engine"):
this module and its tests are the whole change. Flags: lmdeploy/cli/serve.py
``add_parser_api_server`` and lmdeploy/cli/utils.py ``ArgumentHelper`` (--server-name,
--server-port, --backend, --tp, --session-len, --max-batch-size, --cache-max-entry-count,
--dtype, --max-prefill-token-num). Health: ``GET /health`` (200 once the engine is
healthy, 503 before; lmdeploy/serve/openai/endpoints/management.py). Requests: its
``/v1/completions`` and ``/v1/chat/completions`` take ``max_tokens`` and ``ignore_eos``
(lmdeploy/serve/openai/protocol.py; ``min_new_tokens`` only on chat), the fields of the
``llamacpp`` dialect. Its Prometheus endpoint and log lines are not modelled yet: no
scraped series, no counter witness, and ``verify-config`` needs ``--engine lmdeploy``.
"""

from __future__ import annotations

from pathlib import Path

from crossover.dialects import LlamaCppDialect
from crossover.engines.config import EngineConfig
from crossover.engines.flags import Flag, FlagTable, fmt_g
from crossover.engines.spec import EngineSpec, LaunchSpec, VersionProbe, refuse

FLAGS = FlagTable(
    flags=(
        Flag("tp", ("--tp",), "tp", requested=True),
        Flag("parallel_slots", ("--max-batch-size",), "parallel", requested=True),
        Flag("context_tokens", ("--session-len",), "context_tokens", requested=True),
        # the share of GPU memory the KV cache takes (of the free memory after the weights)
        Flag(
            "gpu_memory_utilization",
            ("--cache-max-entry-count",),
            "gpu_memory_utilization",
            requested=True,
            render=fmt_g,
        ),
        Flag("max_batched_tokens", ("--max-prefill-token-num",), "max_batched_tokens"),
        Flag("dtype", ("--dtype",), "dtype", requested=True),
    )
)


def build(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    refuse(
        config,
        "lmdeploy",
        quant="pick a quantized checkpoint (--model-format awq/gptq in extra_args)",
        pp="lmdeploy api_server splits by tensor parallelism only (--tp)",
        cuda_graphs="not an lmdeploy api_server option (its PyTorch backend decides)",
        load_format="not an lmdeploy api_server option",
        gpu_layers="llama.cpp only",
        device="use CUDA_VISIBLE_DEVICES in env",
        compilation_config="vLLM only",
        prompt_cache_mib="llama.cpp only (its host-RAM prompt cache)",
        gc_warning_s="SGLang only (its front end's long garbage-collection line)",
        flash_attn="not an lmdeploy api_server option",
    )
    argv = ["serve", "api_server", config.model]
    argv += ["--server-name", config.host, "--server-port", str(port)]
    argv += FLAGS.args(
        config,
        "tp",
        "parallel",
        "context_tokens",
        "gpu_memory_utilization",
        "max_batched_tokens",
        "dtype",
    )
    return LaunchSpec(argv=argv + list(config.extra_args))


SPEC = EngineSpec(
    name="lmdeploy",
    display_name="lmdeploy api_server",
    # max_tokens + ignore_eos, no min_tokens (see above): llama-server's, by its name
    dialect=LlamaCppDialect(name="llamacpp"),
    default_executable=("lmdeploy",),
    build=build,
    flags=FLAGS,
    health_path="/health",
    metrics_path=None,
    metric_names=(),
    version_probes=(VersionProbe("cmd", ("--version",), regex=r"(\d+\.\d+\S*)"),),
    log_patterns=(),
    absence_rules=(),
    detect=(),
    model_is_local=False,
    source="lmdeploy lmdeploy/cli/serve.py, lmdeploy/serve/openai/protocol.py",
    launch_gpus=FLAGS.gpus("tp"),
)
