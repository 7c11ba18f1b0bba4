"""Rules as cited data (``data/rules.yaml``) and the checks that apply them.

Each check returns either ``None`` (passes) or a ``Verdict`` naming the rule id, so a
rejected candidate always says which rule rejected it and where that rule comes from.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel

from crossover.advise import traits
from crossover.engines import registry
from crossover.errors import UsageError, parse_names
from crossover.versions import version_key as version_key

#: the engines the advisor weighs: those whose spec has advisor traits
ENGINES: tuple[str, ...] = registry.with_trait("advise")

QUANTS: tuple[str, ...] = (
    "bf16",
    "fp16",
    "fp8",
    "fp8-block",
    "fp8-rowwise",
    "nvfp4",
    "mxfp4",
    "int4-awq",
    "int4-gptq",
)
GGUF_QUANTS: tuple[str, ...] = (
    "f16",
    "bf16",
    "q8_0",
    "q6_k",
    "q5_k_m",
    "q5_0",
    "q4_k_m",
    "q4_0",
    "q3_k_m",
    "q2_k",
)


class Rule(BaseModel):
    id: str  # stable: the advice JSON carries it
    title: str  # short and readable: what the terminal shows
    kind: str
    text: str
    source: str


class Verdict(BaseModel):
    """A rule's judgement on a candidate: why, and which rule."""

    rule: str
    reason: str


class KernelCheck(BaseModel):
    ok: bool
    rule: str
    reason: str
    notes: list[str] = []
    convert: str | None = None


@cache
def _data() -> dict[str, Any]:
    text = resources.files("crossover.advise").joinpath("data/rules.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@cache
def all_rules() -> dict[str, Rule]:
    return {r["id"]: Rule.model_validate(r) for r in _data()["rules"]}


class MoeDevice(BaseModel):
    device_name: str
    files: list[str] = []  # looked up and present
    missing: list[str] = []  # looked up and absent
    note: str | None = None


class MoeConfigTable(BaseModel):
    """An engine's shipped fused-MoE kernel configs, per GPU (``moe_configs`` in the data)."""

    source: str
    devices: dict[str, MoeDevice]


@cache
def moe_config_table() -> dict[str, MoeConfigTable]:
    raw = _data().get("moe_configs") or {}
    return {engine: MoeConfigTable.model_validate(t) for engine, t in raw.items()}


class UntunedRange(BaseModel):
    batch: tuple[int, int]  # decode batch (tokens per step), inclusive
    slower_pct: tuple[float, float]  # decode step slower than on a tuned config, low-high


class UntunedClass(BaseModel):
    """A GPU class's cost of running vLLM's fused-MoE kernel on default tiles
    (``moe_untuned`` in the data)."""

    id: str
    title: str
    gpus: list[str] = []  # gpus.yaml ids; empty: matched by max_n, or every other GPU
    max_n: int | None = None  # expert FFN width per GPU at or below which this applies
    ranges: list[UntunedRange]
    source: str


@cache
def moe_untuned_classes() -> list[UntunedClass]:
    raw = (_data().get("moe_untuned") or {}).get("classes") or []
    return [UntunedClass.model_validate(c) for c in raw]


def rule(rule_id: str) -> Rule:
    try:
        return all_rules()[rule_id]
    except KeyError:
        raise KeyError(f"rule {rule_id!r} is not in rules.yaml") from None


def cite(rule_ids: list[str]) -> list[dict[str, str]]:
    """Rule ids with their titles and sources, deduplicated, in first-seen order."""
    seen: dict[str, dict[str, str]] = {}
    for rid in rule_ids:
        if rid not in seen:
            r = rule(rid)
            seen[rid] = {"id": rid, "title": r.title, "source": r.source}
    return list(seen.values())


def normalize_quant(quant: str | None) -> str:
    """Canonical quant name: bf16, fp8, fp8-block, nvfp4, int4-awq, gguf-q4_k_m, ..."""
    if quant is None:
        return "bf16"
    q = quant.strip().lower().replace("_", "-")
    aliases = {
        "float16": "fp16",
        "half": "fp16",
        "bfloat16": "bf16",
        "auto": "bf16",
        "fp8-block-scaled": "fp8-block",
        "fp8-blockwise": "fp8-block",
        "awq": "int4-awq",
        "gptq": "int4-gptq",
        "w4a16-awq": "int4-awq",
        "fp4": "nvfp4",
    }
    q = aliases.get(q, q)
    if q.startswith("gguf"):
        body = q.removeprefix("gguf").lstrip("-:").replace("-", "_")
        if body not in GGUF_QUANTS:
            raise UsageError(f"unknown GGUF quant {quant!r}; known: {', '.join(GGUF_QUANTS)}")
        return f"gguf-{body}"
    if q.replace("-", "_") in GGUF_QUANTS and q not in QUANTS:
        return f"gguf-{q.replace('-', '_')}"
    if q not in QUANTS:
        raise UsageError(
            f"unknown quant {quant!r}; known: {', '.join(QUANTS)}, gguf-<{'|'.join(GGUF_QUANTS)}>"
        )
    return q


def parse_engines(text: str) -> list[str]:
    """``--engines llamacpp,vllm``: the engines to weigh, each one the advisor knows."""
    names = parse_names(text, "--engines", lower=True)
    bad = [n for n in names if n not in ENGINES]
    if bad:
        raise UsageError(f"--engines wants a comma list of {', '.join(ENGINES)}; got {text!r}")
    return names


def parse_versions(text: str | None) -> dict[str, str]:
    """``--engine-versions trtllm=1.2.1,vllm=0.26.0``: engine (any spelling
    ``traits.canonical`` knows) to version."""
    out: dict[str, str] = {}
    for item in parse_names(text, "--engine-versions") if text is not None else []:
        name, sep, version = item.partition("=")
        engine = traits.canonical(name)
        if not sep or engine not in ENGINES or not version.strip():
            raise UsageError(
                f"--engine-versions wants ENGINE=VERSION[,...] with ENGINE in "
                f"{', '.join(ENGINES)}; got {item!r}"
            )
        version_key(version)
        out[engine] = version.strip()
    return out


def kernel_check(engine: str, quant: str, cc_family: str, version: str | None) -> KernelCheck:
    """Is there a kernel for ``quant`` on this architecture in this engine version?"""
    table = _data()["kernels"].get(engine)
    if table is None:
        raise UsageError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    fmt_key = "gguf" if quant.startswith("gguf-") else quant
    fmt = table["formats"].get(fmt_key)
    if fmt is None:
        if registry.get(engine).reads_gguf or fmt_key == "gguf":
            return KernelCheck(
                ok=False,
                rule="format-engine",
                reason=f"{engine} does not run {quant} checkpoints",
            )
        return KernelCheck(
            ok=False,
            rule="seed-2-kernel-check",
            reason=f"{engine} has no {quant} kernels on any architecture ({table['source']})",
        )
    archs = set(fmt.get("archs", []))
    since = fmt.get("since", {}) or {}
    notes = [n for arch, n in (fmt.get("notes") or {}).items() if arch == cc_family]
    if cc_family in archs:
        return KernelCheck(
            ok=True,
            rule="seed-2-kernel-check",
            reason="kernel listed",
            notes=notes,
            convert=fmt.get("convert"),
        )
    if cc_family in since:
        need = str(since[cc_family])
        if version is not None and version_key(version) >= version_key(need):
            return KernelCheck(
                ok=True,
                rule="seed-2-kernel-check",
                reason=f"kernel added in {engine} {need}",
                notes=notes,
            )
        have = version or "unspecified version"
        return KernelCheck(
            ok=False,
            rule="seed-2-kernel-check",
            reason=(
                f"no {quant} kernel for {cc_family.upper()} in {engine} {have} "
                f"(added in {need}; {table['source']})"
            ),
            notes=notes,
        )
    return KernelCheck(
        ok=False,
        rule="seed-2-kernel-check",
        reason=f"no {quant} kernel for {cc_family.upper()} in {engine} ({table['source']})",
    )


def check_tp_heads(engine: str, tp: int, heads: int, kv_heads: int) -> Verdict | None:
    """TP against the heads, for engines that split heads (the spec's ``tp_heads_rule``)."""
    rule = registry.get(engine).tp_heads_rule
    if rule is None:
        return None
    return tp_heads_verdict(rule, tp, heads, kv_heads)


def tp_heads_verdict(rule: str, tp: int, heads: int, kv_heads: int) -> Verdict | None:
    """``rule`` when TP does not divide the attention heads; tp-kv-heads when it neither
    divides nor is a multiple of the KV heads."""
    if tp <= 1:
        return None
    if heads % tp:
        return Verdict(rule=rule, reason=f"TP={tp} does not divide {heads} attention heads")
    if kv_heads % tp and tp % kv_heads:
        return Verdict(
            rule="tp-kv-heads",
            reason=f"TP={tp} neither divides nor is a multiple of {kv_heads} KV heads",
        )
    return None


def kernels() -> dict[str, Any]:
    """The kernel availability table: engine -> {source, formats: {format: archs...}}."""
    table: dict[str, Any] = _data()["kernels"]
    return table
