"""The sweep YAML reference (``docs/sweep-yaml.md``), generated from the config models.

``python -m crossover.sweep.reference`` prints it; ``--write`` rewrites the committed
file. A test compares the two, so the reference cannot drift from the models.
"""

from __future__ import annotations

import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from crossover.analysis.schema import RooflineFacts
from crossover.engines.config import EngineConfig
from crossover.spec.limits import Limits, Timeouts
from crossover.spec.load import Warmup
from crossover.spec.slo import Slo
from crossover.spec.workload import Workload
from crossover.sweep.config import AfterStartConfig, ReplicasConfig, SweepConfig, TargetConfig

#: (heading, where the keys go, model), in the order a reader meets them; the top level
#: is the sweep's own keys, then the parts it is built from (``crossover.spec``)
SECTIONS: tuple[tuple[str, str, type[BaseModel] | tuple[type[BaseModel], ...]], ...] = (
    ("Top level", "the top of the file", SweepConfig),
    (
        "Top level: workload",
        "the top of the file too: the workload part, declared once for `crossover run`, "
        "`sweep` and `capacity` (`crossover.spec.workload`)",
        Workload,
    ),
    (
        "Top level: warm-up and limits",
        "the top of the file too: the warm-up and limits parts (`crossover.spec.load`, "
        "`crossover.spec.limits`), as `crossover run` takes them",
        (Warmup, Limits),
    ),
    ("targets", "each item of `targets:`", TargetConfig),
    ("launch", "a target's `launch:` block (the engine launch config)", EngineConfig),
    (
        "launch: replicas",
        "a target's `launch:` block too, beside the engine's: N identical engines, "
        "the load round robin over them (logs `engines/NAME.log`, `NAME-r1.log`, ...)",
        ReplicasConfig,
    ),
    (
        "launch: freeze_gc",
        "a target's `launch:` block too: what the sweep does to the started engine besides "
        "sending it load",
        AfterStartConfig,
    ),
    ("timeouts", "`timeouts:`", Timeouts),
    ("roofline", "each item of `roofline:` (or a target's `roofline:`)", RooflineFacts),
)

HEADER = """\
# Sweep YAML reference

Generated from the config models by `python -m crossover.sweep.reference --write`;
do not edit by hand. `crossover sweep --config FILE` reads these keys; an unknown key
is refused with the closest valid one. Flags given with `--config` override the file.

`crossover sweep --config FILE --check` checks the whole file and measures nothing: each
target's knobs against its engine (the launch command is built and shown), model paths
(a GGUF file's header is opened: a file that is not one is refused here, not at launch),
executables, fixed ports, URLs, the tokenizer and prompt files, prompt + output tokens
against a launched engine's `context_tokens`, every level's run as `crossover run`
validates it (refused in the same words: e.g. `sessions` with `duration_s_per_level`),
roofline entries naming real targets, a launched engine's tensor x pipeline parallel size
(`--tensor-parallel-size 4`, `--tp-size`, trtllm-serve's `--tp_size` or its options file's
`tensor_parallel_size`; times vLLM's `--data-parallel-size`/`-dp` and SGLang's
`--dp-size` without `--enable-dp-attention`; a launch over several nodes, `--nnodes`,
`--data-parallel-address`, ..., and llama.cpp have none) against the GPUs it will see
(each replica's `gpus_per_replica`, else its env's or crossover's own
`CUDA_VISIBLE_DEVICES`, else the machine's as NVML counts them; not checked where neither
says); exit 0, or 2 with every problem listed. A schema mistake (an unknown key, a bad
value, an unknown engine) lists every one in its line. Notes (exit 0) say what would run but
measure something other than intended: closed-loop levels above a launched target's slots
(`parallel` x `replicas` x a `--data-parallel-size` in `extra_args`: the requests beyond
wait in the engine's queue, and TTFT there counts the wait), and an SGLang `parallel`
above the decode batches it captures CUDA graphs for on its own (256 below TP 4;
`cuda_graphs: true` captures up to `parallel`).
A sweep that runs does the same before its first level, so a mistake in the last target
never waits for the first ones to be measured. For a config
written for another machine (a GPU host, `/tmp/xo/...` paths), `--check --remote` checks
everything but what only that machine can answer (model paths, executables, ports, URLs,
tokenizer and prompt files); a sweep run with `--ray` skips those too (the paths are the
nodes'). A URL target must answer as an LLM server of its dialect (`/v1/models`,
llama.cpp's `/props`, Triton's `/v2/models/NAME`): a plain web server is refused with one
line (its status and the start of its body); where the check cannot ask (`--ray`), the
target's first level does, and the target fails while the others are measured.

The workload keys have flags of the same meaning as `crossover run`'s, which override the
file: `--endpoint` (`endpoint`), `--shared-prefix` (`shared_prefix`), `--turns` and
`--think-s` (`sessions`), `--trace` (`trace`), `--prompts` (`prompts_file`), and
`--prompt-lengths dataset` (`input_tokens: null` beside `prompts_file`: each prompt as
written, the same prompts to every engine). On resume, `--redo NAME@LEVEL[,LEVEL]`
measures every repeat of those levels of that target again (`--redo NAME`: all of its
levels), for an outlier repeat the sweep flagged; `--redo-invalid` redoes the runs that
did not verify.

```yaml
name: slots
concurrency: [1, 2, 4, 8]
output_tokens: 64
repeats: 2
targets:
  - name: one-slot
    launch: {engine: llamacpp, model: /models/gemma-3-270m.gguf, parallel: 1}
  - name: vllm
    url: http://127.0.0.1:8000
    engine: vllm
    model: google/gemma-3-270m
  - name: vllm-dp2          # two replicas, request i to replica i mod 2
    urls: [http://127.0.0.1:8001, http://127.0.0.1:8002]
    engine: vllm
    model: google/gemma-3-270m
```

With `crossover sweep --ray ADDRESS|auto` each target is a Ray actor placed by its
`resources:` (a launched engine asks for its GPUs by default), e.g.
`resources: {GPU: 1, node-b: 1}` for a node started with
`ray start --resources '{"node-b": 1}'`; see the README, "Beyond one machine".
"""


def type_name(annotation: Any) -> str:
    """``int | None`` -> ``integer or null``; ``list[int]`` -> ``list of integer``."""
    names = {
        int: "integer",
        float: "number",
        str: "text",
        bool: "true/false",
        Path: "path",
        Slo: "text or mapping",
    }
    if annotation in names:
        return names[annotation]
    if annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is typing.Annotated:  # Annotated[int, Field(ge=1)]: the bounds are in the text
        return type_name(args[0])
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return re.sub(r"^<class '(.*)'>$", r"\1", str(annotation))


def default_text(field: Any) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(keys below)"
        return f"`{value!r}`" if value else "empty"
    if field.default is None or field.default is PydanticUndefined:
        return "-"
    value = field.default
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


#: the parts a model is built from: their keys are shown in their own sections
PARTS: tuple[type[BaseModel], ...] = (Workload, Warmup, Limits)


def rows(model: type[BaseModel]) -> list[str]:
    """One table row per key the model declares itself (a part's keys are the part's)."""
    inherited = {
        k
        for part in PARTS
        if part is not model and issubclass(model, part)
        for k in part.model_fields
    }
    out = []
    for name, field in model.model_fields.items():
        if name in inherited:
            continue
        meaning = (field.description or "").replace("|", "\\|")
        out.append(
            f"| `{name}` | {type_name(field.annotation)} | {default_text(field)} | {meaning} |"
        )
    return out


def render() -> str:
    out = [HEADER]
    for heading, where, models in SECTIONS:
        table = ["| key | type | default | meaning |", "|---|---|---|---|"]
        for model in models if isinstance(models, tuple) else (models,):
            table += rows(model)
        out.append(f"## {heading}\n\nKeys of {where}.\n\n" + "\n".join(table) + "\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args == ["--write"]:
        path = Path(__file__).resolve().parents[3] / "docs" / "sweep-yaml.md"
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    elif args:
        print("usage: python -m crossover.sweep.reference [--write]", file=sys.stderr)
        return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    from crossover.pipes import run_tool

    run_tool(main)
