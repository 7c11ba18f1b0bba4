"""Launch argument lists for the plan's serve scripts.

vLLM, SGLang, llama-server and transformers serve come from ``crossover.engines``'
launch builders (``launch_spec``), so a plan and a sweep start an engine the same way;
the plan-specific settings (llama.cpp's split mode, expert parallelism, vLLM's batched-token
budget) are each engine spec's ``plan.fields``.
``trtllm-serve`` is built here because the plan writes its own versioned extra-options
YAML (``plan.trtllm``) next to the script.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from crossover.errors import UsageError


class PlanLaunch(BaseModel):
    """What a launch line needs: one validated object, built once by ``plan``."""

    model: str
    tp: int = 1
    pp: int = 1
    quant: str | None = None  # canonical name from advise.rules.normalize_quant
    online_quant: bool = False  # quantize a 16-bit checkpoint at load time (vLLM/SGLang fp8)
    max_concurrency: int = 64
    max_seq_len: int = 4096
    max_num_tokens: int = 8192
    host: str = "127.0.0.1"
    port: int = 8000
    cuda_graphs: bool = True
    moe: bool = False
    load_format: str | None = None  # vLLM's --load-format / AsyncEngineArgs.load_format


def graph_batch_sizes(max_batch: int) -> list[int]:
    """1, 2, 4, 8, then steps of 8 up to max_batch (max_batch always included)."""
    sizes = [s for s in (1, 2, 4) if s < max_batch]
    sizes += list(range(8, max_batch, 8))
    sizes.append(max_batch)
    return sorted(set(sizes))


def engine_argv(engine: str, s: PlanLaunch) -> tuple[list[str], dict[str, str], list[str]]:
    """(argv, env to set, env to unset) from ``crossover.engines``' launch adapters, so a
    plan starts an engine exactly as ``crossover sweep`` would."""
    from crossover.engines import registry
    from crossover.engines.adapters import launch_spec
    from crossover.engines.config import engine_config

    traits = registry.get(engine).plan
    if traits is None or traits.fields is None:
        raise UsageError(f"{engine} has no serve-script launch line")
    own, extra, env = traits.fields(s)
    fields: dict[str, object] = {
        "engine": engine,
        "model": s.model,
        "host": s.host,
        "port": s.port,
        "cuda_graphs": s.cuda_graphs,
        **own,
        "extra_args": extra,
        "env": env,
    }
    spec = launch_spec(engine_config(**fields), s.port, Path("."))
    return list(spec.argv), dict(spec.env_set), list(spec.env_unset)


def llamacpp_graphs_on(s: PlanLaunch) -> bool:
    """``-sm row`` disables CUDA graphs in llama.cpp (docs/engines.md)."""
    return s.cuda_graphs and s.tp == 1


def trtllm_serve_args(s: PlanLaunch, extra_options: str) -> list[str]:
    return [
        "trtllm-serve",
        s.model,
        "--backend",
        "pytorch",
        "--host",
        s.host,
        "--port",
        str(s.port),
        "--tp_size",
        str(s.tp),
        "--pp_size",
        str(s.pp),
        "--max_batch_size",
        str(s.max_concurrency),
        "--max_num_tokens",
        str(s.max_num_tokens),
        "--max_seq_len",
        str(s.max_seq_len),
        "--kv_cache_free_gpu_memory_fraction",
        "0.9",
        "--extra_llm_api_options",
        extra_options,
    ]
