"""TensorRT-LLM: checkpoint conversion/quantization, ``trtllm-build``, serve options YAML.

The CUDA-graph block is nested per version (rule ``plan-trtllm-cuda-graph-nesting``):
1.x reads ``cuda_graph_config: {enable_padding, batch_sizes}``; 0.20 and earlier read
``pytorch_backend_config: {use_cuda_graph, cuda_graph_batch_sizes, ...}``. A key at the
wrong level is silently ignored, which is how the published trtllm-triton-serving run lost
its graphs (docs/engines.md, advisor rules).
"""

from __future__ import annotations

from typing import Any

from crossover.advise.rules import version_key
from crossover.engines.specs.trtllm import FIRST_CUDA_GRAPH_CONFIG, legacy_graph_keys
from crossover.errors import UsageError
from crossover.plan.commands import PlanLaunch, graph_batch_sizes
from crossover.plan.script import var

DEFAULT_VERSION = "1.2.1"

# quantize.py --qformat names (TensorRT-LLM examples/quantization/quantize.py)
QFORMAT: dict[str, str] = {
    "fp8": "fp8",
    "nvfp4": "nvfp4",
    "int4-awq": "int4_awq",
}
# examples/models/core/<dir>/convert_checkpoint.py per HF architecture
CONVERT_DIR: dict[str, str] = {
    "llama": "llama",
    "mistral": "llama",
    "mixtral": "llama",
    "qwen": "qwen",
    "gemma": "gemma",
}


def version_note(version: str) -> str | None:
    """Versions whose CUDA-graph key nesting was not checked against their source."""
    if version_key(FIRST_CUDA_GRAPH_CONFIG) <= version_key(version) < version_key("1.0.0rc0"):
        return (
            f"TensorRT-LLM {version}: CUDA-graph key nesting between 0.20 and 1.0 is not "
            "verified here; confirm graphs from the startup log"
        )
    return None


def extra_llm_api_options(spec: PlanLaunch, version: str) -> dict[str, Any]:
    """The ``--extra_llm_api_options`` YAML body for ``trtllm-serve`` of ``version``."""
    sizes = graph_batch_sizes(spec.max_concurrency)
    options: dict[str, Any] = {}
    if legacy_graph_keys(version):
        options["pytorch_backend_config"] = {
            "use_cuda_graph": spec.cuda_graphs,
            "cuda_graph_padding_enabled": spec.cuda_graphs,
            "cuda_graph_batch_sizes": sizes if spec.cuda_graphs else [],
        }
    elif spec.cuda_graphs:
        options["cuda_graph_config"] = {"enable_padding": True, "batch_sizes": sizes}
    else:
        options["cuda_graph_config"] = None  # null turns graphs off in 1.x
    options["kv_cache_config"] = {"free_gpu_memory_fraction": 0.9}
    if spec.quant in ("fp8", "fp8-block", "nvfp4"):
        # FP8 KV cache: 0.20 reads it from the PyTorch backend config, 1.x from kv_cache_config
        if "pytorch_backend_config" in options:
            options["pytorch_backend_config"]["kv_cache_dtype"] = "fp8"
        else:
            options["kv_cache_config"]["dtype"] = "fp8"
    options["enable_chunked_prefill"] = True
    return options


def graphs_enabled(options: dict[str, Any]) -> bool:
    """Read back whether CUDA graphs are on, from the keys the engine actually reads."""
    if "pytorch_backend_config" in options:
        return bool((options["pytorch_backend_config"] or {}).get("use_cuda_graph"))
    return isinstance(options.get("cuda_graph_config"), dict)


def convert_dir(architecture: str | None) -> str:
    arch = (architecture or "llama").lower()
    for key, folder in CONVERT_DIR.items():
        if key in arch:
            return folder
    raise UsageError(
        f"no TensorRT-LLM convert_checkpoint.py mapping for architecture {architecture!r}; "
        f"known: {', '.join(sorted(CONVERT_DIR))}"
    )


def hf_quantize_command(spec: PlanLaunch, version: str) -> list[str]:
    """Quantize a 16-bit HF checkpoint to an HF-format quantized one for trtllm-serve.

    ``examples/quantization/quantize.py --export_format hf`` (1.x); before 1.0 the same
    is ModelOpt's ``examples/llm_ptq/hf_ptq.py`` (TensorRT-Model-Optimizer)."""
    qfmt = QFORMAT.get(spec.quant or "")
    if qfmt is None:
        raise UsageError(f"no quantization recipe for {spec.quant}")
    if version_key(version) < version_key("1.0.0rc0"):
        return [
            "python3",
            var("MODELOPT_DIR", "/examples/llm_ptq/hf_ptq.py"),
            "--pyt_ckpt_path",
            var("MODEL"),
            "--qformat",
            qfmt,
            "--export_path",
            var("QUANT_DIR"),
            "--calib_size",
            "512",
        ]
    argv = [
        "python3",
        var("TRTLLM_DIR", "/examples/quantization/quantize.py"),
        "--model_dir",
        var("MODEL"),
        "--dtype",
        "bfloat16",
        "--qformat",
        qfmt,
        "--output_dir",
        var("QUANT_DIR"),
        "--calib_size",
        "512",
        "--export_format",
        "hf",
    ]
    if spec.quant in ("fp8", "nvfp4"):
        argv += ["--kv_cache_dtype", "fp8"]
    return argv


def build_commands(spec: PlanLaunch, architecture: str | None, version: str) -> list[list[str]]:
    """Checkpoint conversion (or quantization) then ``trtllm-build`` for a TRT engine."""
    quant = spec.quant or "bf16"
    ckpt, engine = var("CKPT_DIR"), var("ENGINE_DIR")
    if quant in ("bf16", "fp16"):
        folder = convert_dir(architecture)
        script = var("TRTLLM_DIR", f"/examples/models/core/{folder}/convert_checkpoint.py")
        if version_key(version) < version_key("0.19.0"):
            script = var("TRTLLM_DIR", f"/examples/{folder}/convert_checkpoint.py")
        convert = [
            "python3",
            script,
            "--model_dir",
            var("MODEL_DIR"),
            "--output_dir",
            ckpt,
            "--dtype",
            "bfloat16" if quant == "bf16" else "float16",
            "--tp_size",
            str(spec.tp),
            "--pp_size",
            str(spec.pp),
        ]
    elif quant in QFORMAT:
        convert = [
            "python3",
            var("TRTLLM_DIR", "/examples/quantization/quantize.py"),
            "--model_dir",
            var("MODEL_DIR"),
            "--output_dir",
            ckpt,
            "--dtype",
            "bfloat16",
            "--qformat",
            QFORMAT[quant],
            "--tp_size",
            str(spec.tp),
            "--pp_size",
            str(spec.pp),
            "--calib_size",
            "512",
        ]
        if quant in ("fp8", "nvfp4"):
            convert += ["--kv_cache_dtype", "fp8"]
    else:
        raise UsageError(
            f"no TensorRT engine build for {quant}: serve the pre-quantized checkpoint with "
            "--engine trtllm (PyTorch backend) instead"
        )
    build = [
        "trtllm-build",
        "--checkpoint_dir",
        ckpt,
        "--output_dir",
        engine,
        "--gemm_plugin",
        "auto",
        "--max_batch_size",
        str(spec.max_concurrency),
        "--max_num_tokens",
        str(spec.max_num_tokens),
        "--max_seq_len",
        str(spec.max_seq_len),
        "--use_paged_context_fmha",
        "enable",
        "--workers",
        str(spec.tp * spec.pp),
    ]
    return [convert, build]
