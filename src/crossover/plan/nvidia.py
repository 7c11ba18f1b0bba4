"""TensorRT-LLM plans: ``trtllm-serve`` (PyTorch backend) and Triton + ``tensorrt_llm``.

``trtllm``: a versioned extra-options YAML (CUDA graphs nested as that version reads
them), ``serve.sh``, ModelOpt quantization when the checkpoint is 16-bit, and
``build_engine.sh`` for the TensorRT-engine path. ``triton``: the engine build
(``convert_checkpoint.py`` or ``quantize.py``, then ``trtllm-build``), a complete model
repository validated against Triton's ``ModelConfig`` when ``tritonclient`` is present,
and a foreground ``tritonserver`` (under ``mpirun`` for several GPUs).
"""

from __future__ import annotations

import yaml

from crossover.advise.model import ModelFacts
from crossover.advise.rules import version_key
from crossover.errors import UsageError
from crossover.plan import commands, triton, trtllm
from crossover.plan.commands import PlanLaunch
from crossover.plan.request import Built, Plan, PlanRequest, resolve_vars
from crossover.plan.script import command_line, explain, script, var


def _trtllm_vars(spec: PlanLaunch, engine_dir: str) -> dict[str, str]:
    return {
        "MODEL_DIR": spec.model,
        "TRTLLM_DIR": "/app/tensorrt_llm",
        "CKPT_DIR": "./trtllm_ckpt",
        "ENGINE_DIR": engine_dir,
    }


def plan_trtllm(
    req: PlanRequest,
    spec: PlanLaunch,
    facts: ModelFacts | None,
    plan: Plan,
    notes: list[str],
    rules: list[str],
) -> Built:
    options = trtllm.extra_llm_api_options(spec, req.trtllm_version)
    plan.files["extra-llm-api-options.yaml"] = (
        f"# trtllm-serve --extra_llm_api_options for TensorRT-LLM {req.trtllm_version}\n"
        + yaml.safe_dump(options, sort_keys=False)
    )
    rules.append("plan-trtllm-cuda-graph-nesting")
    if (note := trtllm.version_note(req.trtllm_version)) is not None:
        notes.append(note)
    variables = {"MODEL": spec.model}
    build: list[list[str]] = []
    serve_model = var("MODEL")
    if spec.online_quant:
        # trtllm-serve (PyTorch backend) loads pre-quantized HF checkpoints: quantize first
        qfmt = trtllm.QFORMAT.get(spec.quant or "")
        if qfmt is None:
            raise UsageError(f"no quantization recipe for {spec.quant}")
        variables.update({"TRTLLM_DIR": "/app/tensorrt_llm", "QUANT_DIR": "./quantized"})
        if version_key(req.trtllm_version) < version_key("1.0.0rc0"):
            variables["MODELOPT_DIR"] = "/opt/TensorRT-Model-Optimizer"
        build.append(trtllm.hf_quantize_command(spec, req.trtllm_version))
        serve_model = var("QUANT_DIR")
        notes.append("the 16-bit checkpoint is quantized (HF export) before serving")
    if build:
        plan.files["build.sh"] = script(
            f"quantize {req.model} for trtllm-serve", variables, [command_line(c) for c in build]
        )
        plan.executable.append("build.sh")
    # the TensorRT-engine path (also what Triton serves), for reference and --backend tensorrt
    try:
        _engine_build_script(plan, spec, facts, req, "build_engine.sh", "./trtllm_engine")
    except UsageError as exc:
        notes.append(f"no build_engine.sh (TensorRT-engine path): {exc}")
    argv = commands.trtllm_serve_args(
        spec.model_copy(update={"model": serve_model}),
        var("PLAN_DIR", "/extra-llm-api-options.yaml"),
    )
    plan.files["serve.sh"] = script(
        f"serve {req.model} with trtllm-serve {req.trtllm_version}",
        variables,
        [
            explain("PLAN_DIR"),
            'PLAN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
            "exec " + command_line(argv),
        ],
    )
    plan.executable.append("serve.sh")
    notes.append(
        "check the startup log for the CUDA graph batch sizes (rule seed-5-cuda-graphs-verify)"
    )
    return (
        trtllm.graphs_enabled(options),
        [resolve_vars(c, variables) for c in build],
        resolve_vars(argv, variables),
        {},
    )


def _engine_build_script(
    plan: Plan,
    spec: PlanLaunch,
    facts: ModelFacts | None,
    req: PlanRequest,
    name: str,
    engine_dir: str,
    extra: list[str] | None = None,
) -> list[list[str]]:
    arch = facts.architecture if facts else None
    cmds = trtllm.build_commands(spec, arch, req.trtllm_version)
    body = [command_line(c) for c in cmds] + (extra or [])
    plan.files[name] = script(
        f"convert {req.model} and build a TensorRT-LLM {req.trtllm_version} engine "
        f"(tp={spec.tp}, pp={spec.pp}, {spec.quant})",
        _trtllm_vars(spec, engine_dir),
        body,
    )
    plan.executable.append(name)
    return cmds


def plan_triton(
    req: PlanRequest,
    spec: PlanLaunch,
    facts: ModelFacts | None,
    plan: Plan,
    notes: list[str],
    rules: list[str],
) -> Built:
    if req.hosted != "tensorrtllm":
        from crossover.plan.triton_hosted import plan_hosted

        return plan_hosted(req, spec, plan, notes)
    engine_dir = req.engine_dir
    repo = triton.repository(
        req.max_concurrency, spec.model, engine_dir, cuda_graphs=spec.cuda_graphs, with_bls=req.bls
    )
    for rel, content in repo.items():
        plan.files[f"triton_model_repo/{rel}"] = content
    pythons = ["preprocessing", "postprocessing"] + (["tensorrt_llm_bls"] if req.bls else [])
    copy = [
        f'cp -r "${{TRTLLM_DIR}}/triton_backend/all_models/inflight_batcher_llm/{m}/1/." '
        f'"${{PLAN_DIR}}/triton_model_repo/{m}/1/"'
        for m in pythons
    ]
    extra = [explain("PLAN_DIR"), 'PLAN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"', *copy]
    build = _engine_build_script(plan, spec, facts, req, "build.sh", engine_dir, extra)
    pre, post = triton.instance_counts(req.max_concurrency)
    rules += ["plan-triton-instance-count", "plan-triton-cuda-graph-mode"]
    notes.append(
        f"preprocessing x{pre}, postprocessing x{post} instances for concurrency "
        f"{req.max_concurrency} (rule plan-triton-instance-count)"
    )
    notes.append(
        f"tensorrt_llm reads the engine from {engine_dir} (gpt_model_path); "
        "build.sh builds it there (--engine-dir changes it)"
    )
    argv = triton.server_argv(spec.tp * spec.pp, var("PLAN_DIR", "/triton_model_repo"), req.port)
    plan.files["serve.sh"] = script(
        f"serve {req.model} with Triton + tensorrt_llm {req.trtllm_version}",
        {},
        [
            explain("PLAN_DIR"),
            'PLAN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
            "exec " + command_line(argv),
        ],
    )
    plan.executable.append("serve.sh")
    try:
        problems = triton.validate_repository_files(repo)
    except UsageError:
        problems = None
        notes.append("tritonclient not installed: configs not validated here")
    if problems:
        raise UsageError(f"generated Triton repository is inconsistent: {problems[0]}")
    variables = {**_trtllm_vars(spec, engine_dir), "PLAN_DIR": "."}
    return (
        spec.cuda_graphs,
        [resolve_vars(c, variables) for c in build],
        resolve_vars(argv, variables),
        {},
    )
