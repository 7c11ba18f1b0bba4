"""The plan request (one validated object from the CLI) and the plan it produces."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from crossover.plan import trtllm


class PlanRequest(BaseModel):
    """What to plan: engine, model, parallelism, quant and the load it must carry."""

    engine: str
    model: str
    tp: int = 1
    pp: int = 1
    quant: str | None = None
    max_concurrency: int = 64
    max_seq_len: int = 4096
    trtllm_version: str = trtllm.DEFAULT_VERSION
    bls: bool = False
    cuda_graphs: bool = True
    port: int = 8000
    engine_dir: str = "/models/trtllm_engine"
    #: Triton: what the repository hosts (the TensorRT-LLM ensemble, or llamacpp / vllm
    #: in the Python backend) and that model's instance count (None: one)
    hosted: str = "tensorrtllm"
    instances: int | None = None
    #: vLLM's load format (``dummy``: random weights from a config-only folder, for
    #: measuring); None: vLLM's default
    load_format: str | None = None


class Plan(BaseModel):
    """Files to write (relative path -> content), which are executable, and plan.json."""

    files: dict[str, str] = Field(default_factory=dict)
    executable: list[str] = Field(default_factory=list)
    plan: dict[str, Any] = Field(default_factory=dict)


# What an engine's plan builder returns: (CUDA graphs expected on, build argv lists,
# serve argv, serve environment), the argv lists with script variables resolved.
Built = tuple[bool, list[list[str]], list[str], dict[str, str]]


def resolve_vars(argv: list[str], variables: dict[str, str]) -> list[str]:
    """Argument list for plan.json: script variables replaced by their defaults."""
    out = []
    for arg in argv:
        arg = re.sub(r'"(\$\{[A-Z_][A-Z0-9_]*\}[^"]*)"', r"\1", arg)
        for name, value in variables.items():
            arg = arg.replace("${" + name + "}", value)
        out.append(arg)
    return out
