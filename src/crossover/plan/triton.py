"""A complete Triton ``tensorrt_llm`` model repository, rendered from data.

Models: ``ensemble`` (preprocessing -> tensorrt_llm -> postprocessing), optionally
``tensorrt_llm_bls``. Tensor names and types follow TensorRT-LLM's
``triton_backend/all_models/inflight_batcher_llm`` so that the ``model.py`` files copied
from the same TensorRT-LLM checkout find every tensor and parameter they read.
Instance counts scale with concurrency (rule ``plan-triton-instance-count``) and
``cuda_graph_mode`` is always set (rule ``plan-triton-cuda-graph-mode``).

``validate_repository`` parses each ``config.pbtxt`` into Triton's ``ModelConfig``
protobuf (``tritonclient[grpc]``, imported lazily) and checks the ensemble wiring.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crossover.errors import UsageError
from crossover.plan.triton_models import (
    ModelConfigSpec,
    Tensor,
    bls,
    ensemble,
    instance_counts,
    postprocessing,
    preprocessing,
    tensorrt_llm,
)

__all__ = [
    "ModelConfigSpec",
    "Tensor",
    "check_ensemble",
    "instance_counts",
    "parse_config",
    "render",
    "repository",
    "server_argv",
    "validate_repository",
    "validate_repository_files",
]


# --- rendering ----------------------------------------------------------------------


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dims(dims: tuple[int, ...]) -> str:
    return "[ " + ", ".join(str(d) for d in dims) + " ]" if dims else "[ ]"


def _tensor(t: Tensor) -> str:
    lines = [f"    name: {_q(t.name)}", f"    data_type: {t.dtype}", f"    dims: {_dims(t.dims)}"]
    if t.reshape is not None:
        lines.append(f"    reshape: {{ shape: {_dims(t.reshape)} }}")
    if t.optional:
        lines.append("    optional: true")
    if t.ragged:
        lines.append("    allow_ragged_batch: true")
    return "  {\n" + "\n".join(lines) + "\n  }"


def render(spec: ModelConfigSpec) -> str:
    """Protobuf text format for ``inference.ModelConfig``."""
    out = [f"name: {_q(spec.name)}"]
    if spec.platform:
        out.append(f"platform: {_q(spec.platform)}")
    if spec.backend:
        out.append(f"backend: {_q(spec.backend)}")
    out.append(f"max_batch_size: {spec.max_batch_size}")
    if spec.decoupled is not None:
        out.append(f"model_transaction_policy {{\n  decoupled: {str(spec.decoupled).lower()}\n}}")
    if spec.dynamic_batching:
        out.append("dynamic_batching {\n  max_queue_delay_microseconds: 0\n}")
    out.append("input [\n" + ",\n".join(_tensor(t) for t in spec.inputs) + "\n]")
    out.append("output [\n" + ",\n".join(_tensor(t) for t in spec.outputs) + "\n]")
    if spec.instance_count is not None:
        out.append(
            f"instance_group [\n  {{\n    count: {spec.instance_count}\n    kind: KIND_CPU\n  }}\n]"
        )
    for key, value in spec.parameters.items():
        out.append(f"parameters {{\n  key: {_q(key)}\n  value: {{ string_value: {_q(value)} }}\n}}")
    if spec.steps:
        steps = []
        for step in spec.steps:
            body = [f"      model_name: {_q(step.model)}", "      model_version: -1"]
            body += [
                f"      input_map {{ key: {_q(k)} value: {_q(v)} }}" for k, v in step.inputs.items()
            ]
            body += [
                f"      output_map {{ key: {_q(k)} value: {_q(v)} }}"
                for k, v in step.outputs.items()
            ]
            steps.append("    {\n" + "\n".join(body) + "\n    }")
        out.append("ensemble_scheduling {\n  step [\n" + ",\n".join(steps) + "\n  ]\n}")
    return "\n".join(out) + "\n"


def repository(
    max_concurrency: int,
    tokenizer_dir: str,
    engine_dir: str,
    *,
    cuda_graphs: bool = True,
    with_bls: bool = False,
) -> dict[str, str]:
    """``{relative path: content}`` of the model repository (config.pbtxt files and the
    empty version folders the Python models' ``model.py`` are copied into)."""
    if max_concurrency < 1:
        raise UsageError("--max-concurrency must be >= 1")
    pre_n, post_n = instance_counts(max_concurrency)
    specs = [
        ensemble(max_concurrency),
        preprocessing(max_concurrency, pre_n, tokenizer_dir, engine_dir),
        tensorrt_llm(
            max_concurrency, engine_dir, cuda_graphs=cuda_graphs, graph_cache=max_concurrency
        ),
        postprocessing(max_concurrency, post_n, tokenizer_dir),
    ]
    if with_bls:
        specs.append(bls(max_concurrency, max_concurrency))
    files = {f"{s.name}/config.pbtxt": render(s) for s in specs}
    for s in specs:
        files[f"{s.name}/1/.keep"] = ""
    return files


def server_argv(
    world_size: int,
    model_repo: str,
    http_port: int,
    grpc_port: int = 8001,
    metrics_port: int = 8002,
    tritonserver: str = "tritonserver",
    host: str = "127.0.0.1",
) -> list[str]:
    """Foreground ``tritonserver`` (under ``mpirun`` for TP/PP > 1), one rank per GPU.

    Mirrors TensorRT-LLM's ``triton_backend/scripts/launch_triton_server.py`` (which starts
    the same command with ``Popen`` and returns): ranks above 0 load only ``tensorrt_llm``;
    ``--disable-auto-complete-config`` because the configs here are complete.
    """

    def rank(i: int) -> list[str]:
        argv = [
            tritonserver,
            f"--model-repository={model_repo}",
            f"--http-address={host}",
            f"--http-port={http_port}",
            f"--grpc-address={host}",
            f"--grpc-port={grpc_port}",
            f"--metrics-port={metrics_port}",
            "--disable-auto-complete-config",
            f"--backend-config=python,shm-region-prefix-name=prefix{i}_",
        ]
        if i > 0:
            argv += ["--model-control-mode=explicit", "--load-model=tensorrt_llm"]
        return argv

    if world_size <= 1:
        return rank(0)
    argv = ["mpirun", "--allow-run-as-root"]
    for i in range(world_size):
        argv += ["-n", "1", *rank(i)]
        if i < world_size - 1:
            argv.append(":")
    return argv


# --- validation (needs tritonclient[grpc]) -------------------------------------------


def parse_config(text: str) -> Any:
    """Parse a config.pbtxt into ``inference.ModelConfig`` (raises on any bad field)."""
    try:
        from google.protobuf import text_format
        from tritonclient.grpc import model_config_pb2
    except ImportError as exc:
        raise UsageError("validating Triton configs needs tritonclient[grpc]") from exc
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def _compatible(a: list[int], b: list[int]) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b, strict=True))


def check_ensemble(configs: dict[str, Any]) -> list[str]:
    """Problems in the ensemble's wiring; an empty list means consistent.

    Every step input must come from an ensemble input or an earlier step's output, with
    the same data type and compatible dims; every ensemble output must be produced; every
    mapped name must exist in the step model's config; required step inputs must be fed.
    """
    problems: list[str] = []
    ens = configs.get("ensemble")
    if ens is None:
        return ["no ensemble model"]
    available: dict[str, tuple[int, list[int]]] = {
        i.name: (i.data_type, list(i.dims)) for i in ens.input
    }
    for step in ens.ensemble_scheduling.step:
        model = configs.get(step.model_name)
        if model is None:
            problems.append(f"step model {step.model_name!r} has no config")
            continue
        if model.max_batch_size < ens.max_batch_size:
            problems.append(
                f"{step.model_name}: max_batch_size {model.max_batch_size} < "
                f"ensemble's {ens.max_batch_size}"
            )
        m_inputs = {i.name: i for i in model.input}
        m_outputs = {o.name: o for o in model.output}
        for key, value in step.input_map.items():
            if key not in m_inputs:
                problems.append(f"{step.model_name}: no input {key!r}")
                continue
            if value not in available:
                problems.append(
                    f"{step.model_name}.{key} <- {value!r}: produced by nothing before this step"
                )
                continue
            dtype, dims = available[value]
            want = m_inputs[key]
            if dtype != want.data_type:
                problems.append(f"{step.model_name}.{key} <- {value!r}: data type mismatch")
            if not _compatible(dims, list(want.dims)):
                problems.append(
                    f"{step.model_name}.{key} <- {value!r}: dims {dims} vs {list(want.dims)}"
                )
        for name, tensor in m_inputs.items():
            if not tensor.optional and name not in step.input_map:
                problems.append(f"{step.model_name}: required input {name!r} is not mapped")
        for key, value in step.output_map.items():
            if key not in m_outputs:
                problems.append(f"{step.model_name}: no output {key!r}")
                continue
            if value in available:
                problems.append(f"{value!r} is produced twice")
            available[value] = (m_outputs[key].data_type, list(m_outputs[key].dims))
    for out in ens.output:
        if out.name not in available:
            problems.append(f"ensemble output {out.name!r} is produced by no step")
            continue
        dtype, dims = available[out.name]
        if dtype != out.data_type or not _compatible(dims, list(out.dims)):
            problems.append(f"ensemble output {out.name!r}: type/dims differ from its producer")
    used = {v for step in ens.ensemble_scheduling.step for v in step.input_map.values()}
    for i in ens.input:
        if i.name not in used:
            problems.append(f"ensemble input {i.name!r} is used by no step")
    return problems


def validate_repository_files(files: dict[str, str]) -> list[str]:
    """Like ``validate_repository`` for ``{relative path: content}`` before writing."""
    configs: dict[str, Any] = {}
    problems: list[str] = []
    for rel, text in sorted(files.items()):
        if not rel.endswith("/config.pbtxt"):
            continue
        folder = rel.split("/")[-2]
        try:
            cfg = parse_config(text)
        except UsageError:
            raise
        except Exception as exc:
            problems.append(f"{folder}: does not parse ({exc})")
            continue
        if cfg.name != folder:
            problems.append(f"{rel}: name {cfg.name!r} differs from its folder")
        configs[cfg.name] = cfg
    return problems + check_ensemble(configs)


def validate_repository(root: Path) -> list[str]:
    """Parse every config.pbtxt under ``root`` and check the ensemble; returns problems."""
    configs: dict[str, Any] = {}
    problems: list[str] = []
    for path in sorted(root.glob("*/config.pbtxt")):
        try:
            cfg = parse_config(path.read_text("utf-8"))
        except UsageError:
            raise
        except Exception as exc:
            problems.append(f"{path.parent.name}: does not parse ({exc})")
            continue
        if cfg.name != path.parent.name:
            problems.append(f"{path}: name {cfg.name!r} differs from its folder")
        configs[cfg.name] = cfg
    return problems + check_ensemble(configs)
