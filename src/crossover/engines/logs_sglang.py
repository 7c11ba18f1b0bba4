"""What SGLang's startup log says about the settings it took (checked on 0.5.17's logs).

Two lines carry nearly everything: ``server_args=ServerArgs(...)`` (every server argument
after SGLang resolved its defaults, ``python/sglang/srt/entrypoints/engine.py``), read
with ``crossover.engines.pyrepr`` rather than by regex, and the scheduler's
``max_total_num_tokens=..., chunked_prefill_size=..., max_running_requests=...,
context_len=...`` (``managers/scheduler.py``), which is stronger where the two differ:
it comes after the memory pool was sized. CUDA graphs are proved by their capture lines
(``model_executor/runner/*_cuda_graph_runner.py``); 0.5.x captures prefill graphs too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from crossover.engines import pyrepr
from crossover.engines.logpatterns import (
    LONG_GC_KEY,
    MULTICAST_LINE,
    AbsenceRule,
    LogPattern,
    Value,
    WarningRule,
    _p,
    const,
    g1_float,
    g1_int,
    g1_str,
)
from crossover.engines.logs_moe import UNTUNED_COST

_ARGS = "sglang python/sglang/srt/entrypoints/engine.py: server_args=ServerArgs(...); seen (0.5.17)"
_SCHED = "sglang python/sglang/srt/managers/scheduler.py; seen (0.5.17)"
_RUNNER = "sglang python/sglang/srt/model_executor/runner/; seen (0.5.17)"
_POOL = "sglang python/sglang/srt/mem_cache/memory_pool.py; seen (0.5.17)"
_MOE = (
    "sglang python/sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py"
    " get_moe_configs; seen (0.5.17)"
)
SERVER_ARGS = r"server_args=ServerArgs\("
#: the scheduler's line after the memory pool is sized (one line, several settings)
SCHED_LINE = r"max_total_num_tokens=\d+, chunked_prefill_size=-?\d+"
DECODE_CAPTURE = r"Capture (?:cuda graph|target decode CUDA graph) (?:begin|end)"
PREFILL_CAPTURE = r"Capture target prefill CUDA graph (?:begin|end)"
READY = r"The server is fired up and ready to roll"


@lru_cache(maxsize=4)
def server_args(line: str) -> pyrepr.Call | None:
    """The parsed ``ServerArgs(...)`` of a log line (cached: many settings read one line)."""
    return pyrepr.find_call(line, "ServerArgs")


def _arg(
    path: str, convert: Callable[[pyrepr.PyValue], Value | None]
) -> Callable[[re.Match[str]], Value | None]:
    def value(m: re.Match[str]) -> Value | None:
        args = server_args(m.string)
        return convert(pyrepr.get(args, path)) if args is not None else None

    return value


def _int(v: pyrepr.PyValue) -> Value | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _float(v: pyrepr.PyValue) -> Value | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _bool(v: pyrepr.PyValue) -> Value | None:
    return v if isinstance(v, bool) else None


def _str(v: pyrepr.PyValue) -> Value | None:
    return v if isinstance(v, str) else None


def _str_not_auto(v: pyrepr.PyValue) -> Value | None:
    return v if isinstance(v, str) and v != "auto" else None


def _quant(v: pyrepr.PyValue) -> Value | None:
    return "none" if v is None else (v.lower() if isinstance(v, str) else None)


def _off_only(v: pyrepr.PyValue) -> Value | None:
    """A graph phase switched off in the arguments; "on" is left to the capture lines."""
    if v is True or (isinstance(v, str) and v.lower() == "disabled"):
        return False
    return None


def _graph_bs(v: pyrepr.PyValue) -> list[int] | None:
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        return [x for x in v if isinstance(x, int)]
    return None


def compact_sizes(sizes: list[int]) -> str:
    """``[1, 2, 4, ..., 256]`` -> ``"36 sizes, 1-256"``."""
    return f"{len(sizes)} sizes, {min(sizes)}-{max(sizes)}"


def _bs_compact(v: pyrepr.PyValue) -> Value | None:
    sizes = _graph_bs(v)
    return compact_sizes(sizes) if sizes else None


def _list_in(
    group: int, reduce: Callable[[list[int]], Value]
) -> Callable[[re.Match[str]], Value | None]:
    def value(m: re.Match[str]) -> Value | None:
        sizes = [int(x) for x in re.findall(r"\d+", m.group(group))]
        return reduce(sizes) if sizes else None

    return value


def _attention(m: re.Match[str]) -> Value | None:
    args = server_args(m.string)
    if args is None:
        return None
    base = pyrepr.get(args, "attention_backend")
    prefill = pyrepr.get(args, "prefill_attention_backend")
    decode = pyrepr.get(args, "decode_attention_backend")
    if not isinstance(base, str):
        return None
    parts = [f"{k} {v}" for k, v in (("prefill", prefill), ("decode", decode)) if v]
    return f"{base} ({', '.join(parts)})" if parts else base


def _moe_file(m: re.Match[str]) -> Value:
    return m.group(1).rsplit("/", 1)[-1]


def _a(setting: str, path: str, convert: Callable[[pyrepr.PyValue], Value | None]) -> LogPattern:
    """A setting read from the ServerArgs repr at ``path`` (dots step into nested reprs)."""

    def evidence(m: re.Match[str]) -> str:
        args = server_args(m.string)
        shown = pyrepr.show(pyrepr.get(args, path)) if args is not None else "?"
        return f"server_args=ServerArgs(... {path}={shown} ...)"

    return LogPattern(setting, re.compile(SERVER_ARGS), _arg(path, convert), _ARGS, evidence)


SGLANG: tuple[LogPattern, ...] = (
    _p("cuda_graphs", r"Capture (?:cuda graph|target decode CUDA graph) end", const(True), _RUNNER),
    _a("cuda_graphs", "cuda_graph_config.decode.backend", _off_only),
    _a("cuda_graphs", "disable_cuda_graph", _off_only),  # releases before CudaGraphConfig
    _p(
        "cuda_graph_max_bs",
        r"Capture target decode CUDA graph begin\..*?\bbs=\[([\d, ]+)\]",
        _list_in(1, max),
        _RUNNER,
    ),
    _a("cuda_graph_max_bs", "cuda_graph_config.decode.max_bs", _int),
    _a("cuda_graph_max_bs", "cuda_graph_max_bs", _int),
    _p(
        "cuda_graph_batch_sizes",
        r"Capture target decode CUDA graph begin\..*?\bbs=\[([\d, ]+)\]",
        _list_in(1, compact_sizes),
        _RUNNER,
    ),
    _a("cuda_graph_batch_sizes", "cuda_graph_config.decode.bs", _bs_compact),
    _a("cuda_graph_batch_sizes", "cuda_graph_bs", _bs_compact),
    _p("prefill_cuda_graphs", r"Capture target prefill CUDA graph end", const(True), _RUNNER),
    _a("prefill_cuda_graphs", "cuda_graph_config.prefill.backend", _off_only),
    _a("prefill_cuda_graphs", "disable_cuda_graph", _off_only),
    _p(
        "prefill_graph_max_tokens",
        r"Capture target prefill CUDA graph begin\..*?\bnum_tokens=\[([\d, ]+)\]",
        _list_in(1, max),
        _RUNNER,
    ),
    _a("prefill_graph_max_tokens", "cuda_graph_config.prefill.max_bs", _int),
    LogPattern(
        "attention_backend",
        re.compile(SERVER_ARGS),
        _attention,
        _ARGS,
        lambda m: f"server_args=ServerArgs(... attention_backend={_attention(m)!r} ...)",
    ),
    _p(
        "attention_backend",
        r"Attention backend not specified\. Use (\w+) backend by default",
        g1_str,
        "sglang python/sglang/srt/server_args.py; seen (0.5.17)",
    ),
    _a("tp", "tp_size", _int),
    _a("pp", "pp_size", _int),
    _a("ep", "ep_size", _int),
    _a("quant", "quantization", _quant),
    _p(
        "dtype",
        r"Load weight end\..*?dtype=torch\.(\w+)",
        g1_str,
        "sglang python/sglang/srt/model_executor/model_runner.py load_model (before 0.5)",
    ),
    _a("dtype", "dtype", _str_not_auto),  # "auto": see kv_cache_dtype (effective.py)
    _p("kv_cache_dtype", r"KV Cache is allocated\. dtype: torch\.(\w+)", g1_str, _POOL),
    _p("kv_cache_tokens", r"max_total_num_tokens=(\d+), chunked_prefill_size=", g1_int, _SCHED),
    _p("kv_cache_tokens", r"KV Cache is allocated\..*?#tokens: (\d+)", g1_int, _POOL),
    _p(
        "kv_cache_gib",
        r"KV Cache is allocated\..*?#tokens: \d+, K size: ([\d.]+) GB, V size: ([\d.]+) GB",
        lambda m: round(float(m.group(1)) + float(m.group(2)), 3),
        _POOL,
    ),
    _p(
        "kv_cache_gib",
        r"KV Cache is allocated\..*?#tokens: \d+, KV size: ([\d.]+) GB",
        g1_float,
        f"{_POOL} (MLA pool)",
    ),
    _p(
        "max_batched_tokens",
        r"max_total_num_tokens=\d+, chunked_prefill_size=(-?\d+)",
        g1_int,
        _SCHED,
    ),
    _a("max_batched_tokens", "chunked_prefill_size", _int),
    _p("max_prefill_tokens", rf"{SCHED_LINE}, max_prefill_tokens=(\d+)", g1_int, _SCHED),
    _a("max_prefill_tokens", "max_prefill_tokens", _int),
    _p("parallel_slots", rf"{SCHED_LINE}.*?\bmax_running_requests=(\d+)", g1_int, _SCHED),
    _a("parallel_slots", "max_running_requests", _int),
    _p("context_tokens", rf"{SCHED_LINE}.*?\bcontext_len=(\d+)", g1_int, _SCHED),
    _p("context_tokens", r"max_total_num_tokens=\d+.*?context_len=(\d+)", g1_int, _SCHED),
    _a("context_tokens", "context_length", _int),
    _a("gpu_memory_utilization", "mem_fraction_static", _float),
    _a("mixed_chunk", "enable_mixed_chunk", _bool),
    _a("tokenizer_workers", "tokenizer_worker_num", _int),
    _a("schedule_policy", "schedule_policy", _str),
    _a("stream_interval", "stream_interval", _int),
    _a("torch_compile", "enable_torch_compile", _bool),
    _a("metrics", "enable_metrics", _bool),
    _a("load_format", "load_format", _str),
    _a("model", "model_path", _str),
    _p("multicast", MULTICAST_LINE, const(True), "any NVLink-multicast all-reduce line"),
    _p("moe_backend", r"Using MoE kernel config from \S*/moe_runner/(triton)_utils/", g1_str, _MOE),
    _p(
        "moe_backend",
        r"Using default MoE kernel config\. .*?(triton)_utils/configs",
        g1_str,
        _MOE,
    ),
    _a("moe_backend", "moe_runner_backend", _str_not_auto),
    _p("moe_config", r"Using MoE kernel config from (\S+\.json)", _moe_file, _MOE),
    _p(
        "moe_config",
        r"Fallback to triton version \S+ and use MoE kernel config from (\S+\.json)",
        _moe_file,
        _MOE,
    ),
    _p("moe_config", r"Using default MoE kernel config\.", const("default"), _MOE),
    _p("moe_tuned_config", r"Using MoE kernel config from ", const(True), _MOE),
    _p(
        "moe_tuned_config",
        r"Fallback to triton version \S+ and use MoE kernel config",
        const(True),
        _MOE,
    ),
    _p("moe_tuned_config", r"Using default MoE kernel config\.", const(False), _MOE),
)

SGLANG_ABSENT: tuple[AbsenceRule, ...] = (
    AbsenceRule(
        "cuda_graphs",
        False,
        re.compile(DECODE_CAPTURE),
        (re.compile(READY),),
        "sglang model_runner.py: capture precedes 'The server is fired up and ready to roll'",
    ),
    AbsenceRule(
        "prefill_cuda_graphs",
        False,
        re.compile(PREFILL_CAPTURE),
        (re.compile(READY),),
        "sglang 0.5.x: prefill graphs are captured before the server is ready (none before 0.5)",
    ),
    AbsenceRule(
        "multicast",
        False,
        re.compile(MULTICAST_LINE),
        (re.compile(READY),),
        "all-reduce backends are set up before the server is ready",
    ),
)

#: the line SGLang's front end logs for a collection longer than
#: --gc-warning-threshold-secs (0: never, SGLang's default; crossover passes 0.05)
LONG_GC = (
    r"LONG GARBAGE COLLECTION DETECTED \| Generation (\d+) \| Duration: ([\d.]+)s"
    r"(?: \| # Objects: .*?\bgen2=(\d+))?"
)
_GC = (
    "sglang python/sglang/srt/server_args.py --gc-warning-threshold-secs; seen (0.5.17, "
    "H100, docs/results/h100/sglang-gc)"
)


def _gc_pauses(every: list[re.Match[str]]) -> dict[str, object]:
    """``{pauses}``: the range of the collections' durations (``0.50-0.74 s``), the
    generations they were of, and the most objects generation 2 held at one."""
    durations = [float(m.group(2)) for m in every]
    low, high = min(durations), max(durations)
    span = f"{low:.2f} s" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f} s"
    gens = sorted({int(m.group(1)) for m in every})
    gen = ("generation " if len(gens) == 1 else "generations ") + ", ".join(map(str, gens))
    objects = [int(m.group(3)) for m in every if m.group(3)]
    if objects:
        gen += (" of" if gens == [2] else ", generation 2 of") + f" up to {max(objects):,} objects"
    return {"pauses": f"{span} ({gen})"}


#: SGLang's front end answering crossover's ``freeze_gc: true`` (uvicorn's access line for
#: the POST to /freeze_gc; seen, 0.5.17: docs/results/h100/moe-open-decide-freeze's
#: engines/sglang.log.gz lines 85, 1403, 2949)
FROZEN_GC = r'"POST /freeze_gc HTTP/[\d.]+" 200\b'

_GC_WHAT = (
    "{count} garbage collection{s} of {pauses} in SGLang's front end (its tokenizer "
    "manager, one Python process)"
)

#: one finding per log for SGLang's long garbage collections (``--gc-warning-threshold-secs``).
#: Unfrozen it names the remedy, as measured on an H100: with it, no collection of 0.05 s
#: or more was logged at c = 64 and 256 (docs/results/h100/sglang-freeze) or at 8 and 12
#: requests/s (.../sglang-freeze-open); at 20 requests/s two of 0.05-0.06 s were
#: (.../moe-open-decide-freeze). Where the log shows a freeze answered (``FROZEN_GC``) the
#: remedy was on: the finding says the collections after it came with the collector frozen,
#: those before it at the engine's start or warm-up (its first log there held one of
#: 0.65 s before the first freeze, none after), and recommends nothing. A freeze moves
#: only the objects alive at it out of later collections, so those made since the last one
#: are still collected: there, 0.05-0.06 s of up to 70,571 gen-2 objects, against
#: 0.42-0.74 s of about a million unfrozen
#: (docs/results/h100/sglang-gc 0.50-0.61 s, sglang-freeze 0.50-0.59 s, sglang-freeze-open
#: 0.42-0.43 s, moe-open 0.55-0.74 s)
LONG_GC_RULE = WarningRule(
    LONG_GC_KEY,
    "warning",
    re.compile(LONG_GC),
    _GC_WHAT + ": every request in flight waits that long, and a closed-loop level's first "
    "wave that meets one has its TTFT moved by the pause; freeze_gc: true (SGLang's own "
    "remedy, its /freeze_gc, before each level) leaves the objects alive then out of later "
    "collections (measured on an H100: none of 0.05 s or more logged after it at c = 64 and "
    "256 or at 8-12 requests/s, two of 0.05-0.06 s at 20 requests/s)",
    _GC,
    gather=_gc_pauses,
    context=re.compile(FROZEN_GC),
    context_message=_GC_WHAT + " with its collector frozen (a POST /freeze_gc answered "
    "before them): a freeze leaves out only the objects alive at it, so those made "
    "since the last one are still collected; every request in flight waits that long "
    "(unfrozen, SGLang's took 0.42-0.74 s, measured on an H100)",
    context_before="; before its first freeze, {count} more of {pauses} (at its start or warm-up)",
    context_none_after=_GC_WHAT + " before its collector was first frozen (the first POST "
    "/freeze_gc was answered later: at its start or warm-up); none of 0.05 s or more came "
    "after it",
)

SGLANG_WARN: tuple[WarningRule, ...] = (
    WarningRule(
        "moe_default_config",
        "warning",
        re.compile(
            r"Using default MoE kernel config\. Performance might be sub-optimal! "
            r"Config file not found at (?:\S*/)?([^/\s]+?\.json)"
        ),
        "SGLang found no tuned fused-MoE config for this GPU ({0}) and runs its default "
        "kernel configs (the same Triton fused-MoE kernel as vLLM's; measured on vLLM): "
        + UNTUNED_COST,
        _MOE,
    ),
    WarningRule(
        "moe_other_triton_config",
        "warning",
        re.compile(
            r"Config file not found at \S+\. Fallback to triton version (\S+) "
            r"and use MoE kernel config from (?:\S*/)?([^/\s]+\.json)"
        ),
        "SGLang uses a fused-MoE config tuned under Triton {0}, not the installed Triton: "
        "kernel choices may be sub-optimal",
        _MOE,
    ),
    WarningRule(
        "moe_down_config_reused",
        "note",
        re.compile(
            r"Down MoE config file not found at (\S+?); reusing the tuned up-projection config"
        ),
        "SGLang has no tuned down-projection MoE config ({0}): the down GEMM reuses the tuned "
        "up-projection config without TMA",
        _MOE,
    ),
    WarningRule(
        "decode_without_graphs",
        "warning",
        re.compile(r"Decode batch, #running-req: (\d+), .*?cuda graph: False"),
        "{count} decode batch line{s} ran without CUDA graphs (the first with "
        "#running-req {0}): batches above the captured sizes, or graphs off",
        "sglang python/sglang/srt/managers/scheduler_metrics_mixin.py; seen (0.5.17)",
    ),
    LONG_GC_RULE,
)
