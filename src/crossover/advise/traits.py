"""The advisor's engine traits (``data/traits.yaml``): what it knows of each engine
beyond the engine's spec, as data, so the advice code asks a trait and names no engine.

The spec (``crossover.engines.spec.EngineSpec``) holds what the engine is: its engine
order (``advise.preference``), its borrowed profile, its TP-heads rule, its custom
all-reduce sizes, its expert-parallel flag, whether its model is one GGUF file. This
table holds how the advisor lays it out and what it says of it: its layouts (TP x PP, a
layer split, one device), the rules and notes its candidates carry, the flags the advice
asks for, the names users give it.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

from crossover.engines import registry

Layout = Literal["tensor", "layer-split", "single-device"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RuleNote(_Strict):
    """A rule id and the note (or reason) the advice adds with it."""

    rule: str
    note: str


class HostPromptCache(_Strict):
    """The flag that turns the engine's host prompt cache off, and the rule that says why."""

    flag: str
    rule: str
    reason: str


class Slots(_Strict):
    """The engine's parallel slots when its flag is not given."""

    default: int
    flag: str
    rule: str


class EngineTraits(_Strict):
    """One engine's row of ``data/traits.yaml`` (the file's header says each field)."""

    prose: str | None = None
    aliases: tuple[str, ...] = ()
    layout: Layout = "tensor"
    pipeline_rule: str | None = None
    pipeline_over_tcp: RuleNote | None = None
    multi_gpu_rule: str | None = None
    cpu_moe_offload_rule: str | None = None
    custom_allreduce_rule: str | None = None
    moe_tensor_parallel: bool = False
    kv_fraction_flag: str | None = None
    quant_from_own_checkpoint: bool = False
    kv_budget_note: RuleNote | None = None
    latency_note: RuleNote | None = None
    host_prompt_cache: HostPromptCache | None = None
    slots: Slots | None = None

    @property
    def tensor_parallel(self) -> bool:
        """Its candidates may split a model's layers' tensors over GPUs (TP > 1)."""
        return self.layout == "tensor"

    @property
    def layer_split(self) -> bool:
        """Several GPUs hold a layer split (PP stages), never TP."""
        return self.layout == "layer-split"


class _Table(_Strict):
    engines: dict[str, EngineTraits]


@cache
def table() -> dict[str, EngineTraits]:
    """Every listed engine's traits; an engine the registry does not know is refused."""
    text = resources.files("crossover.advise").joinpath("data/traits.yaml").read_text("utf-8")
    engines = _Table.model_validate(yaml.safe_load(text)).engines
    unknown = sorted(set(engines) - set(registry.names()))
    if unknown:
        raise ValueError(f"data/traits.yaml: no engine named {', '.join(unknown)}")
    return engines


def of(engine: str) -> EngineTraits:
    """The engine's traits (every default for an engine the table does not list)."""
    return table().get(engine, EngineTraits())


def prose(engine: str) -> str:
    """The engine's name in a sentence: ``llama.cpp``, ``TensorRT-LLM``, else its name."""
    return of(engine).prose or engine


def canonical(name: str) -> str:
    """A user's engine name as the registry spells it (``llama.cpp`` -> ``llamacpp``);
    a name that is no alias comes back lower-cased and stripped."""
    key = name.strip().lower()
    for engine, traits in table().items():
        if key in traits.aliases:
            return engine
    return key


def cpu_offload_engine() -> str:
    """The engine whose candidates keep a MoE's experts in host memory (its profile is the
    GPU side of the offload model)."""
    found = [e for e, t in table().items() if t.cpu_moe_offload_rule is not None]
    if len(found) != 1:
        raise ValueError(f"data/traits.yaml: want one engine with cpu_moe_offload_rule: {found}")
    return found[0]
