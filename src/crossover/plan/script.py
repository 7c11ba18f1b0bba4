"""Shell scripts from argument lists: ``set -euo pipefail``, every argument quoted.

Arguments are quoted with ``shlex.quote`` except a small set of variable references
(``"${VAR}"`` forms) that the scripts define at the top, so paths can be overridden
from the environment without editing the script.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

_VAR_REF = re.compile(r'^[A-Za-z0-9_=.,:/+-]*"\$\{[A-Z_][A-Z0-9_]*\}(/[A-Za-z0-9_./-]*)?"$')


def var(name: str, suffix: str = "") -> str:
    """A double-quoted reference to a script variable, e.g. ``"${MODEL_DIR}/config.json"``."""
    return f'"${{{name}}}{suffix}"'


def quote(arg: str) -> str:
    if _VAR_REF.match(arg):
        return arg
    return shlex.quote(arg)


def command_line(argv: Sequence[str], env: dict[str, str] | None = None) -> str:
    """One command, continued over lines when long; env assignments in front."""
    parts = [f"{k}={quote(v)}" for k, v in (env or {}).items()]
    parts += [quote(a) for a in argv]
    line = " ".join(parts)
    if len(line) <= 100:
        return line
    out: list[str] = []
    current = ""
    for part in parts:
        if current and part.startswith("-"):
            out.append(current)
            current = "  " + part
        else:
            current = f"{current} {part}" if current else part
    out.append(current)
    return " \\\n".join(out)


#: what each variable a plan's scripts define or export is for (a comment above it)
EXPLAIN: dict[str, str] = {
    # overridable paths
    "MODEL": "the model to serve: an HF folder, a hub id (ORG/NAME) or a GGUF file",
    "MODEL_DIR": "the HF checkpoint folder (or hub id) the conversion reads",
    "GGUF_DIR": "where the GGUF made by build.sh is written and served from",
    "LLAMA_CPP_DIR": "a llama.cpp source tree (its convert_hf_to_gguf.py and llama-quantize)",
    "TRTLLM_DIR": "the TensorRT-LLM source tree (its examples/ conversion scripts)",
    "MODELOPT_DIR": "TensorRT Model Optimizer's source tree (quantization, TRT-LLM < 1.0)",
    "QUANT_DIR": "where the quantized checkpoint is written and served from",
    "CKPT_DIR": "where the converted TensorRT-LLM checkpoint is written",
    "ENGINE_DIR": "where the built TensorRT engine is written (and Triton reads it)",
    "PLAN_DIR": "this plan's folder (what the plan wrote beside this script is read from it)",
    # exported to the engine
    "NCCL_NVLS_ENABLE": "NCCL: no NVLink SHARP (multicast) all-reduce; docs/engines.md, "
    '"NVLink multicast stays off"',
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "PyTorch symmetric memory: no NVLink multicast",
    "NVSHMEM_DISABLE_NVLS": "NVSHMEM: no NVLink SHARP (multicast)",
    "VLLM_ALLREDUCE_USE_SYMM_MEM": "vLLM: no symmetric-memory all-reduce (it uses multicast)",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "vLLM: FlashInfer's trtllm all-reduce, not its "
    "multicast mnnvl one",
    "CUDA_VISIBLE_DEVICES": "the GPUs the engine may use",
    "GGML_CUDA_DISABLE_GRAPHS": "llama.cpp: 1 turns CUDA graphs off (unset: on, the default)",
}


def explain(name: str) -> str:
    """The comment line for a variable: what it is for (its name alone when unknown)."""
    return f"# {name}: {EXPLAIN.get(name, 'set for the engine (see plan.json)')}"


def exports(env: dict[str, str], unset: list[str] | tuple[str, ...] = ()) -> list[str]:
    """``unset``/``export`` lines for an engine's environment, each with what it does."""
    lines: list[str] = []
    for name in unset:
        lines += [explain(name), f"unset {name}"]
    for name, value in env.items():
        lines += [explain(name), f"export {name}={quote(value)}"]
    return lines


def script(header: str, variables: dict[str, str], commands: list[str]) -> str:
    """A bash script: header comment, overridable variables (each with what it is for),
    then the commands."""
    lines = ["#!/usr/bin/env bash", f"# {header}", "set -euo pipefail", ""]
    if variables:
        lines.append("# set any of these in the environment to override the default")
    for name, default in variables.items():
        lines.append(explain(name))
        lines.append(f'{name}="${{{name}:-{_dq(default)}}}"')
    if variables:
        lines.append("")
    lines.extend(commands)
    return "\n".join(lines) + "\n"


def _dq(value: str) -> str:
    """Escape for use inside a double-quoted ${VAR:-default}."""
    return re.sub(r'([\\"$`])', r"\\\1", value).replace("}", "\\}")
