"""TensorRT-LLM's ``trtllm-serve`` (PyTorch backend).

Flags: tensorrt_llm/commands/serve.py (--tp_size --pp_size --max_batch_size --max_seq_len
--max_num_tokens --kv_cache_free_gpu_memory_fraction --extra_llm_api_options). YAML: 1.x
top-level ``cuda_graph_config: {enable_padding, max_batch_size}`` (``null`` turns graphs
off; TorchLlmArgs.cuda_graph_config defaults on); 0.20 and earlier nest
``pytorch_backend_config: {use_cuda_graph}``. A wrongly nested key is ignored, so the one
version rule (``legacy_graph_keys``) serves both the launch here and ``crossover plan``.
"""

from __future__ import annotations

from pathlib import Path

from crossover.dialects import TRTLLMDialect
from crossover.engines import logpatterns as lp
from crossover.engines.config import EngineConfig
from crossover.engines.flags import Flag, FlagTable, GpuAsk, fmt_g, gpu_ask
from crossover.engines.spec import (
    AdvisorTraits,
    EngineSpec,
    LaunchSpec,
    PlanTraits,
    VersionProbe,
    refuse,
)
from crossover.errors import UsageError
from crossover.versions import version_key

#: cuda_graph_config replaced pytorch_backend_config.use_cuda_graph after 0.20
FIRST_CUDA_GRAPH_CONFIG = "0.21.0rc0"

FLAGS = FlagTable(
    flags=(
        Flag("tp", ("--tp_size",), "tp", requested=True),
        Flag("pp", ("--pp_size",), "pp", requested=True),
        Flag("parallel_slots", ("--max_batch_size",), "parallel", requested=True),
        Flag("context_tokens", ("--max_seq_len",), "context_tokens"),
        Flag("max_batched_tokens", ("--max_num_tokens",), "max_batched_tokens"),
        Flag(
            "gpu_memory_utilization",
            ("--kv_cache_free_gpu_memory_fraction",),
            "gpu_memory_utilization",
            render=fmt_g,
        ),
    )
)


def legacy_graph_keys(version: str | None) -> bool:
    """True where the CUDA-graph keys nest under ``pytorch_backend_config`` (<= 0.20); a
    version that does not parse is taken as current."""
    if not version:
        return False
    try:
        return version_key(version) < version_key(FIRST_CUDA_GRAPH_CONFIG)
    except UsageError:
        return False


def extra_options(config: EngineConfig) -> dict[str, object]:
    opts: dict[str, object] = {}
    if config.cuda_graphs is not None:
        if legacy_graph_keys(config.engine_version):
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


def build(config: EngineConfig, port: int, workdir: Path) -> LaunchSpec:
    refuse(
        config,
        "trtllm-serve",
        quant="the quantization is the checkpoint's (ModelOpt); pick a quantized checkpoint",
        gpu_layers="llama.cpp only",
        device="use CUDA_VISIBLE_DEVICES in env",
        load_format="not a trtllm-serve option",
        compilation_config="vLLM only",
        prompt_cache_mib="llama.cpp only (its host-RAM prompt cache)",
        gc_warning_s="SGLang only (its front end's long garbage-collection line)",
    )
    argv = [config.model, "--host", config.host, "--port", str(port)]
    argv += FLAGS.args(
        config,
        "tp",
        "pp",
        "parallel",
        "context_tokens",
        "max_batched_tokens",
        "gpu_memory_utilization",
    )
    files: dict[Path, str] = {}
    opts = extra_options(config)
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


#: the LLM API's own names of the sizes, as an --extra_llm_api_options YAML gives them
YAML_SIZES = {"tp": "tensor_parallel_size", "pp": "pipeline_parallel_size"}


def launch_gpus(argv: list[str]) -> GpuAsk | None:
    """tp x pp as the launch gives them: ``--tp_size``/``--pp_size``, each replaced by
    its key in the ``--extra_llm_api_options`` YAML named (trtllm-serve lays that file's
    keys over its flags), where the file reads; a file that does not read is left to
    the other checks and to the engine."""
    given = {s: FLAGS.given(argv, s) for s in YAML_SIZES}
    options = _options_file(argv)
    for setting, key in YAML_SIZES.items():
        if key in options:
            given[setting] = (str(options[key]), f"{key}: {options[key]} (extra_llm_api_options)")
    return gpu_ask(list(given.values()))


def _options_file(argv: list[str]) -> dict[str, object]:
    """The mapping of the ``--extra_llm_api_options`` file named last in ``argv``; empty
    where none is named or it does not read as a YAML mapping."""
    flag = "--extra_llm_api_options"
    named = [
        argv[i + 1] if a == flag else a.partition("=")[2]
        for i, a in enumerate(argv)
        if (a == flag and i + 1 < len(argv)) or a.startswith(flag + "=")
    ]
    if not named:
        return {}
    import yaml

    try:
        data = yaml.safe_load(Path(named[-1]).expanduser().read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


SPEC = EngineSpec(
    name="trtllm",
    display_name="trtllm-serve",
    dialect=TRTLLMDialect(name="trtllm"),
    default_executable=("trtllm-serve",),
    build=build,
    flags=FLAGS,
    health_path="/health",
    metrics_path="/prometheus/metrics",
    metric_names=(),  # names differ by release: scrape what /prometheus/metrics lists
    version_probes=(VersionProbe("http", ("/version",), json_key="version"),),
    log_patterns=lp.TRTLLM,
    absence_rules=lp.TRTLLM_ABSENT,
    detect=(r"\[TRT-LLM\]", r"\[TensorRT-LLM\]"),
    model_is_local=False,
    source="tensorrt_llm/commands/serve.py; tensorrt_llm/llmapi/llm_args.py",
    plan=PlanTraits(writer="crossover.plan.nvidia:plan_trtllm", versioned=True),
    # KvCacheConfig.enable_block_reuse defaults to True (TensorRT-LLM LLM API reference)
    advise=AdvisorTraits(preference=(0, 0, 2), borrows_profile="vllm", prefix_cache=True),
    launch_gpus=launch_gpus,
)
