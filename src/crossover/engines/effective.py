"""Which settings took effect: read from an engine's log, checked against expectations.

Facts come, strongest first, from the engine's own log lines (``logpatterns``,
``logs_sglang``, ``logs_moe``), from a line missing once the server was ready, or from
the launch record the log starts with (``crossover.engines.launchrec``): the argv and
environment we started the engine with. A launch fact is *verified* only where the engine
is known to obey it silently; otherwise it records what was requested, and a check
against it is ``unverified``. Lines the user must see come out as ``warnings``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from crossover.engines import logpatterns as lp
from crossover.engines import registry
from crossover.engines.launchrec import (
    HEADER_PREFIX,
    Basis,
    Fact,
    LaunchRecord,
    header_line,
    keep_earlier_log,
    read_header,
)
from crossover.engines.ready import ReadyTime, log_lines, ready_after
from crossover.errors import UsageError, parse_names

__all__ = [
    "ALIASES", "HEADER_PREFIX", "SETTINGS", "Basis", "Check", "EffectiveSettings", "Fact",
    "LaunchRecord", "LogWarning", "Status", "canonical_setting", "check", "detect_engine",
    "effective_settings", "expectations_from_plan", "header_line", "keep_earlier_log",
    "log_warnings", "parse_expect", "read_header", "read_log", "values_match",
]  # fmt: skip

Status = Literal["match", "mismatch", "unverified", "unknown"]

SETTINGS: tuple[str, ...] = (
    "cuda_graphs", "tp", "pp", "quant", "quant_kernel", "dtype", "parallel_slots",
    "context_tokens", "context_total_tokens", "kv_cache_tokens", "kv_cache_gib", "kv_unified",
    "device", "gpu_layers", "flash_attn", "threads", "continuous_batching", "world_size",
    "version", "model", "first_decode_ms_per_token", "gpu_memory_utilization",
    "max_batched_tokens", "torch_compile", "allreduce_backends", "multicast",
    "prompt_cache_mib", "attention_backend", "cuda_graph_max_bs", "cuda_graph_batch_sizes",
    "prefill_cuda_graphs", "prefill_graph_max_tokens", "kv_cache_dtype", "max_prefill_tokens",
    "mixed_chunk", "tokenizer_workers", "schedule_policy", "stream_interval", "metrics",
    "load_format", "ep", "moe_backend", "moe_kernel", "moe_config", "moe_tuned_config",
    "n_expert", "n_expert_used", "moe_experts_on_cpu", "cpu_moe_layers",
    "cpu_tensor_overrides", "triton_models", "backend", "decoupled", "instance_count",
    "hosted_engine",
)  # fmt: skip
ALIASES: dict[str, str] = {
    "graphs": "cuda_graphs",
    "cuda_graph": "cuda_graphs",
    "parallel": "parallel_slots",
    "slots": "parallel_slots",
    "max_batch_size": "parallel_slots",
    "max_num_seqs": "parallel_slots",
    "context": "context_tokens",
    "quantization": "quant",
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "max_num_batched_tokens": "max_batched_tokens",
    "compile": "torch_compile",
    "mem_fraction_static": "gpu_memory_utilization",
    "chunked_prefill_size": "max_batched_tokens",
    "max_running_requests": "parallel_slots",
    "context_length": "context_tokens",
    "context_len": "context_tokens",
    "max_total_num_tokens": "kv_cache_tokens",
    "enable_mixed_chunk": "mixed_chunk",
    "tokenizer_worker_num": "tokenizer_workers",
    "attention": "attention_backend",
    "graph_max_bs": "cuda_graph_max_bs",
    "piecewise_cuda_graphs": "prefill_cuda_graphs",
    "prefill_graphs": "prefill_cuda_graphs",
    "ep_size": "ep",
    "moe_tuned": "moe_tuned_config",
    "cpu_moe": "moe_experts_on_cpu",
}


class LogWarning(BaseModel):
    """A log line the user must see, with where it was and how often it came."""

    key: str
    level: str  # "warning" or "note"
    message: str
    line: int | None = None
    evidence: str | None = None
    count: int = 1
    origin: str | None = None


class EffectiveSettings(BaseModel):
    engine: str
    facts: dict[str, Fact]
    launch: LaunchRecord | None = None
    warnings: list[LogWarning] = []

    def value(self, setting: str) -> lp.Value | None:
        fact = self.facts.get(setting)
        return fact.value if fact else None


def read_log(path: Path) -> str:
    """The log's text; a ``.gz`` log (as results folders keep big ones) is read unpacked.
    Line ends are kept as written (a progress bar's bare "\r" is no line end)."""
    try:
        if path.suffix == ".gz":
            import gzip

            with gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="") as f:
                return f.read()
        with path.open(encoding="utf-8", errors="replace", newline="") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"log file not found: {path}") from None
    except (OSError, EOFError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"cannot read log {path}: {why}") from None


def detect_engine(text: str) -> str | None:
    header = read_header(text)
    if header is not None:
        return header.engine
    for spec in registry.detect_order():
        if any(re.search(rx, text, re.MULTILINE) for rx in spec.detect):
            return spec.name
    return None


def _evidence(line: str, at: int, width: int = 300) -> str:
    """The line, or (a long one, like SGLang's ``ServerArgs(...)``) its part from the match."""
    text = line.strip()
    if len(text) <= width:
        return text
    start = max(0, at - (len(line) - len(line.lstrip())) - 40)
    return ("..." if start else "") + text[start : start + width]


def _match_evidence(pattern: lp.LogPattern, m: re.Match[str] | None) -> str | None:
    if m is None:
        return None
    if pattern.evidence is not None:
        return pattern.evidence(m)
    return _evidence(m.string, m.start(m.lastindex) if m.lastindex else m.start())


def log_warnings(engine: str, lines: list[str]) -> list[LogWarning]:
    """The adapter's warning rules over the log: one entry per rule, at its first line
    counted (a rule with a ``context`` whose line the log has: its ``context_message`` over
    the matches after the first such line, or ``context_none_after`` over those before it
    where none came after; ``WarningRule``)."""
    out: list[LogWarning] = []
    for rule in registry.get(engine).warning_rules:
        found: list[tuple[int, re.Match[str]]] = []
        seam: int | None = None  # the first context line
        for no, line in enumerate(lines, start=1):
            m = rule.regex.search(line)
            if m:
                found.append((no, m))
            elif seam is None and rule.context is not None and rule.context.search(line):
                seam = no
        if not found:
            continue
        message = rule.message
        used, before = found, []
        if seam is not None:
            before = [x for x in found if x[0] < seam]
            after = [x for x in found if x[0] > seam]
            if after:
                assert rule.context_message is not None
                assert rule.context_before is not None
                used, message = after, rule.context_message
                if before:
                    message += rule.context_before.format(
                        **lp.count_words(len(before)), **_gathered(rule, before)
                    )
            else:
                assert rule.context_none_after is not None
                message = rule.context_none_after
        no, m = used[0]
        groups = [g or "" for g in m.groups()]
        out.append(
            LogWarning(
                key=rule.key,
                level=rule.level,
                message=message.format(
                    *groups, **lp.count_words(len(used)), **_gathered(rule, used)
                ),
                line=no,
                evidence=_evidence(m.string, m.start(m.lastindex) if m.lastindex else m.start()),
                count=len(used),
                origin=rule.origin,
            )
        )
    return out


def _gathered(rule: lp.WarningRule, found: list[tuple[int, re.Match[str]]]) -> dict[str, object]:
    return rule.gather([m for _, m in found]) if rule.gather is not None else {}


def _from_log(engine: str, lines: list[str]) -> dict[str, Fact]:
    facts: dict[str, Fact] = {}
    adapter = registry.get(engine)
    for pattern in adapter.log_patterns:
        if pattern.setting in facts:
            continue  # an earlier (stronger) pattern already decided this setting
        for no, line in enumerate(lines, start=1):
            m = pattern.regex.search(line)
            value = pattern.value(m) if m else None
            if value is not None:
                facts[pattern.setting] = Fact(
                    setting=pattern.setting,
                    value=value,
                    basis="log",
                    verified=True,
                    evidence=_match_evidence(pattern, m),
                    line=no,
                    origin=pattern.origin,
                )
                break
    if adapter.read_log is not None:
        for setting, fact in adapter.read_log(lines).items():
            facts.setdefault(setting, fact)
    text = "\n".join(lines)
    for rule in adapter.absence_rules:
        if rule.setting in facts or rule.missing.search(text):
            continue
        if not all(ready.search(text) for ready in rule.ready):
            continue
        facts[rule.setting] = Fact(
            setting=rule.setting,
            value=rule.value,
            basis="log-absence",
            verified=True,
            evidence=f"no line matching /{rule.missing.pattern}/ where the log would show one",
            origin=rule.origin,
        )
    return facts


def _unknown_note(engine: str, setting: str) -> str:
    return registry.get(engine).unknown_notes.get(setting, "unknown from log")


def launch_facts(engine: str, launch: LaunchRecord) -> dict[str, Fact]:
    """Facts from the launch record alone (the log's own lines are stronger): the flags the
    engine's table records as requested, its switches, then its own launch facts."""
    spec = registry.get(engine)
    facts: dict[str, Fact] = {}
    for setting, (value, evidence) in spec.flags.requested(launch.argv).items():
        facts[setting] = Fact(
            setting=setting,
            value=value,
            basis="launch-argv",
            verified=False,
            evidence=evidence,
            note="requested at launch; the engine log does not confirm it",
        )
    for switch in spec.flags.requested_switches(launch.argv):
        facts[switch.setting] = Fact(
            setting=switch.setting, value=switch.value, basis="launch-argv", verified=False,
            evidence=switch.name,
        )  # fmt: skip
    if spec.launch_facts is not None:
        facts.update(spec.launch_facts(launch))
    return facts


def effective_settings(text: str, engine: str | None = None) -> EffectiveSettings:
    """Read the effective settings from a log's text (engine auto-detected if None)."""
    launch = read_header(text)
    name = engine or detect_engine(text)
    if name is None:
        raise UsageError("cannot tell which engine wrote this log; pass --engine")
    registry.get(name)  # validates the name
    lines = log_lines(text)
    facts = _from_log(name, lines)
    _derive(name, facts)
    if launch is not None:
        for setting, fact in launch_facts(name, launch).items():
            current = facts.get(setting)
            if current is None or (fact.verified and current.basis == "log-absence"):
                facts[setting] = fact
    warnings = log_warnings(name, lines) + _graph_coverage(facts)
    return EffectiveSettings(engine=name, facts=facts, launch=launch, warnings=warnings)


def _graph_coverage(facts: dict[str, Fact]) -> list[LogWarning]:
    """Decode graphs captured only below the batch the engine admits: larger decode
    batches run without them (SGLang's own limit is 8 to 512 by GPU memory)."""
    graphs, top, slots = (
        facts.get(k) for k in ("cuda_graphs", "cuda_graph_max_bs", "parallel_slots")
    )
    if graphs is None or graphs.value is not True or top is None or slots is None:
        return []
    if (
        not isinstance(top.value, int)
        or not isinstance(slots.value, int)
        or top.value >= slots.value
    ):
        return []
    return [
        LogWarning(
            key="graphs_below_parallel",
            level="warning",
            message=f"decode CUDA graphs were captured up to batch {top.value} but the engine "
            f"admits {slots.value} requests: decode batches above {top.value} run without "
            "graphs (crossover's cuda_graphs: true asks SGLang for --cuda-graph-max-bs = parallel)",
            line=top.line,
            evidence=top.evidence,
            origin=top.origin,
        )
    ]


def _derive(engine: str, facts: dict[str, Fact]) -> None:
    """Settings one line cannot give alone (the engine's own rule, if it has one)."""
    derive = registry.get(engine).derive
    if derive is not None:
        derive(facts)


class Check(BaseModel):
    setting: str
    expected: lp.Value
    effective: lp.Value | None
    status: Status
    basis: Basis | None = None
    evidence: str | None = None
    line: int | None = None
    note: str | None = None
    source: Literal["expect", "launch"] = "expect"  # the user's expectation, or the launch argv


def canonical_setting(name: str) -> str | None:
    key = name.strip().lower().replace("-", "_")
    key = ALIASES.get(key, key)
    return key if key in SETTINGS else None


def _coerce(raw: str) -> lp.Value:
    low = raw.strip().lower()
    if low in ("on", "true", "yes", "enabled"):
        return True
    if low in ("off", "false", "no", "disabled"):
        return False
    if re.fullmatch(r"-?\d+", low):
        return int(low)
    if re.fullmatch(r"-?\d+\.\d*", low):
        return float(low)
    return raw.strip()


def parse_expect(spec: str) -> dict[str, lp.Value]:
    """``"cuda_graphs=on,tp=2,quant=fp8"`` -> ``{"cuda_graphs": True, "tp": 2, "quant": "fp8"}``."""
    out: dict[str, lp.Value] = {}
    for item in parse_names(spec, "--expect"):
        name, sep, raw = item.partition("=")
        if not sep or not raw.strip():
            raise UsageError(f"bad --expect item {item!r}: use SETTING=VALUE, e.g. cuda_graphs=on")
        key = canonical_setting(name)
        if key is None:
            raise UsageError(f"unknown setting {name!r} in --expect; known: {', '.join(SETTINGS)}")
        out[key] = _coerce(raw)
    return out


def expectations_from_plan(path: Path) -> tuple[dict[str, lp.Value], str | None, list[str]]:
    """(expectations, engine named by the plan or None, keys ignored) from ``plan.json``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"plan file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read plan {path}: {exc}") from None
    expect = data.get("expect") if isinstance(data, dict) else None
    if not isinstance(expect, dict):
        raise UsageError(f'plan {path} has no "expect" object')
    out: dict[str, lp.Value] = {}
    ignored: list[str] = []
    for name, raw in expect.items():
        key = canonical_setting(str(name))
        if key is None or raw is None or isinstance(raw, list | dict):
            ignored.append(str(name))
            continue
        out[key] = _coerce(raw) if isinstance(raw, str) else raw
    engine = data.get("engine")
    return out, engine if isinstance(engine, str) else None, ignored


#: dtype spellings the engines accept for one type (vLLM and SGLang ``--dtype``)
_DTYPES = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32",
           "fp32": "float32"}  # fmt: skip


def _norm(value: str) -> str:
    s = value.strip().lower()
    for word, short in ((" - medium", "_m"), (" - small", "_s"), (" - large", "_l")):
        s = s.replace(word, short)
    s = s.replace("-", "_").replace(" ", "")
    s = s.removeprefix("gguf_").removeprefix("torch.")
    return _DTYPES.get(s, s)


def values_match(expected: lp.Value, effective: lp.Value) -> bool:
    if isinstance(expected, bool) or isinstance(effective, bool):
        return isinstance(expected, bool) and isinstance(effective, bool) and expected == effective
    if isinstance(expected, int | float) and isinstance(effective, int | float):
        return abs(float(expected) - float(effective)) <= 1e-3 * max(1.0, abs(float(expected)))
    exp, eff = _norm(str(expected)), _norm(str(effective))
    return exp == eff or eff.startswith(exp)


def check(settings: EffectiveSettings, expect: Mapping[str, lp.Value]) -> list[Check]:
    checks: list[Check] = []
    for setting, expected in expect.items():
        fact = settings.facts.get(setting)
        if fact is None or fact.value is None:
            checks.append(
                Check(
                    setting=setting,
                    expected=expected,
                    effective=None,
                    status="unknown",
                    note=_unknown_note(settings.engine, setting),
                )
            )
            continue
        same = values_match(expected, fact.value)
        status: Status = "mismatch" if not same else ("match" if fact.verified else "unverified")
        checks.append(
            Check(
                setting=setting,
                expected=expected,
                effective=fact.value,
                status=status,
                basis=fact.basis,
                evidence=fact.evidence,
                line=fact.line,
                note=fact.note,
            )
        )
    return checks


def log_ready(text: str, engine: str | None = None) -> tuple[str | None, ReadyTime | None]:
    """The engine that wrote a log (its launch header's, else ``engine``, else detected)
    and its start read back from the log (``crossover.engines.ready``)."""
    header = read_header(text[:65536])
    name = (header.engine if header else None) or engine or detect_engine(text)
    if name is None:
        return None, None
    clock = registry.get(name).ready_clock
    return name, (ready_after(text, clock) if clock is not None else None)
