"""A sweep config checked whole before anything is measured (``crossover sweep --check``).

Loading the YAML already refuses unknown keys and bad values (``crossover.sweep.config``).
This module finds what a sweep would otherwise meet only when a target's turn comes,
after the earlier targets were measured: a knob the engine does not take (the engine
adapter builds its command line), a launched engine whose prompt and output do not fit
its context, a dialect without the endpoint asked for, a roofline entry for no target, and,
on the machine that will run the sweep, a model path, executable, tokenizer, prompt
file or client-floor file that is not there, a fixed port in use, a URL that does not
answer.

``local=False`` (``crossover sweep --check --remote``, and every sweep run with ``--ray``,
whose paths are the nodes') checks everything except what only the machine that runs
the engines can answer: files, executables, ports and URLs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from crossover.devices import VISIBLE
from crossover.errors import UsageError

if TYPE_CHECKING:
    from crossover.engines.config import EngineConfig
    from crossover.engines.flags import GpuAsk
    from crossover.engines.spec import EngineSpec
    from crossover.sweep.config import SweepConfig, TargetConfig

#: what ``local=False`` leaves to the machine that runs the sweep
REMOTE_SKIPS = "model paths, executables, ports, URLs, tokenizer and prompt files"


@dataclass(frozen=True)
class Finding:
    """One line of the check: an ``error`` (the sweep would fail) or a ``note``."""

    where: str
    message: str
    severity: Literal["error", "note"] = "error"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class TargetCheck:
    """One target: what it would launch or measure, and what is wrong with it."""

    name: str
    what: str  # the launch command, or the URLs measured
    findings: list[Finding] = field(default_factory=list)


@dataclass
class CheckReport:
    targets: list[TargetCheck]
    findings: list[Finding]  # the sweep's own (tokenizer, workload, roofline)
    local: bool

    @property
    def errors(self) -> list[Finding]:
        every = self.findings + [f for t in self.targets for f in t.findings]
        return [f for f in every if f.severity == "error"]

    @property
    def notes(self) -> list[Finding]:
        every = self.findings + [f for t in self.targets for f in t.findings]
        return [f for f in every if f.severity == "note"]

    def lines(self) -> list[str]:
        """What ``--check`` prints: one line per target (what it would run), each problem
        under its target, then the sweep's own, and what ``--remote`` did not look up."""
        out = []
        for t in self.targets:
            bad = [f for f in t.findings if f.severity == "error"]
            out.append(f"{'error' if bad else 'ok':<5} {t.name}: {t.what}")
            out += [f"      {f.severity}: {f.message}" for f in t.findings]
        out += [f"{f.severity:<5} {f.where}: {f.message}" for f in self.findings]
        if not self.local:
            out.append(f"not looked up on this machine (--remote): {REMOTE_SKIPS}")
        return out


def check_config(
    cfg: SweepConfig, *, local: bool = True, only: set[str] | None = None
) -> CheckReport:
    """Every target (those in ``only``, when given) and the sweep's workload; nothing is
    started, written or measured. ``local``: this machine runs the sweep, so files,
    executables, ports, URLs and the GPUs its replicas get are looked up here too."""
    picked = [t for t in cfg.targets if only is None or t.name in only]
    targets = [_check_target(cfg, t, local) for t in picked]
    count = _gpus_here() if local else None
    for t, found in zip(picked, targets, strict=True):
        problems = [_engine_gpus_problem(t, count)]
        if count is not None:
            problems.insert(0, _replica_gpus_problem(t, count))
        found.findings += [Finding(f"target {t.name}", p) for p in problems if p]
    return CheckReport(targets, _check_sweep(cfg, local), local)


#: how many GPUs crossover may give the engines it starts here, and whose count it is
GpuCount = tuple[int | None, str]
#: :data:`GpuCount` under a target's own ``CUDA_VISIBLE_DEVICES`` (``None``: crossover's)
GpuCounter = Callable[[str | None], GpuCount]


def _gpus_here() -> GpuCounter:
    """:func:`crossover.measure.host.gpus_left` under crossover's own
    ``CUDA_VISIBLE_DEVICES`` (``None``) or a target's own, NVML read at most once (its
    start is not cheap) and only when asked."""
    from crossover.devices import own
    from crossover.measure.host import GpuReading, gpus_left, nvml_reading

    seen: list[GpuReading | None] = []

    def count(env: str | None) -> GpuCount:
        if not seen:
            seen.append(nvml_reading())
        if env is None:
            return gpus_left(own(), seen[0])
        have, why = gpus_left(env, seen[0])
        return have, f"its launch env's {why}"

    return count


def _launch_gpus(t: TargetConfig) -> GpuAsk | None:
    """The GPUs one engine of a launched target uses
    (:func:`crossover.engines.adapters.launch_gpus`); ``None`` for a URL target."""
    from crossover.engines.adapters import launch_gpus

    return None if t.launch is None else launch_gpus(t.launch.engine_config())


def _engine_gpus_problem(t: TargetConfig, count: GpuCounter | None) -> str | None:
    """What is wrong where one engine of a target asks for more GPUs (tensor x pipeline
    parallel, :func:`_launch_gpus`) than it will see: with ``gpus_per_replica``, more
    than each replica's share (whatever the machine); else more than its launch env's
    ``CUDA_VISIBLE_DEVICES`` or crossover's own leaves here (``count``; ``None``: this
    machine does not run it, ``None`` counted: not known), every replica seeing those
    same GPUs. A one-GPU engine asks nothing of the machine."""
    reps = t.launch
    ask = _launch_gpus(t)
    if reps is None or ask is None or ask.count <= 1:
        return None
    wants = f"{reps.adapter.display_name} asks for {ask.count} GPUs ({ask.asked})"
    smaller = "give it a smaller tensor/pipeline parallel size"
    if reps.gpus_per_replica is not None:
        if ask.count <= reps.gpus_per_replica:
            return None
        return (
            f"{wants} but each replica gets gpus_per_replica {reps.gpus_per_replica}; "
            f"{smaller}, or gpus_per_replica {ask.count}"
        )
    if count is None:
        return None
    have, why = count(reps.env.get(VISIBLE))
    if have is None or ask.count <= have:
        return None
    each = (
        f" (each of its {reps.replicas} replicas sees the same GPUs)" if reps.replicas > 1 else ""
    )
    return f"{wants}{each} but {why}; {smaller}, or run it with more GPUs visible"


def _replica_gpus_problem(t: TargetConfig, count: GpuCounter) -> str | None:
    """What is wrong where a target's replicas get GPUs of their own (``gpus_per_replica``)
    and need more than crossover may give them here: ``count(None)``, asked only for
    such a target, says how many (``None``: not known, nothing is refused) and whose
    count it is (``CUDA_VISIBLE_DEVICES=2,3 leaves 2``). Without Ray the targets run one
    after another, so each needs them alone."""
    reps = t.launch
    if reps is None or reps.gpus_per_replica is None:
        return None
    have, why = count(None)
    need = reps.replicas * reps.gpus_per_replica
    if have is None or need <= have:
        return None
    return (
        f"needs {need} GPUs (replicas {reps.replicas} x gpus_per_replica "
        f"{reps.gpus_per_replica}) but {why}; give it fewer replicas or gpus_per_replica, "
        "or run crossover with more GPUs visible"
    )


def check_replica_gpus(targets: Sequence[TargetConfig], count: GpuCounter | None = None) -> None:
    """Each target whose replicas get GPUs of their own fits in the GPUs crossover may
    give them here (:func:`_replica_gpus_problem`), and each engine's tensor x pipeline
    parallel size in the GPUs it will see (:func:`_engine_gpus_problem`); ``count``
    defaults to :func:`_gpus_here`, NVML read once and only where a target needs it.
    UsageError, one line, for the first that does not fit: before any engine starts,
    not as an engine failing minutes into its start."""
    ask = count or _gpus_here()
    for t in targets:
        problem = _replica_gpus_problem(t, ask) or _engine_gpus_problem(t, ask)
        if problem:
            raise UsageError(f"target {t.name}: {problem}")


# --- one target ------------------------------------------------------------------------
def _check_target(cfg: SweepConfig, t: TargetConfig, local: bool) -> TargetCheck:
    if t.launch is None:
        return _check_url_target(cfg, t, local)
    from crossover.engines.adapters import launch_spec

    where = f"target {t.name}"
    ecfg = t.launch.engine_config()  # validated with the file
    reps = t.launch
    adapter = t.launch.adapter
    out = TargetCheck(t.name, adapter.display_name)
    try:  # the adapter refuses a knob its engine does not take; nothing is written
        spec = launch_spec(ecfg, ecfg.port or 8000, Path(tempfile.gettempdir()))
        out.what = shlex.join(_free_port_shown(spec.argv, ecfg.port, ecfg.extra_args))
    except UsageError as exc:
        out.findings.append(Finding(where, str(exc)))
    context = ecfg.context_tokens
    # a warm-up asking for more than the measured requests needs its context too
    output = max(cfg.output_tokens, cfg.warmup_output_tokens or 0)
    need = (cfg.input_tokens or 0) + output
    if context is not None and cfg.prompts_file is None and need > context:
        out.findings.append(
            Finding(
                where,
                f"a request needs {need} tokens of context ({cfg.input_tokens} prompt + "
                f"{output} output) but launch.context_tokens is {context}",
            )
        )
    out.findings += _endpoint(cfg, t, where, adapter.dialect.name)
    if adapter.launch_notes is not None:
        out.findings += [Finding(where, n, "note") for n in adapter.launch_notes(ecfg)]
    dp = _data_parallel(adapter, ecfg.extra_args)
    if (above := _above_slots(cfg, t, ecfg.parallel, reps.replicas * dp)) is not None:
        out.findings.append(Finding(where, above, "note"))
    if cfg.restart_between_repeats:
        out.findings.append(Finding(where, _starts_line(cfg), "note"))
    if local:
        out.findings += _local_launch(ecfg, adapter, where, reps.replicas)
    elif not _looks_like_path(ecfg.model) and adapter.model_is_local:
        out.findings.append(
            Finding(
                where,
                f"model {ecfg.model!r} is a name, not a path: {adapter.display_name} reads "
                f"{adapter.model_kind}",
            )
        )
    return out


def _data_parallel(adapter: EngineSpec, extra_args: list[str]) -> int:
    """The data-parallel engines one launch runs (``--data-parallel-size N`` and its
    aliases in ``extra_args``: each runs ``parallel`` requests), 1 where none is given or
    its value is no whole number."""
    from crossover.engines.flags import gpu_ask

    ask = gpu_ask([adapter.flags.given(extra_args, "dp")])
    return 1 if ask is None else max(1, ask.count)


def _above_slots(
    cfg: SweepConfig, t: TargetConfig, parallel: int | None, replicas: int
) -> str | None:
    """Closed-loop levels above the requests the target's engines run at once: the rest
    wait in the engine's queue, which a closed loop's client keeps full."""
    if parallel is None:
        return None
    slots = parallel * replicas
    above = [int(lv.value) for lv in cfg.levels_of(t) if lv.axis == "concurrency"]
    above = [c for c in above if c > slots]
    if not above:
        return None
    what = f"parallel {parallel}" + (f" x {replicas} engines" if replicas > 1 else "")
    levels = ", ".join(str(c) for c in above)
    return (
        f"concurrency {levels} above the {slots} requests it runs at once ({what}): the "
        f"requests beyond {slots} wait in the engine's queue, so TTFT there counts that "
        f"wait and throughput stops at the slots' (compare targets at equal slots, or read "
        f"TTFT up to {slots})"
    )


def _starts_line(cfg: SweepConfig) -> str:
    """What ``restart_between_repeats`` makes of a launched target's engine starts."""
    n = cfg.engine_starts_planned()
    times = "once" if n == 1 else f"{n} times"
    return (
        f"its engine starts {times}, once per repeat (restart_between_repeats): all its "
        "levels of a repeat on one start, then the engine stopped and started again"
    )


def _free_port_shown(
    argv: list[str], port: int, extra_args: list[str] | tuple[str, ...] = ()
) -> list[str]:
    """The launch command as shown: ``PORT`` where the sweep picks a free port (0), and
    ``METRICS_PORT`` for the metrics port a launch picks free (Triton's) where the
    config names none: the number a check happened to pick is not the one a sweep gets."""
    out = list(argv)
    own_metrics = any(a.startswith("--metrics-port") for a in extra_args)
    for i, arg in enumerate(out):
        free = not port
        if free and arg in ("--port", "--http-port") and i + 1 < len(out) and out[i + 1] == "8000":
            out[i + 1] = "PORT"
        elif free and arg == "--http-port=8000":
            out[i] = "--http-port=PORT"
        elif arg.startswith("--metrics-port=") and not own_metrics:
            out[i] = "--metrics-port=METRICS_PORT"
    return out


def _check_url_target(cfg: SweepConfig, t: TargetConfig, local: bool) -> TargetCheck:
    from crossover.dialects.discovery import pick_model, served_models
    from crossover.engines import registry
    from crossover.measure import probe

    where = f"target {t.name}"
    urls = t.base_urls
    out = TargetCheck(t.name, ", ".join(urls) + f" ({t.engine or 'openai'} dialect)")
    out.findings += _endpoint(cfg, t, where, t.engine or "openai")
    if local:
        for u in urls:
            try:
                probe(u, {}, timeout_s=5.0)
                dialect = registry.dialect(t.engine or "openai")
                listed = served_models(u, dialect, t.model, timeout_s=5.0)
                pick_model(u, listed, t.model)  # several listed and none named: say so
            except UsageError as exc:
                out.findings.append(Finding(where, str(exc)))
    return out


def _endpoint(cfg: SweepConfig, t: TargetConfig, where: str, dialect: str) -> list[Finding]:
    """Every level's run config of this target, built as the sweep builds it and validated
    as ``crossover run`` validates its flags (the endpoint and the dialect's support of it,
    sessions held for a duration, ...): the same one line ``run`` would print."""
    refused = cfg.level_refusal(t, dialect)
    return [Finding(where, refused)] if refused is not None else []


def gguf_problem(path: Path) -> str | None:
    """Why ``path`` is not a GGUF file an engine could load (None: its header reads): the
    header is opened with the ``gguf`` package (memory-mapped, the tensors not read)."""
    try:
        from gguf import GGUFReader

        fields = GGUFReader(path, "r").fields
    except Exception as exc:  # any failure to parse is the finding
        text = " ".join(str(exc).split())[:200] or type(exc).__name__
        return f"not a GGUF file (its header does not read: {text})"
    if "general.architecture" not in fields:
        return "a GGUF header without general.architecture: no engine knows what model it is"
    return None


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or model.endswith((".gguf", ".json"))


def _local_launch(
    ecfg: EngineConfig, adapter: EngineSpec, where: str, replicas: int
) -> list[Finding]:
    """What only this machine can answer: the executable, the model's files, the ports."""
    from crossover.engines.processes import check_port_free

    out: list[Finding] = []
    problem = _executable_problem(ecfg, adapter)
    if problem:
        out.append(Finding(where, problem))
    path = ecfg.model_path()
    if adapter.model_is_local or _looks_like_path(ecfg.model):
        if not path.exists():
            out.append(
                Finding(
                    where,
                    f"model path not found: {ecfg.model} ({adapter.display_name} reads "
                    f"{adapter.model_kind})",
                )
            )
        elif adapter.reads_gguf and path.is_dir():
            out.append(
                Finding(
                    where,
                    f"model {ecfg.model} is a folder: {adapter.display_name} reads one GGUF file",
                )
            )
        elif adapter.reads_gguf and (problem := gguf_problem(path)) is not None:
            out.append(Finding(where, f"model {ecfg.model}: {problem}"))
    else:
        out.append(
            Finding(
                where,
                f"model {ecfg.model!r} is not a path here: {adapter.display_name} will look it "
                "up on the Hugging Face Hub (not checked)",
                "note",
            )
        )
    if ecfg.port:
        for k in range(replicas):
            try:
                check_port_free(ecfg.host, ecfg.port + k)
            except UsageError as exc:
                out.append(Finding(where, str(exc)))
    return out


def _executable_problem(ecfg: EngineConfig, adapter: EngineSpec) -> str | None:
    """Why the engine's program would not start here, or None. llama.cpp without an
    ``executable`` uses a built llama-server (``crossover engines install llamacpp``) as
    the sweep does, Triton the installed tritonserver (``crossover engines install
    triton``); ``python -m MODULE`` programs need MODULE importable by that python."""
    argv = adapter.executable(ecfg)
    install = adapter.install
    if install is not None and ecfg.executable is None and not shutil.which(argv[0]):
        from crossover.engines.install import cached_program, install_hint

        if cached_program(adapter) is None:
            return (
                f"no {argv[0]} here: `{install_hint(adapter)}` {install.does} one, or "
                "set launch.executable"
            )
        return None
    program = argv[0]
    if os.sep in program:
        path = Path(program).expanduser()
        found: str | None = str(path) if path.is_file() and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(program)
    if found is None:
        return (
            f"executable {program!r} not found (install {adapter.display_name}, or set "
            "launch.executable)"
        )
    module = python_module(argv)
    if module is not None and not importable(found, module, ecfg.env):
        return f"{program} cannot import {module} (install {adapter.display_name} for it)"
    return None


def python_module(argv: list[str]) -> str | None:
    """The top-level package a ``python -m pkg.mod`` or ``python -c "from pkg... import"``
    program needs."""
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[2].split(".")[0]
    if len(argv) >= 3 and argv[1] == "-c":
        m = re.match(r"\s*(?:from|import)\s+([A-Za-z_]\w*)", argv[2])
        return m.group(1) if m else None
    return None


def importable(python: str, module: str, env: dict[str, str]) -> bool:
    """``module`` found by ``python`` with the launch's environment (its PYTHONPATH);
    only located, never imported."""
    code = "import importlib.util,sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
    try:
        done = subprocess.run(  # the config's own program, no shell
            [python, "-c", code, module],
            env={**os.environ, **env},
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


# --- the sweep as a whole ------------------------------------------------------------------
def _check_sweep(cfg: SweepConfig, local: bool) -> list[Finding]:
    out: list[Finding] = []
    names = {t.name for t in cfg.targets}
    for r in cfg.roofline:
        if r.target not in names:
            from crossover.errors import closest

            near = closest(r.target, names)
            hint = f"; did you mean {near!r}?" if near else ""
            out.append(Finding("roofline", f"target {r.target!r} is not a target{hint}"))
    if not local:
        return out
    if cfg.tokenizer is not None:
        from crossover.workload import load_tokenizer

        try:
            tok = load_tokenizer(cfg.tokenizer)
            tok.encode("crossover checks the tokenizer")
        except UsageError as exc:
            out.append(Finding("tokenizer", str(exc)))
        except Exception as exc:  # a file that exists but does not load
            out.append(Finding("tokenizer", f"{cfg.tokenizer} does not load: {exc}"))
    if cfg.prompts_file is not None:
        from crossover.workload.datasets import read_texts

        try:
            read_texts(cfg.prompts_file)
        except UsageError as exc:
            out.append(Finding("prompts_file", str(exc)))
    if cfg.client_floor not in ("auto", "off"):
        from crossover.metrics.client_floor import resolve_client_floor

        try:
            resolve_client_floor(cfg.client_floor, None)
        except UsageError as exc:
            out.append(Finding("client_floor", str(exc)))
    return out


def raise_if_errors(report: CheckReport, source: str) -> None:
    """For a sweep about to run: one error is one ``UsageError`` line; several are one
    line that counts them (``crossover sweep --check`` lists each)."""
    errors = report.errors
    if len(errors) == 1:
        raise UsageError(f"{source}: {errors[0]}")
    if errors:
        first = "; ".join(str(e) for e in errors[:2])
        raise UsageError(
            f"{source}: {len(errors)} problems, e.g. {first} (`crossover sweep --check` "
            "lists them all); nothing was measured or written"
        )
