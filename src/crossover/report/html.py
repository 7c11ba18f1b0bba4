"""The sweep report: one self-contained HTML file (charts inlined as data URIs).

Every string that came from a server or a run summary (engine versions,
problem messages, settings) is untrusted: the template is rendered with
autoescaping on and a Content-Security-Policy that allows no script at all.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from crossover import __version__
from crossover.analysis.crossovers import (
    Finding,
    analyze_sweep,
    crossover_levels,
    fmt_margin,
    format_crossover,
    format_overloads,
)
from crossover.analysis.gc import MEANING as GC_MEANING
from crossover.analysis.gc import GcRun, gc_runs
from crossover.analysis.gc import describe as describe_gc
from crossover.analysis.kv import FULL as KV_FULL
from crossover.analysis.kv import MEANING as KV_MEANING
from crossover.analysis.kv import (
    QUEUED_FOR_S,
    QUEUED_IN_A_ROW,
    QUEUED_MEANING,
    above_slots,
    format_above_slots,
    kv_full_runs,
    queued_runs,
)
from crossover.analysis.outliers import outlier_repeats
from crossover.analysis.roofline import RooflineCheck, check_sweep
from crossover.analysis.schema import SweepFile, SweepRun, TargetInfo, level_label
from crossover.analysis.short import format_short_levels, is_short
from crossover.analysis.spread import own_starts, repeat_spreads
from crossover.metrics.host import kinds, machine_ids
from crossover.words import plural
from crossover.workload.sessions import shown

CHART_TITLES = {
    "throughput": "Throughput vs concurrency (error bars: spread over repeats)",
    "ttft": "Time to first token: p50 line, p90-p99 band",
    "itl": "Inter-token latency: p50 line, p90-p99 band",
    "pareto": "Tokens/s per user vs total tokens/s (the Pareto view)",
}


def environment() -> jinja2.Environment:
    """The report's template environment: autoescape always on, undefined is an error."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("crossover.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _text(v: Any) -> str:
    """Any JSON value as display text (the template escapes it)."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True)


def describe_workload(w: dict[str, Any]) -> str:
    """A sweep's workload as a reader says it: ``200-token synthetic prompts, exactly 64
    output tokens each, /v1/completions, seed 0; concurrency 1, 2, 4, 8; 3 repeats``
    (the raw keys are in sweep.json). Keys it does not know are kept as ``key=value``."""
    if not w:
        return ""
    w = dict(w)
    w.pop("name", None)  # the title says it
    parts: list[str] = []
    inp, out = w.pop("input_tokens", None), w.pop("output_tokens", None)
    prompts = w.pop("prompts_file", None)
    source = f"prompts from {prompts}" if prompts not in (None, "", "-") else "synthetic prompts"
    if inp is None:
        parts.append(f"{source}, each its own length")
    else:
        parts.append(
            f"{inp}-token {source}"
            if "synthetic" in source
            else f"{source}, {plural(inp, 'token')} each"
        )
    if out is not None:
        parts.append(f"exactly {plural(out, 'output token')} each")
    for key, what in (
        ("input_lengths", "prompt lengths"),
        ("output_lengths", "output lengths"),
        ("shared_prefix", "shared prefix"),
        ("sessions", "sessions"),
        ("trace", "trace"),
        ("trace_block_tokens", "tokens per trace block"),
    ):
        if w.get(key) is not None:
            value = _text(w.pop(key))
            parts.append(f"{what} {shown(value) if key == 'sessions' else value}")
        w.pop(key, None)
    endpoint = w.pop("endpoint", None)
    if endpoint:
        parts.append("/v1/chat/completions" if endpoint == "chat" else "/v1/completions")
    if "seed" in w:
        parts.append(f"seed {w.pop('seed')}")
    head = ", ".join(parts)
    more: list[str] = []
    levels = w.pop("rates", None)
    conc = w.pop("concurrency", None)
    if levels:
        more.append("arrival rates " + ", ".join(f"{x:g}" for x in levels) + " per s")
    elif conc:
        more.append("concurrency " + ", ".join(str(c) for c in conc))
    if w.get("duration_s_per_level") is not None:
        more.append(f"{w.pop('duration_s_per_level'):g} s per level")
    w.pop("duration_s_per_level", None)
    reps = w.pop("repeats", None)
    restarted = bool(w.pop("restart_between_repeats", None))
    if reps is not None:
        # the spread of repeats on one engine start misses the start-to-start variation
        # that repeats on their own starts hold: say which the error bars are
        own = ", each on its own engine start" if restarted and reps != 1 else ""
        more.append(f"{reps} repeat{'s' if reps != 1 else ''} per level{own}")
    if w.get("slo"):
        more.append(f"goodput SLO {_text(w.pop('slo'))}")
    w.pop("slo", None)
    more += [f"{k}={_text(v)}" for k, v in sorted(w.items()) if v is not None]
    return "; ".join([head, *more])


@dataclass(frozen=True)
class Chart:
    name: str
    title: str
    data_uri: str
    file: str


def _made(run: SweepRun, path: str) -> str:
    return "*" if path in run.summary.client_made else ""


def _run_row(run: SweepRun) -> dict[str, Any]:
    problems = "; ".join(f"{p.code} x{p.count}: {p.message}" for p in run.problems)
    return {
        "target": run.target,
        "concurrency": f"{run.level:g}",
        "repeat": run.repeat,
        "verdict": run.verdict,
        "used": run.is_valid,
        "achieved": _fmt(run.value("load.achieved_concurrency"), 2),
        "total": _fmt(run.value("throughput.total_tokens_per_s")),
        # "*": the client's own loop lag could have made it (client_made_percentiles)
        "ttft": _fmt(run.value("ttft_ms.p50")) + _made(run, "ttft_ms.p50"),
        "itl": _fmt(run.value("itl_ms.p50"), 2) + _made(run, "itl_ms.p50"),
        "problems": problems or "-",
        "overloaded": bool(run.overloaded),
        # an open-loop level too short for a steady state (crossover.analysis.short)
        "short": is_short(run),
        # the engine's own count of prompt tokens served from its prefix cache
        "cache": _pct(run.value("prefix_cache.hit_fraction")),
        # a level crossover decide stopped sending once settled: what it sent of its plan
        "part": _part_text(run),
    }


def _part_text(run: SweepRun) -> str | None:
    if run.part is None:
        return None
    sent = run.value("requests.sent")
    of = f" of {run.part.planned}" if run.part.planned is not None else ""
    if sent is None:
        head = "a part of the level"
    else:  # "1 of 8 requests", "1 request"
        head = (
            f"a part: {sent:.0f}{of} requests sent"
            if of
            else f"a part: {plural(sent, 'request', fmt='.0f')} sent"
        )
    return f"{head} ({run.part.why})" if run.part.why else head


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _targets(sweep: SweepFile) -> list[dict[str, Any]]:
    """Declared targets, filled in from what their runs' summaries report."""
    out = []
    for name in sweep.target_names():
        info = sweep.target(name) or TargetInfo(name=name)
        seen = next((r.engine for r in sweep.runs if r.target == name), None)
        out.append(
            {
                "name": name,
                "engine": _text(info.engine or (seen.name if seen else None)),
                "version": _text(info.version or (seen.version if seen else None)),
                "model": _text(info.model or (seen.model if seen else None)),
                "url": _text(info.url or (seen.url if seen else None)),
                "settings": [(k, _text(v)) for k, v in sorted(info.settings.items())],
                "start": _start_text(sweep, name),
            }
        )
    return out


def _start_text(sweep: SweepFile, name: str) -> str:
    """A launched target's engine starts: seconds to ready (the range over its starts)
    and the stop; ``-`` for a target crossover did not start."""
    starts = [s for s in sweep.engine_starts if s.target == name]
    if not starts:
        return "-"
    ready = sorted(s.ready_s for s in starts)
    span = f"{ready[0]:.1f} s" if len(ready) == 1 else f"{ready[0]:.1f}-{ready[-1]:.1f} s"
    stops = [s.stop_s for s in starts if s.stop_s is not None]
    stop = f"; stop {max(stops):.1f} s" if stops else ""
    count = f" ({len(starts)} starts)" if len(starts) > 1 else ""
    return f"ready {span}{count}{stop}"


def _problems(sweep: SweepFile) -> list[dict[str, str]]:
    """One row per kind of problem: the same code and message in several runs is one row
    naming the runs, with the summed count, so that a warning every level repeats does
    not bury the errors. Messages that differ only in their figures (a loop lag of 3.1
    or 3.4 ms) are the same problem: the row quotes the first run's and says so."""
    groups: dict[tuple[str, str, str], tuple[dict[str, str], list[str], int, set[str]]] = {}
    for r in _in_order(sweep):
        where = f"{r.target} {level_label(r.axis, r.level)} #{r.repeat}"
        for p in r.problems:
            key = (p.code, p.severity, _FIGURES.sub("#", p.message))
            if key in groups:
                row, runs, total, said = groups[key]
                groups[key] = (row, [*runs, where], total + p.count, said | {p.message})
                continue
            row = {"where": where, "code": p.code, "severity": p.severity}
            row.update(count=str(p.count), message=p.message)
            groups[key] = (row, [where], p.count, {p.message})
    rows = []
    for row, runs, total, said in groups.values():
        if len(runs) > 1:
            row["where"] = f"{len(runs)} runs: {', '.join(runs)}"
            row["count"] = str(total)
            if len(said) > 1:
                row["message"] += " (the first run's figures; each run's are under Every run)"
        rows.append(row)
    # errors first, then warnings, then notes; the runs' order within each
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(rows, key=lambda row: order.get(row["severity"], 3))


#: the figures in a problem's message, masked to tell the same problem in several runs
_FIGURES = re.compile(r"\d+(?:[.,]\d+)*")


def _in_order(sweep: SweepFile) -> list[SweepRun]:
    """The runs in the sweep's target order (as its terminal table lists the targets),
    then by level and repeat."""
    order = sweep.target_names()
    return sorted(sweep.runs, key=lambda r: (order.index(r.target), r.axis, r.level, r.repeat))


def _telemetry(sweep: SweepFile) -> list[dict[str, str]]:
    rows = []
    for r in sweep.runs:
        if not r.gpu and not r.server_metrics:
            continue
        gpu = r.gpu or []
        util = [g.util_pct for g in gpu if g.util_pct is not None]
        mem = [g.mem_used_mib for g in gpu if g.mem_used_mib is not None]
        power = [g.power_w for g in gpu if g.power_w is not None]
        rows.append(
            {
                "where": f"{r.target} {level_label(r.axis, r.level)} #{r.repeat}",
                "gpu_samples": str(len(gpu)),
                "util": _fmt(max(util) if util else None, 0),
                "mem": _fmt(max(mem) if mem else None, 0),
                "power": _fmt(max(power) if power else None, 0),
                "server_samples": str(len(r.server_metrics or [])),
                "gauges": ", ".join(
                    sorted({k for s in r.server_metrics or [] for k in s.values})[:8]
                ),
            }
        )
    return rows


def render_html(
    sweep: SweepFile,
    charts: dict[str, bytes],
    findings: Sequence[Finding],
    roofline: Sequence[RooflineCheck],
    *,
    title: str = "crossover sweep report",
    chart_dir: str = "report",
    quality: dict[str, Any] | None = None,
    decision: dict[str, Any] | None = None,
    tie_rel: float = 0.0,
    gc: Sequence[GcRun] = (),
    resummarized: str | None = None,
) -> str:
    """The report's HTML text for an analysed sweep and its PNG charts (and, when the
    folder holds them, the ``crossover quality`` result beside the speed results and the
    ``crossover decide`` answer the sweep's runs were measured for); ``tie_rel``: the tie
    margin ``findings`` were read with, said above them; ``gc``: the runs a logged long
    garbage collection of the engine fell in (``crossover.analysis.gc``);
    ``resummarized``: the line saying the summaries were recomputed from the records
    (``crossover report --resummarize``), not read from sweep.json."""
    from crossover.report.decision import decision_context

    rate = sweep.axis() == "rate"
    off = {(o.target, o.axis, o.level, o.repeat) for o in outlier_repeats(sweep)}
    # runs whose engine's KV cache was full with requests waiting (crossover.analysis.kv):
    # read once, for their section and their rows' tag
    kv_full = kv_full_runs(sweep)
    kv_keys = {(x.target, x.label, x.repeat) for x in kv_full}
    queued = queued_runs(sweep)
    queued_keys = {(x.target, x.label, x.repeat) for x in queued}
    gc_keys = {(x.target, x.label, x.repeat) for x in gc}
    titles = dict(CHART_TITLES)
    if rate:
        titles["throughput"] = (
            f"Output tokens/s vs arrival rate, {sweep.rate_unit()} (error bars: spread over "
            "repeats; "
            "red rings: overloaded levels)"
        )
    chart_list = [
        Chart(
            name,
            titles.get(name, name),
            "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
            f"{chart_dir}/{name}.png",
        )
        for name, png in charts.items()
    ]
    context = {
        "title": title,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "started_at": sweep.started_at,
        "workload": describe_workload(sweep.workload or {}),
        # each change of machine (metrics.host.kinds): a host an earlier crossover kept as
        # another machine, though the same kind, is no resume on another machine
        "hosts": [h.describe() for h in kinds(sweep.hosts)],
        # which physical machines (machine_id, a hash of their GPUs' UUIDs): two machines
        # of one kind are one kind in "hosts", and both are named here
        "machine_ids": machine_ids(sweep.hosts),
        "machines": sweep.machines(),
        "resummarized": resummarized,
        "version": __version__,
        "charts": chart_list,
        "short_levels": format_short_levels(sweep),
        "overloads": format_overloads(sweep),
        "above_slots": format_above_slots(above_slots(sweep)),
        "kv_full": [
            {
                "target": x.target,
                "level": x.label,
                "repeat": x.repeat,
                "usage": f"{x.pressure.peak_usage:.2f}",
                "waiting": _fmt(x.pressure.peak_waiting, 0),
                "samples": f"{x.pressure.full_waiting_samples} of {x.pressure.samples}",
            }
            for x in kv_full
        ],
        "kv_meaning": KV_MEANING,
        "queued": [
            {
                "target": x.target,
                "level": x.label,
                "repeat": x.repeat,
                "waiting": _fmt(x.queue.peak_waiting, 0),
                "longest": x.queue.longest,
                "running": _fmt(x.queue.peak_running, 0),
                "limit": "-" if x.limit is None else x.limit,
                "usage": "-" if x.queue.peak_usage is None else f"{x.queue.peak_usage:.2f}",
            }
            for x in queued
        ],
        "queued_meaning": QUEUED_MEANING,
        "queued_in_a_row": QUEUED_IN_A_ROW,
        "queued_for_s": f"{QUEUED_FOR_S:g}",
        "gc_runs": [
            {
                "target": x.target,
                "level": x.label,
                "repeat": x.repeat,
                "line": describe_gc(x),
            }
            for x in gc
        ],
        "gc_meaning": GC_MEANING,
        "kv_full_at": f"{KV_FULL:g}",
        "crossovers": [format_crossover(f) for f in findings if f.kind == "crossover"],
        "inconclusive": [format_crossover(f) for f in findings if f.kind == "inconclusive"],
        "no_crossover": [format_crossover(f) for f in findings if f.kind == "none"],
        "recorded": [format_crossover(x, crossover_levels(sweep, x)) for x in sweep.crossovers],
        "recorded_margin": fmt_margin(sweep.tie_margin or 0.0),
        "margin": margin_text(tie_rel),
        "roofline": [
            {"target": c.target, "status": c.status, "line": c.describe()} for c in roofline
        ],
        "targets": _targets(sweep),
        "problems": _problems(sweep),
        "outliers": [
            {"line": o.describe(), "redo": f"--redo {o.redo}"} for o in outlier_repeats(sweep)
        ],
        "spreads": [
            {
                "label": x.label,
                "median": f"{100 * x.median:.1f}%",
                "largest": f"{100 * x.largest:.1f}%",
                "where": x.where(),
                "levels": x.levels,
            }
            for x in repeat_spreads(sweep)
        ],
        "own_starts": own_starts(sweep),
        "show_cache": any(r.value("prefix_cache.hit_fraction") is not None for r in sweep.runs),
        "runs": [
            {
                **_run_row(r),
                "outlier": (r.target, r.axis, r.level, r.repeat) in off,
                "kv_full": (r.target, level_label(r.axis, r.level), r.repeat) in kv_keys,
                "queued": (r.target, level_label(r.axis, r.level), r.repeat) in queued_keys,
                "gc_pause": (r.target, level_label(r.axis, r.level), r.repeat) in gc_keys,
            }
            for r in _in_order(sweep)
        ],
        "n_used": sum(1 for r in sweep.runs if r.is_valid),
        "level_header": sweep.rate_unit() if sweep.axis() == "rate" else "concurrency",
        "telemetry": _telemetry(sweep),
        "quality": _quality_rows(quality),
        "decision": decision_context(decision),
    }
    return environment().get_template("report.html.j2").render(**context)


#: the file ``crossover report`` shows beside a sweep when the folder holds it
QUALITY_FILE = "quality.json"


def load_quality(sweep_dir: Path) -> dict[str, Any] | None:
    """``sweep_dir/quality.json`` (``crossover quality --json``) if present; one-line
    ``UsageError`` when it is not a ``crossover.quality/1`` file."""
    from crossover.errors import UsageError, first_line
    from crossover.quality.measure import QualityResult

    path = sweep_dir / QUALITY_FILE
    if not path.is_file():
        return None
    try:
        result = QualityResult.model_validate_json(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a crossover.quality/1 file ({first_line(exc)})") from None
    return result.to_json_dict()


def _quality_rows(quality: dict[str, Any] | None) -> dict[str, Any] | None:
    if not quality:
        return None

    def pct(v: Any) -> str:
        return "-" if v is None else f"{v:.2%}"

    def iv(v: Any, fmt: str) -> str:
        return "" if not v else f" ({fmt.format(v[0])}-{fmt.format(v[1])})"

    rows = []
    for c in quality.get("candidates") or []:
        interval = c.get("interval") or {}
        kl = c.get("mean_kl")
        rows.append(
            {
                "name": c.get("name"),
                "engine": c.get("engine"),
                "scored": f"{c.get('scored_tokens', 0):,}",
                "agreement": pct(c.get("top1_agreement"))
                + iv(interval.get("top1_agreement"), "{:.2%}"),
                "kl": ("-" if kl is None else f"{kl:.4f}") + iv(interval.get("mean_kl"), "{:.4f}"),
                "first": "-"
                if c.get("first_divergence_p50") is None
                else f"{c['first_divergence_p50']:g}",
            }
        )
    ref = quality.get("reference") or {}
    return {
        "reference": ref.get("name"),
        "engine": ref.get("engine"),
        "tokens": f"{quality.get('reference_tokens', 0):,}",
        "prompts": quality.get("prompts"),
        "rows": rows,
    }


def chart_folder(sweep_dir: Path, out: Path | None) -> Path:
    """Where the report's PNGs go: ``DIR/report/`` beside ``DIR/report.html``; beside any
    other HTML file, a folder named after it (``r.html``: ``r_files/``), so that a report
    written elsewhere (``--out``) writes nothing into the sweep's folder, which may be
    read-only (a committed sweep, someone else's)."""
    default = sweep_dir / "report.html"
    if out is None or out.resolve() == default.resolve():
        return sweep_dir / "report"
    return out.parent / f"{out.stem}_files"


def margin_text(tie_rel: float) -> str:
    """What the report says of the tie margin its findings were read with."""
    if tie_rel <= 0.0:
        return (
            "Read without a tie margin: any significant difference at a level is a lead "
            "(crossover report --tie-margin M reads means within M of each other as level)."
        )
    m = fmt_margin(tie_rel)
    return (
        f"Read with a tie margin of {m}: at a level where the two means are within {m} of "
        "each other, neither leads and the difference has no sign, however tight its "
        "interval; no crossover rests on such a level."
    )


def write_report(
    sweep_dir: Path,
    sweep: SweepFile,
    out: Path | None = None,
    *,
    tie_rel: float | None = None,
    findings: Sequence[Finding] | None = None,
    resummarized: str | None = None,
    gc: Sequence[GcRun] | None = None,
) -> Path:
    """Analyse ``sweep`` with the tie margin ``tie_rel`` (default: the one sweep.json
    records, else 0), write the HTML to ``out`` (default ``sweep_dir/report.html``) and
    its PNGs to ``chart_folder``. Returns the HTML's path. ``findings``: the analysis
    already made with that margin (a caller that also prints it analyses once);
    ``resummarized``: what ``crossover report --resummarize`` recomputed, said at the top
    (the runs' summaries came from the records, not from sweep.json)."""
    from crossover.report.charts import all_charts

    margin = tie_rel if tie_rel is not None else sweep.tie_margin or 0.0
    if findings is None:
        findings = analyze_sweep(sweep, tie_rel=margin)
    charts = all_charts(sweep, findings)
    chart_dir = chart_folder(sweep_dir, out)
    chart_dir.mkdir(parents=True, exist_ok=True)
    for name, png in charts.items():
        (chart_dir / f"{name}.png").write_bytes(png)
    from crossover.report.decision import load_decision

    decision = load_decision(sweep_dir)
    html = render_html(
        sweep,
        charts,
        findings,
        check_sweep(sweep),
        title="crossover decision report" if decision else "crossover sweep report",
        chart_dir=chart_dir.name,  # beside the HTML: a link relative to it
        quality=load_quality(sweep_dir),
        decision=decision,
        tie_rel=margin,
        gc=gc if gc is not None else gc_runs(sweep_dir, sweep),
        resummarized=resummarized,
    )
    out = out if out is not None else sweep_dir / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
