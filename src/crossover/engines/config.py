"""The one validated launch configuration for every engine adapter.

Built once at the edge (CLI flags, sweep YAML, ``plan.json``) and passed down; the
adapters translate it into each engine's own flags. The engine's name is checked where
the config is built (``registry.engine_config``, ``spec.target.LaunchTarget``): this
module imports no engine, so the registry's specs can import it. Knobs an engine cannot take are
refused by its adapter (``UsageError``) rather than silently dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class EngineConfig(BaseModel):
    """How to launch one engine. Missing knobs are ``None``: the engine's default applies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: str = Field(description="the engine to launch (`crossover engines list` names them)")
    model: str = Field(
        description="model file or folder (GGUF, HF folder, Triton repository), or a hub name"
    )
    host: str = Field(default="127.0.0.1", description="address the engine binds")
    port: int = Field(default=0, ge=0, le=65535, description="0 picks a free port")
    parallel: int | None = Field(
        default=None,
        ge=1,
        description="parallel slots / max batch size / max running requests",
    )
    tp: int = Field(default=1, ge=1, description="tensor-parallel GPUs")
    pp: int = Field(default=1, ge=1, description="pipeline-parallel stages")
    dtype: str | None = Field(default=None, description="weights and activations dtype")
    quant: str | None = Field(default=None, description="quantization, e.g. fp8")
    cuda_graphs: bool | None = Field(default=None, description="CUDA graphs on or off")
    context_tokens: int | None = Field(
        default=None, ge=1, description="max tokens of one sequence (prompt + output)"
    )
    gpu_layers: int | None = Field(default=None, ge=0, description="llama.cpp -ngl")
    flash_attn: bool | None = Field(default=None, description="flash attention on or off")
    device: str | None = Field(default=None, description="transformers --device, e.g. cuda:0")
    load_format: str | None = Field(default=None, description="vLLM/SGLang --load-format (dummy)")
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="share of GPU memory the engine may take (vLLM --gpu-memory-utilization, "
        "SGLang --mem-fraction-static)",
    )
    max_batched_tokens: int | None = Field(
        default=None,
        ge=1,
        description="tokens one engine step may hold, prefill chunks included "
        "(vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size)",
    )
    compilation_config: dict[str, Any] | None = Field(
        default=None,
        description="vLLM --compilation-config as a mapping; merged with what cuda_graphs and "
        "tp/pp need into the one flag vLLM reads",
    )
    prompt_cache_mib: int | None = Field(
        default=None,
        ge=0,
        description="llama.cpp --cache-ram: host-RAM prompt cache in MiB (0 turns it off; "
        "llama-server's default is 8192)",
    )
    gc_warning_s: float | None = Field(
        default=None,
        ge=0,
        description="SGLang --gc-warning-threshold-secs: its front end logs each garbage "
        "collection longer than this (a pause every request in flight waits out); default "
        "0.05, 0 turns it off (SGLang's own default)",
    )
    engine_version: str | None = Field(
        default=None, description="selects version-dependent syntax (trtllm 0.x YAML nesting)"
    )
    executable: list[str] | None = Field(
        default=None,
        description="argv prefix replacing the engine's default program, e.g. a built llama-server",
    )
    extra_args: list[str] = Field(
        default_factory=list, description="more arguments, passed to the engine as they are"
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="environment variables for the engine process"
    )
    health_timeout_s: float = Field(
        default=600.0, gt=0, description="seconds to wait for the engine to answer health checks"
    )

    @field_validator("host", "model")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("executable")
    @classmethod
    def _executable_not_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0]):
            raise ValueError("executable must name a program")
        return value

    def model_path(self) -> Path:
        return Path(self.model).expanduser()
