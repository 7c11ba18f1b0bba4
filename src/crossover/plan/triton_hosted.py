"""A Triton model repository whose one model hosts an engine in the Python backend.

``crossover plan --engine triton --hosted llamacpp|vllm`` writes ``<repo>/<name>/
config.pbtxt`` (decoupled, ``backend: "python"``, the engine's settings as ``parameters``,
``instance_group.count`` settable) and ``<repo>/<name>/1/model.py`` with its shared helper
(``crossover.plan.triton_python``). The inputs are the generate extension's JSON fields
crossover's Triton dialect sends (``text_input``, ``max_tokens``, ``min_tokens``,
``stream``, ``return_num_*_tokens``), plus ``ignore_eos`` and ``temperature``; the outputs
are ``text_output`` and the cumulative token counts.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import cast

from crossover.engines import registry
from crossover.engines.spec import TritonHostedTraits
from crossover.errors import UsageError
from crossover.plan.commands import PlanLaunch
from crossover.plan.request import Built, Plan, PlanRequest, resolve_vars
from crossover.plan.script import command_line, explain, script, var
from crossover.plan.triton_models import ModelConfigSpec, Tensor
from crossover.plan.triton_python import COMMON_FILE, common_source, model_source

#: ``--hosted``'s default: the TensorRT-LLM ensemble (the others: an engine in the Python
#: backend, each a spec with ``triton_hosted``)
ENSEMBLE = "tensorrtllm"
#: the engine's name as its model reads it from config.pbtxt's parameters (its log line)
ENGINE_PARAMETER = "engine"


def hosted_choices() -> tuple[str, ...]:
    """What ``--hosted`` takes: the ensemble, or an engine in the Python backend."""
    return (ENSEMBLE, *registry.with_trait("triton_hosted"))


def hosted_traits(engine: str) -> TritonHostedTraits:
    """How ``engine`` runs in the Python backend; ``UsageError`` if it does not."""
    spec = registry.ENGINES.get(engine)
    if spec is None or spec.triton_hosted is None:
        known = ", ".join(registry.with_trait("triton_hosted"))
        raise UsageError(f"no Python-backend model for {engine!r} ({known})")
    return spec.triton_hosted


def _in(name: str, dtype: str, optional: bool = True) -> Tensor:
    return Tensor(name, f"TYPE_{dtype}", (1,), optional=optional)


INPUTS = [
    _in("text_input", "STRING", optional=False),
    _in("max_tokens", "INT32"),
    _in("min_tokens", "INT32"),
    _in("ignore_eos", "BOOL"),
    _in("stream", "BOOL"),
    _in("temperature", "FP32"),
    _in("return_num_output_tokens", "BOOL"),
    _in("return_num_input_tokens", "BOOL"),
]
OUTPUTS = [
    Tensor("text_output", "TYPE_STRING", (-1,)),
    Tensor("num_output_tokens", "TYPE_INT32", (1,)),
    Tensor("num_input_tokens", "TYPE_INT32", (1,)),
]


def llamacpp_parameters(
    gguf: str,
    lib_dir: str,
    python_dir: str,
    *,
    n_ctx: int = 4096,
    n_threads: int = 0,
    n_gpu_layers: int = 0,
    n_batch: int = 2048,
    seed: int = 0,
    default_max_tokens: int = 128,
) -> dict[str, str]:
    return {
        "model_path": gguf,
        "n_ctx": str(n_ctx),
        "n_batch": str(n_batch),
        "n_threads": str(n_threads),
        "n_gpu_layers": str(n_gpu_layers),
        "seed": str(seed),
        "default_max_tokens": str(default_max_tokens),
        "llama_cpp_lib_path": lib_dir,
        "llama_cpp_python_dir": python_dir,
    }


def vllm_parameters(
    engine_args: dict[str, object], default_max_tokens: int = 128
) -> dict[str, str]:
    """``engine_args``: ``vllm.AsyncEngineArgs`` fields (model, tensor_parallel_size, ...)."""
    if "model" not in engine_args:
        raise UsageError("vLLM's engine args need a model")
    return {
        "engine_args": json.dumps(engine_args, sort_keys=True),
        "default_max_tokens": str(default_max_tokens),
    }


def model_config(name: str, parameters: dict[str, str], instances: int) -> ModelConfigSpec:
    if instances < 1:
        raise UsageError("--instances must be >= 1")
    return ModelConfigSpec(
        name=name,
        backend="python",
        max_batch_size=0,
        inputs=list(INPUTS),
        outputs=list(OUTPUTS),
        parameters=parameters,
        instance_count=instances,
        decoupled=True,
    )


def repository(
    engine: str, name: str, parameters: dict[str, str], instances: int = 1
) -> dict[str, str]:
    """``{relative path: content}``: the config, model.py and its helper."""
    from crossover.plan.triton import render

    traits = hosted_traits(engine)
    parameters = {**parameters, ENGINE_PARAMETER: engine}
    return {
        f"{name}/config.pbtxt": render(model_config(name, parameters, instances)),
        f"{name}/1/model.py": model_source(traits.model_file),
        f"{name}/1/{COMMON_FILE}": common_source(),
    }


def write_repository(root: Path, files: dict[str, str]) -> list[Path]:
    written = []
    for rel, content in sorted(files.items()):
        path = root / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, "utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None
        written.append(path)
    return written


def llamacpp_launch_parameters(spec: PlanLaunch) -> tuple[dict[str, str], str | None]:
    """The llama.cpp model's parameters for the plan's launch, and the build it loads."""
    from crossover.builds.libllama import find_libllama

    shared = find_libllama()
    if shared is None:
        raise UsageError(
            "no libllama.so for the llama.cpp model: run `crossover engines install triton`"
        )
    gpu = shared.base.cuda
    params = llamacpp_parameters(
        spec.model,
        str(shared.lib_dir),
        str(shared.python_dir),
        n_ctx=spec.max_seq_len,
        n_gpu_layers=999 if gpu else 0,
    )
    return params, f"llama.cpp {shared.base.label} build {shared.key} ({shared.lib_dir})"


def vllm_launch_parameters(spec: PlanLaunch) -> tuple[dict[str, str], str | None]:
    """The engine args of ``crossover plan --engine vllm``'s launch: the batched-token
    budget and memory share are written out, because vLLM's defaults depend on who starts
    it (0.26.0 on an H200: 8,192 batched tokens for ``vllm serve``, 2,048 for an engine
    built from ``AsyncEngineArgs``, ``vllm/engine/arg_utils.py``)."""
    args: dict[str, object] = {
        "model": spec.model,
        "tensor_parallel_size": spec.tp,
        "pipeline_parallel_size": spec.pp,
        "max_num_seqs": spec.max_concurrency,
        "max_model_len": spec.max_seq_len,
        "max_num_batched_tokens": spec.max_num_tokens,
        "gpu_memory_utilization": 0.90,
        "enforce_eager": not spec.cuda_graphs,
    }
    if spec.online_quant and spec.quant:
        args["quantization"] = spec.quant
    if spec.load_format is not None:
        args["load_format"] = spec.load_format
    return vllm_parameters(args), None


def plan_hosted(req: PlanRequest, spec: PlanLaunch, plan: Plan, notes: list[str]) -> Built:
    """The ``--hosted llamacpp|vllm`` plan: the repository and serve.sh."""
    from crossover.builds.triton import find_triton

    name = req.hosted
    traits = hosted_traits(name)
    module, _, function = traits.parameters.partition(":")
    write = cast(
        Callable[[PlanLaunch], tuple[dict[str, str], str | None]],
        getattr(importlib.import_module(module), function),
    )
    params, built = write(spec)
    if built is not None:
        notes.append(f"the model loads {built}")
    instances = req.instances or 1
    for rel, content in repository(name, name, params, instances).items():
        plan.files[f"triton_model_repo/{rel}"] = content
    notes.append(
        f"requests go to /v2/models/{name}/generate_stream (a sweep target's model: {name}); "
        f"{instances} instance(s)"
    )
    inst = find_triton()
    program = str(inst.tritonserver) if inst else "tritonserver"
    if inst is None:
        notes.append("no cached tritonserver: serve.sh runs tritonserver from PATH")
    argv = [
        program,
        f"--model-repository={var('PLAN_DIR', '/triton_model_repo')}",
        "--http-address=127.0.0.1",
        f"--http-port={req.port}",
        "--allow-grpc=false",
        "--metrics-address=127.0.0.1",
        f"--metrics-port={req.port + 2}",
        *(inst.launch_args() if inst else []),
    ]
    exports = inst.shell_exports() if inst else []
    plan.files["serve.sh"] = script(
        f"serve {req.model} with Triton (Python backend: {name})",
        {},
        [
            explain("PLAN_DIR"),
            'PLAN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
            *exports,
            "exec " + command_line(argv),
        ],
    )
    plan.executable.append("serve.sh")
    return (
        spec.cuda_graphs if traits.cuda_graphs else False,
        [],
        resolve_vars(argv, {"PLAN_DIR": "."}),
        {},  # serve.sh exports the server's libraries and the stub's venv
    )
