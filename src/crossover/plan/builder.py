"""Assemble a plan: resolve the model, check it, render the per-engine files."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from pathlib import Path

from crossover.advise.model import ModelFacts, load_model, quant_from_config
from crossover.advise.rules import cite, normalize_quant, tp_heads_verdict, version_key
from crossover.engines import registry
from crossover.engines.spec import EngineSpec, PlanTraits
from crossover.errors import UsageError, check_port
from crossover.plan import commands
from crossover.plan.commands import PlanLaunch
from crossover.plan.request import Built, Plan, PlanRequest, resolve_vars
from crossover.plan.script import command_line, exports, script, var

PLAN_SCHEMA = "crossover.plan/1"
Writer = Callable[[PlanRequest, PlanLaunch, ModelFacts | None, Plan, list[str], list[str]], Built]
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _resolve(spec: str) -> tuple[str, ModelFacts | None, list[str]]:
    """(model reference for the engine, facts if known, notes)."""
    path = Path(spec).expanduser()
    if path.exists():
        facts = load_model(spec)
        target = path.parent if path.name == "config.json" else path
        return str(target.resolve()), facts, []
    try:
        facts = load_model(spec)
    except UsageError:
        if _HF_ID.match(spec):
            return (
                spec,
                None,
                [
                    f"{spec} is not local: treated as a Hugging Face repo id; "
                    "head-divisibility and quant checks skipped"
                ],
            )
        raise
    hub = next((a for a in _known_aliases(facts.name) if "/" in a), spec)
    return hub, facts, [f"known model {facts.name}: served as {hub} ({facts.source})"]


def _known_aliases(name: str) -> list[str]:
    from crossover.advise.model import _known

    entry = _known().get(name, {})
    aliases: list[str] = entry.get("aliases", [])
    return aliases


def plan_engines() -> tuple[str, ...]:
    """The engines ``crossover plan`` writes deployments for (their spec has ``plan``)."""
    return registry.with_trait("plan")


def _traits(engine: str) -> tuple[EngineSpec, PlanTraits]:
    spec = registry.ENGINES.get(engine)
    if spec is None or spec.plan is None:
        raise UsageError(f"--engine must be one of {', '.join(plan_engines())}")
    return spec, spec.plan


def _checks(req: PlanRequest, facts: ModelFacts | None, quant: str) -> list[str]:
    engine, traits = _traits(req.engine)
    rules: list[str] = []
    is_gguf = quant.startswith("gguf-")
    formats = traits.formats
    from crossover.plan.triton_hosted import ENSEMBLE, hosted_choices, hosted_traits

    hosted = registry.ENGINES.get(req.hosted) if traits.hosts else None
    hosted_load_format = hosted is not None and (
        hosted.triton_hosted is not None and hosted.triton_hosted.load_format
    )
    if req.load_format is not None and not (traits.load_format or hosted_load_format):
        raise UsageError("--load-format is for vLLM (--engine vllm, or triton --hosted vllm)")
    if req.bls and not (traits.hosts and req.hosted == ENSEMBLE):  # else dropped unsaid
        raise UsageError(
            "--bls adds a model to Triton's TensorRT-LLM ensemble: it is for "
            "--engine triton without --hosted"
        )
    if not traits.hosts:
        if req.hosted != ENSEMBLE or req.instances is not None:
            raise UsageError("--hosted and --instances are for --engine triton")
    elif req.hosted != ENSEMBLE:
        if req.hosted not in hosted_choices():
            raise UsageError(f"--hosted must be one of {', '.join(hosted_choices())}")
        formats = hosted_traits(req.hosted).formats
    elif req.instances is not None:
        raise UsageError(
            "--instances sets a Python-backend model's instances (--hosted llamacpp or vllm); "
            "the ensemble's scale with --max-concurrency"
        )
    if formats == "gguf":
        if not is_gguf and quant not in ("bf16", "fp16"):
            raise UsageError(
                f"llama.cpp does not run {quant} checkpoints: pick a GGUF quant "
                "such as gguf-q8_0 (rule format-engine)"
            )
        rules.append("llamacpp-split-modes")
        return rules
    if is_gguf:
        raise UsageError(f"{quant} runs on llama.cpp only (rule format-engine)")
    if formats == "16-bit" and quant not in ("bf16", "fp16"):
        raise UsageError(f"{engine.display_name} plans cover bf16/fp16 only")
    if facts is not None:
        bad = tp_heads_verdict(
            engine.tp_heads_rule or "tp-divides-heads",
            req.tp,
            facts.attention_heads,
            facts.kv_heads,
        )
        if bad is not None:
            raise UsageError(f"{bad.reason} of {facts.name} (rule {bad.rule})")
        rules.append("tp-divides-heads")
    tps = engine.custom_allreduce_tps
    if tps is not None and req.tp > 1 and req.tp not in tps:
        rules.append("vllm-custom-allreduce")
    return rules


def _writer(traits: PlanTraits) -> Writer:
    module, _, attr = traits.writer.partition(":")
    writer: Writer = getattr(importlib.import_module(module), attr)
    return writer


def make_plan(req: PlanRequest) -> Plan:
    _, traits = _traits(req.engine)
    if req.tp < 1 or req.pp < 1 or req.max_concurrency < 1 or req.max_seq_len < 16:
        raise UsageError("--tp, --pp and --max-concurrency must be >= 1, --max-seq-len >= 16")
    check_port(req.port)
    version_key(req.trtllm_version)
    model_ref, facts, notes = _resolve(req.model)
    ckpt_quant = quant_from_config(facts) if facts is not None else None
    quant = normalize_quant(req.quant or ckpt_quant or "bf16")
    rules = _checks(req, facts, quant)
    online = bool(facts is not None and ckpt_quant is None and quant not in ("bf16", "fp16"))
    if online and traits.online_quants is not None and quant not in traits.online_quants:
        raise UsageError(
            f"{req.engine} quantizes online to fp8 only: {quant} needs a pre-quantized checkpoint"
        )
    spec = PlanLaunch(
        model=model_ref,
        tp=req.tp,
        pp=req.pp,
        quant=quant,
        online_quant=online,
        max_concurrency=req.max_concurrency,
        max_seq_len=req.max_seq_len,
        max_num_tokens=max(8192, req.max_seq_len),
        port=req.port,
        cuda_graphs=req.cuda_graphs,
        moe=bool(facts is not None and facts.is_moe),
        load_format=req.load_format,
    )
    plan = Plan()
    graphs, build, serve, env = _writer(traits)(req, spec, facts, plan, notes, rules)
    rules += ["seed-5-cuda-graphs-verify", "seed-6-rerun-sweep"]
    plan.plan = {
        "schema": PLAN_SCHEMA,
        "engine": req.engine,
        "model": {
            "ref": model_ref,
            "spec": req.model,
            "name": facts.name if facts else None,
            "checkpoint_quant": ckpt_quant,
            "attention_heads": facts.attention_heads if facts else None,
            "moe": facts.is_moe if facts else None,
        },
        "config": {
            "tp": req.tp,
            "pp": req.pp,
            "quant": quant,
            "max_concurrency": req.max_concurrency,
            "max_seq_len": req.max_seq_len,
            "port": req.port,
            **({"trtllm_version": req.trtllm_version} if traits.versioned else {}),
        },
        "expect": {
            "cuda_graphs": graphs,
            "tp": req.tp,
            "quant": None if quant in ("bf16", "fp16") else quant,
        },
        "commands": {"build": build, "serve": serve, "env": env},
        "files": sorted([*plan.files, "plan.json"]),
        "rules": cite(rules),
        "notes": notes,
    }
    plan.files["plan.json"] = json.dumps(plan.plan, indent=2) + "\n"
    return plan


def _engine_script(
    req: PlanRequest, spec: PlanLaunch, plan: Plan, variables: dict[str, str], model_ref: str
) -> tuple[list[str], dict[str, str]]:
    argv, env, unset = commands.engine_argv(
        req.engine, spec.model_copy(update={"model": model_ref})
    )
    lines = exports(env, unset)
    lines.append("exec " + command_line(argv))
    plan.files["serve.sh"] = script(f"serve {req.model} with {req.engine}", variables, lines)
    plan.executable.append("serve.sh")
    return resolve_vars(argv, variables), env


def serve_script(
    req: PlanRequest,
    spec: PlanLaunch,
    facts: ModelFacts | None,
    plan: Plan,
    notes: list[str],
    rules: list[str],
) -> Built:
    del facts
    variables = {"MODEL": spec.model}
    argv, env = _engine_script(req, spec, plan, variables, var("MODEL"))
    if spec.online_quant:
        notes.append(f"{req.engine} quantizes the 16-bit checkpoint to fp8 at load time")
    if spec.moe and spec.tp > 1:
        notes.append("MoE with TP: expert parallelism enabled (rule seed-1-engine-choice)")
    engine = registry.get(req.engine)
    if engine.freeze_gc_path is not None:
        # a deployment step after the launch line: the engine must be up and warmed first
        url = f"http://{spec.host}:{spec.port}{engine.freeze_gc_path}"
        notes.append(
            f"after warm-up, POST {url} (curl -X POST {url}): {engine.display_name}'s "
            "front end otherwise stops 0.5-0.74 s for each full garbage collection under "
            "load, which every request in flight waits out (measured on an H100: none of "
            "0.4 s or more after it, a few of 0.05-0.07 s at 20 requests/s; rule "
            "sglang-frontend-gc)"
        )
        rules.append("sglang-frontend-gc")
    return spec.cuda_graphs, [], argv, env


def gguf_script(
    req: PlanRequest,
    spec: PlanLaunch,
    facts: ModelFacts | None,
    plan: Plan,
    notes: list[str],
    rules: list[str],
) -> Built:
    del facts
    quant = spec.quant or "bf16"
    build: list[list[str]] = []
    model_var = var("MODEL")
    variables = {"MODEL": spec.model}
    if not spec.model.endswith(".gguf"):
        outtype = "bf16" if quant in ("bf16", "gguf-bf16") else "f16"
        f16 = var("GGUF_DIR", f"/model-{outtype}.gguf")
        build.append(
            [
                "python3",
                var("LLAMA_CPP_DIR", "/convert_hf_to_gguf.py"),
                var("MODEL"),
                "--outtype",
                outtype,
                "--outfile",
                f16,
            ]
        )
        final = f16
        if quant.startswith("gguf-") and quant not in ("gguf-f16", "gguf-bf16"):
            qname = quant.removeprefix("gguf-")
            final = var("GGUF_DIR", f"/model-{qname}.gguf")
            build.append(["llama-quantize", f16, final, qname.upper()])
        variables = {"MODEL": spec.model, "LLAMA_CPP_DIR": "/opt/llama.cpp", "GGUF_DIR": "./gguf"}
        model_var = final
        notes.append("the checkpoint is converted to GGUF first (rule format-engine)")
        rules.append("format-engine")
    graphs = commands.llamacpp_graphs_on(spec)
    if spec.tp > 1:
        notes.append("--split-mode row disables CUDA graphs in llama.cpp")
    if build:
        cmds = ['mkdir -p "${GGUF_DIR}"'] + [command_line(c) for c in build]
        plan.files["build.sh"] = script(f"convert {req.model} to GGUF", variables, cmds)
        plan.executable.append("build.sh")
    argv, env = _engine_script(
        req, spec.model_copy(update={"cuda_graphs": graphs}), plan, variables, model_var
    )
    return graphs, [resolve_vars(c, variables) for c in build], argv, env


def write_plan(plan: Plan, out: Path) -> list[Path]:
    """Write every file under ``out`` (created); scripts are made executable."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: {exc.strerror}") from exc
    written = []
    for rel, content in sorted(plan.files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, "utf-8")
        if rel in plan.executable:
            path.chmod(0o755)
        written.append(path)
    return written
