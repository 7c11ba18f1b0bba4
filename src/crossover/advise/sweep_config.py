"""``--emit-sweep``: a sweep config that measures the advice's top candidates.

The shape is the one the sweep runner reads (``name``, ``concurrency``, ``targets`` with a
``launch`` block per target) and only with what each engine's adapter takes, so the file
passes ``crossover sweep --check``: a model path per engine family (a GGUF file for
llama.cpp, an HF folder or hub id for vLLM, SGLang, TensorRT-LLM and transformers), no
``quant`` where the quantization is the file's (llama.cpp, TensorRT-LLM) or the
checkpoint's config (vLLM and SGLang read a pre-quantized checkpoint's own; only FP8 is
asked for, since both quantize a 16-bit checkpoint to it at load), no batch or parallel
knobs an engine sizes itself. A candidate whose files were not given is left out, with
what to give; the measurements come back through ``--results``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from crossover import defaults
from crossover.advise import traits
from crossover.engines import registry
from crossover.errors import UsageError


def _reads_gguf(engine: str) -> bool:
    """The engine's model is one GGUF file; the others read an HF folder (or a hub id)."""
    plan = registry.get(engine).plan
    return plan is not None and plan.formats == "gguf"


def _online_quants(engine: str) -> tuple[str, ...]:
    """Quantizations the engine applies itself to a 16-bit checkpoint at load time."""
    plan = registry.get(engine).plan
    return (plan.online_quants or ()) if plan is not None else ()


#: 16-bit weights: nothing to ask for
UNQUANTIZED = ("bf16", "fp16", "gguf-bf16", "gguf-f16")


class Launch(BaseModel):
    model: str
    tp: int | None = None
    pp: int | None = None
    parallel: int | None = None
    cuda_graphs: bool | None = None
    #: llama.cpp's host prompt cache (--cache-ram): 0, rule llamacpp-host-prompt-cache
    prompt_cache_mib: int | None = None
    quant: str | None = None
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class SweepTarget(BaseModel):
    name: str
    engine: str
    launch: Launch


class EmittedSweep(BaseModel):
    """The sweep file ``--emit-sweep`` writes: the keys it sets of the one sweep config
    (``crossover.sweep.config.SweepConfig``, which reads it back); no defaults of its own."""

    name: str
    concurrency: list[int]
    requests_per_level: int
    output_tokens: int
    input_tokens: int
    #: the advice's shared prefix as the sweep's workload: one prefix of N tokens before
    #: each prompt's own ``input_tokens`` (crossover sweep's ``shared_prefix: 1xN``)
    shared_prefix: str | None = None
    repeats: int
    targets: list[SweepTarget]
    #: candidates not in ``targets`` and why (their files were not given, ...)
    left_out: list[str] = Field(default_factory=list, exclude=True)
    #: what the file assumes (a pre-quantized checkpoint, the GGUF's own type)
    notes: list[str] = Field(default_factory=list, exclude=True)

    def to_yaml(self, command: str | None = None) -> str:
        """The sweep YAML, with comments saying where it came from and what it assumes;
        a launch block carries only the keys that are set."""
        lines = ["# Measures the top candidates of crossover advise."]
        if command:
            lines.append(f"# Written by: {command}")
        lines += [
            "# Check it: crossover sweep --config THIS.yaml --check  (--remote for another",
            "# machine's paths); run it: crossover sweep --config THIS.yaml --out DIR; then",
            "# crossover advise ... --results DIR compares the estimates with the measurements.",
        ]
        lines += [f"# note: {n}" for n in self.notes]
        lines += [f"# left out: {n}" for n in self.left_out]
        data = self.model_dump()
        if data.get("shared_prefix") is None:
            del data["shared_prefix"]
        for target, model in zip(data["targets"], self.targets, strict=True):
            target["launch"] = model.launch.model_dump(exclude_defaults=True)
        return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False)


def target_name(engine: str, config: dict[str, Any]) -> str:
    name = f"{engine}-tp{config['tp']}"
    if config.get("pp", 1) > 1:
        name += f"-pp{config['pp']}"
    return f"{name}-{config['quant']}"


def model_files(paths: list[str]) -> tuple[str | None, str | None]:
    """(HF folder or hub id, GGUF file) from the paths given: a ``.gguf`` file is
    llama.cpp's, anything else the other engines'."""
    hf = next((p for p in paths if not p.lower().endswith(".gguf")), None)
    gguf = next((p for p in paths if p.lower().endswith(".gguf")), None)
    return hf, gguf


def _launch(
    engine: str, cfg: dict[str, Any], model: str, parallel: int, checkpoint_quant: str | None
) -> tuple[Launch, str | None]:
    """The launch block of one candidate with only the knobs its engine takes, and a note
    on what the model file must already be."""
    quant = cfg.get("quant")
    tp, pp = int(cfg.get("tp", 1)), int(cfg.get("pp", 1))
    graphs = bool(cfg.get("cuda_graphs", True))
    note = None
    own = traits.of(engine)
    if own.layer_split:
        # the quantization is the GGUF file's; GPUs are split with --split-mode
        split = str(cfg.get("split_mode") or ("layer" if pp > 1 else "none"))
        launch = Launch(
            model=model,
            parallel=parallel,
            cuda_graphs=graphs,
            prompt_cache_mib=0 if own.host_prompt_cache is not None else None,
            extra_args=["--split-mode", split],
        )
        if cfg.get("n_cpu_moe"):  # the offload variant: those layers' experts in host memory
            launch.extra_args += ["--n-cpu-moe", str(int(cfg["n_cpu_moe"]))]
        if quant and quant not in UNQUANTIZED and not quant.startswith("gguf-"):
            note = f"{model} must be a GGUF of the {quant} weights"
        elif (
            quant
            and quant.startswith("gguf-")
            and quant.removeprefix("gguf-") not in (model.lower())
        ):
            note = f"{traits.prose(engine)} serves the GGUF's own type; the advice assumed {quant}"
        return launch, note
    if own.layout == "single-device":
        # continuous batching sizes itself; one device
        return Launch(model=model, cuda_graphs=graphs), None
    ask = None
    if quant and quant not in UNQUANTIZED:
        if quant in _online_quants(engine):
            ask = quant
        elif quant != checkpoint_quant or own.quant_from_own_checkpoint:
            article = "an" if quant[0].lower() in "aeiou" else "a"
            note = (
                f"{model} must be {article} {quant} checkpoint ({engine} reads it from its config)"
            )
    return (
        Launch(
            model=model,
            tp=tp,
            pp=pp if pp > 1 else None,
            parallel=parallel,
            cuda_graphs=graphs,
            quant=ask,
        ),
        note,
    )


def emit_sweep(
    advice: dict[str, Any],
    model: str | None = None,
    *,
    gguf: str | None = None,
    max_targets: int = 4,
    repeats: int = 3,
) -> EmittedSweep:
    """Top recommendation of each regime first, then runners-up, up to ``max_targets``.

    ``model``: the HF folder or hub id vLLM, SGLang, TensorRT-LLM and transformers load;
    ``gguf``: the GGUF file llama.cpp loads (a ``model`` ending in ``.gguf`` counts as
    it). A candidate whose engine has no file here is left out (``left_out``)."""
    if model is not None and gguf is None and model.lower().endswith(".gguf"):
        model, gguf = None, model
    workload = advice["workload"]
    levels: list[int] = list(workload["concurrency"])
    checkpoint_quant = (advice.get("model") or {}).get("quant")

    # a candidate ranked below measured ones only because its figure is borrowed (an engine
    # never measured) goes where it would rank if the borrowed profile held: a sweep is how
    # it gets measured (seed-6-rerun-sweep)
    def order(rec: dict[str, Any]) -> tuple[int, int, int]:
        lent = rec.get("borrowed_rank")
        rank = min(int(rec["rank"]), int(lent["rank_if_it_holds"])) if lent else int(rec["rank"])
        return (rank, 0 if lent else 1, int(rec["concurrency"]))

    recs = sorted(advice["recommendations"], key=order)
    targets: list[SweepTarget] = []
    left_out: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    for rec in recs:
        engine = rec["engine"]
        name = target_name(engine, rec["config"])
        if name in seen:
            continue
        seen.add(name)
        path = gguf if _reads_gguf(engine) else model
        if path is None:
            want = "a GGUF file" if _reads_gguf(engine) else "an HF folder or hub id"
            left_out.append(f"{name}: give --model-path with {want} for {engine}")
            continue
        launch, note = _launch(engine, rec["config"], path, max(levels), checkpoint_quant)
        if note:
            notes.append(f"{name}: {note}")
        targets.append(SweepTarget(name=name, engine=engine, launch=launch))
        if len(targets) >= max_targets:
            break
    shared = int(workload.get("shared_prefix_tokens") or 0)
    return EmittedSweep(
        name=f"advise-{advice['model']['name']}-{advice['hardware']['gpu']}".replace("/", "_"),
        concurrency=levels,
        requests_per_level=defaults.level_requests(max(levels)),
        output_tokens=int(workload["output_tokens"]),
        input_tokens=int(workload["input_tokens"]) - shared,
        shared_prefix=f"1x{shared}" if shared else None,
        repeats=repeats,
        targets=targets,
        left_out=left_out,
        notes=notes,
    )


def sweep_for(advice: dict[str, Any], model: str, paths: list[str]) -> EmittedSweep:
    """``--emit-sweep``'s config; each engine gets the model file it loads. ``model``
    (``--model``) counts where it is a file; a known model name is not, so without
    ``paths`` (``--model-path``) the candidates that need one are left out, and with none
    left this is a usage error saying what to give."""
    if not advice["recommendations"]:
        raise UsageError("--emit-sweep: no candidate fits (rejected above); nothing to measure")
    given = list(paths)
    if Path(model).expanduser().exists():
        given.append(model)
    hf, gguf = model_files(given)
    config = emit_sweep(advice, hf, gguf=gguf)
    if not config.targets:
        raise UsageError(
            f"--emit-sweep: {model!r} names a model, not its files; give --model-path FILE.gguf "
            "(llama.cpp) and/or --model-path HF_FOLDER_OR_ORG/NAME (vLLM, SGLang, TensorRT-LLM, "
            "transformers) so the sweep can launch them"
        )
    return config
