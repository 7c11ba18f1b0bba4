"""The launch record an engine's log starts with, and the facts it gives.

``crossover.engines.lifecycle`` writes the argv and environment changes an engine was
started with as the log's first line (``# crossover-launch: {...}``). Where the engine's
own lines are silent, these are the facts: *verified* only where the engine is known to
obey a switch without logging it (llama.cpp reads ``GGML_CUDA_DISABLE_GRAPHS`` silently),
otherwise what was requested.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from crossover.engines import logpatterns as lp
from crossover.engines.logs_moe import llamacpp_moe_launch

HEADER_PREFIX = "# crossover-launch: "
Basis = Literal["log", "log-absence", "launch-env", "launch-argv"]


class LaunchRecord(BaseModel):
    """What the lifecycle started; written as the first line of the engine log."""

    engine: str
    argv: list[str]
    env: dict[str, str | None]  # changes only: a value set, or None for removed
    port: int
    started_at: str


def header_line(record: LaunchRecord) -> str:
    return HEADER_PREFIX + record.model_dump_json() + "\n"


def read_header(text: str) -> LaunchRecord | None:
    for line in text.splitlines()[:3]:
        if line.startswith(HEADER_PREFIX):
            try:
                return LaunchRecord.model_validate_json(line[len(HEADER_PREFIX) :])
            except ValidationError:
                return None
    return None


def keep_earlier_log(path: Path) -> Path | None:
    """Move an earlier engine's log out of the way of a new one at ``path``.

    A resumed sweep starts its engines again under the same log names; the earlier log is
    the evidence for the runs already stored, so it is kept beside the new one under the
    time its engine started (``NAME.log`` -> ``NAME.20261201T223412.log``, read from its
    launch header; the file's mtime when it has none). Returns the new name, ``None`` when
    there was nothing to keep.
    """
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with path.open("rb") as fh:
        head = fh.read(8192).decode("utf-8", "replace")
    record = read_header(head)
    stamp = re.sub(r"[^0-9T]", "", record.started_at)[:15] if record else ""
    if not stamp:
        stamp = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y%m%dT%H%M%S")
    base = path.name[: -len(".log")] if path.name.endswith(".log") else path.name
    target = path.with_name(f"{base}.{stamp}.log")
    for n in itertools.count(2):
        if not target.exists():
            break
        target = path.with_name(f"{base}.{stamp}-{n}.log")
    path.rename(target)
    return target


class Fact(BaseModel):
    setting: str
    value: lp.Value | None
    basis: Basis
    verified: bool
    evidence: str | None = None
    line: int | None = None
    origin: str | None = None
    note: str | None = None


# Launch flags recorded as requested (unverified) values when the log is silent.
_ARGV_FLAGS: dict[str, dict[str, str]] = {
    "llamacpp": {
        "-np": "parallel_slots", "--parallel": "parallel_slots", "-ngl": "gpu_layers",
        "--cache-ram": "prompt_cache_mib", "-cram": "prompt_cache_mib",
    },
    "transformers": {"--device": "device", "--dtype": "dtype"},
    "vllm": {
        "--tensor-parallel-size": "tp", "--pipeline-parallel-size": "pp",
        "--max-num-seqs": "parallel_slots", "--quantization": "quant", "--dtype": "dtype",
        "--gpu-memory-utilization": "gpu_memory_utilization",
        "--max-num-batched-tokens": "max_batched_tokens",
    },
    "sglang": {
        "--tp-size": "tp", "--pp-size": "pp", "--max-running-requests": "parallel_slots",
        "--quantization": "quant", "--dtype": "dtype", "--context-length": "context_tokens",
        "--chunked-prefill-size": "max_batched_tokens",
        "--mem-fraction-static": "gpu_memory_utilization",
        "--cuda-graph-max-bs": "cuda_graph_max_bs", "--ep-size": "ep",
    },
    "trtllm": {"--tp_size": "tp", "--pp_size": "pp", "--max_batch_size": "parallel_slots"},
}  # fmt: skip


def _typed(raw: str) -> lp.Value:
    if raw.isdigit():
        return int(raw)
    try:
        return float(raw)
    except ValueError:
        return raw


def launch_facts(engine: str, launch: LaunchRecord) -> dict[str, Fact]:
    """Facts from the launch record alone (the log's own lines are stronger)."""
    facts: dict[str, Fact] = {}
    argv = launch.argv
    flags = _ARGV_FLAGS.get(engine, {})
    for i, arg in enumerate(argv[:-1]):
        if arg in flags:
            setting = flags[arg]
            facts.setdefault(
                setting,
                Fact(
                    setting=setting,
                    value=_typed(argv[i + 1]),
                    basis="launch-argv",
                    verified=False,
                    evidence=f"{arg} {argv[i + 1]}",
                    note="requested at launch; the engine log does not confirm it",
                ),
            )
    if engine == "llamacpp":
        facts["cuda_graphs"] = _llama_graphs(launch)
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
    elif engine == "transformers":
        asked = "--cb-use-cuda-graph" in argv
        facts["cuda_graphs"] = Fact(
            setting="cuda_graphs",
            value=asked,
            basis="launch-argv",
            verified=False,
            evidence="--cb-use-cuda-graph" if asked else "no --cb-use-cuda-graph",
            origin="transformers src/transformers/cli/serve.py; logs seen here",
            note=(
                "transformers serve 5.17 does not log whether CUDA graphs are used "
                "(5.20 logs it when continuous batching turns them off)"
            ),
        )
    elif engine == "vllm" and "--enforce-eager" in argv:
        facts["cuda_graphs"] = Fact(
            setting="cuda_graphs", value=False, basis="launch-argv", verified=False,
            evidence="--enforce-eager",
        )  # fmt: skip
    elif engine == "sglang" and "--disable-cuda-graph" in argv:
        facts["cuda_graphs"] = Fact(
            setting="cuda_graphs", value=False, basis="launch-argv", verified=False,
            evidence="--disable-cuda-graph",
        )  # fmt: skip
    return facts


def _llama_graphs(launch: LaunchRecord) -> Fact:
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
