"""A sweep's results as terminal text, in rich markup (every value escaped): each
finished level's line, the runs a resumed sweep kept, the comparison table and its
caption, the outlier repeats, the client-made tails, the findings, and the last line of
a sweep with runs that are not valid. ``crossover sweep``, ``demo`` and ``decide`` print
them as they measure; ``crossover report`` prints the findings from the stored results."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from crossover.metrics.text import _f, client_mark, server_word_note

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from rich.console import Console

    from crossover.analysis.crossovers import Finding
    from crossover.analysis.gc import GcRun
    from crossover.analysis.schema import SweepFile, SweepRun
    from crossover.metrics.summary import RunSummary
    from crossover.spec.load import Level


def level_line(name: str, level: str, r: int, s: RunSummary, status: str) -> str:
    """One finished level, as rich markup; a metric that is missing shows as ``—``, not 0.
    An open-loop level says how many requests/s it served of those arriving, and when
    that fell behind, that it was overloaded; one too short for a steady state says so
    and why (``crossover.analysis.short``)."""
    from crossover.analysis.overload import open_loop_load
    from crossover.analysis.short import short_open_loop

    style = {"valid": "green", "unverified": "yellow", "invalid": "red"}[s.verdict]
    ttft_mark, itl_mark = client_mark(s, "ttft_ms.p50"), client_mark(s, "itl_ms.p50")
    alone = server_word_note(s).strip()
    note = f" [yellow]{escape(alone)}[/]" if alone else ""
    head = f"[bold]{escape(name)}[/] {level} r={r}  [{style}]{s.verdict}[/]{note}  "
    tail = "" if status == "done" else f"  [red]({status})[/]"
    load = open_loop_load(s)
    if s.load.mode == "rate":
        flag = "[bold red]OVERLOADED[/]  " if load is not None and load.overloaded else ""
        short = short_open_loop(s)
        # its served rate and tokens/s: ramp-up and drain (an overloaded one: its queue)
        if short is not None and not flag:
            flag += f"[bold red]SHORT LEVEL[/] [red]({escape(short.reason)})[/]  "
        served = (
            f"served {load.served_rps:.3g} of {load.arriving_rps:.3g} req/s  "
            if load is not None
            else ""
        )
        good = (
            f"goodput {_f(s.goodput.requests_per_s, '.3g')} req/s  "
            if s.goodput is not None
            else ""
        )
        return (
            head
            + flag
            + f"out {_f(s.throughput.output_tokens_per_s, ',.0f')} tok/s  "
            + served
            + good
            + f"TTFT p50 {_f(s.ttft_ms.p50, ',.1f')} ms  E2E p50 {_f(s.e2e_ms.p50, ',.0f')} ms"
            + tail
        )
    return (
        head + f"total {_f(s.throughput.total_tokens_per_s, ',.0f')} tok/s  "
        f"out {_f(s.throughput.output_tokens_per_s, ',.0f')} tok/s"
        f"  TTFT p50 {_f(s.ttft_ms.p50, '.1f')}{ttft_mark} ms"
        f"  ITL p50 {_f(s.itl_ms.p50, '.2f')}{itl_mark} ms" + tail
    )


class KeptRuns:
    """Runs done earlier and kept, said in one line per target as such a stretch ends (a
    resumed sweep printed a line for each of them, a hundred on a big grid)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.pending: dict[str, list[str]] = {}

    def add(self, name: str, level: Level, r: int) -> None:
        self.pending.setdefault(name, []).append(f"{level.label} r={r}")

    def flush(self) -> None:
        for name, runs in self.pending.items():
            n = f"{len(runs)} runs" if len(runs) > 1 else "1 run"
            self.console.print(
                f"[dim]{escape(name)}: {n} done earlier, kept ({escape(', '.join(runs))})[/]"
            )
        self.pending.clear()


def table_caption(sweep: SweepFile) -> str:
    """What each cell of the comparison table holds."""
    if sweep.axis() == "rate":
        second = "goodput req/s" if _has_goodput(sweep) else "done req/s"
        return (
            f"output tok/s | {second} | TTFT p50 ms (mean of valid repeats); "
            "OVERLOADED: fewer served than arrived"
        )
    return "total tok/s | TTFT p50 ms | ITL p50 ms (mean of valid repeats)"


def _has_goodput(sweep: SweepFile) -> bool:
    return any(r.summary.goodput is not None for r in sweep.runs)


def comparison_table(sweep: SweepFile) -> Table:
    """Rows: levels; per target the headline figures (means over valid repeats): total
    tok/s, TTFT p50, ITL p50 along concurrency; output tok/s, goodput (or requests/s
    done) and TTFT p50 along the rate axis, an overloaded level marked, and one too short
    for a steady state (``crossover.analysis.short``). Invalid runs are shown as such,
    never averaged in."""
    from crossover.analysis.short import is_short

    names = sweep.target_names()
    axis = sweep.axis()
    levels = sorted({r.level for r in sweep.runs if r.axis == axis})
    t = Table(header_style="bold")
    t.add_column(sweep.rate_unit() if axis == "rate" else "concurrency", justify="right")
    for n in names:
        t.add_column(escape(n), justify="right")
    if axis == "rate":
        second = "goodput.requests_per_s" if _has_goodput(sweep) else "throughput.requests_per_s"
        paths = (
            ("throughput.output_tokens_per_s", ",.0f"),
            (second, ".3g"),
            ("ttft_ms.p50", ",.0f"),
        )
    else:
        paths = (
            ("throughput.total_tokens_per_s", ",.0f"),
            ("ttft_ms.p50", ".0f"),
            ("itl_ms.p50", ".1f"),
        )
    marked = False
    for c in levels:
        row = [f"{c:g}"]
        for n in names:
            runs = [r for r in sweep.runs if r.target == n and r.axis == axis and r.level == c]
            ok = [r for r in runs if r.is_valid]
            if not runs:
                row.append("—")
            elif not ok:
                row.append(f"[red]{runs[0].verdict}[/]")
            else:

                def mean(path: str, fmt: str, ok: list[SweepRun] = ok) -> str:
                    vals = [v for v in (r.value(path) for r in ok) if v is not None]
                    return _f(sum(vals) / len(vals) if vals else None, fmt)

                def mark(path: str, ok: list[SweepRun] = ok) -> str:
                    return "*" if any(path in r.summary.client_made for r in ok) else ""

                cell = " | ".join(mean(p, f) + mark(p) for p, f in paths)
                marked = marked or "*" in cell
                if any(r.overloaded for r in ok):
                    cell = f"[bold red]OVERLOADED[/] {cell}"
                if any(is_short(r) for r in ok):
                    cell = f"[red]SHORT[/] {cell}"  # tok/s and req/s: ramp-up and drain
                row.append(cell)
        t.add_row(*row)
    if marked:  # the footnote only where a cell carries its mark
        t.caption = (
            "* within reach of the client's own event-loop lag in a repeat "
            "(client_made_percentiles): could be the client's; try --workers N"
        )
    return t


def outlier_lines(sweep: SweepFile) -> list[str]:
    """Each outlier repeat (``crossover.analysis.outliers``) and the command that redoes it."""
    from crossover.analysis.outliers import outlier_repeats

    found = outlier_repeats(sweep)
    if not found:
        return []
    lines = [f"outlier repeat: {o.describe()}" for o in found]
    redo = " ".join(f"--redo {spec}" for spec in dict.fromkeys(o.redo for o in found))
    lines.append(
        "an outlier widens its level's interval (findings through it read inconclusive); "
        f"the same command with {redo} measures those levels again"
    )
    return lines


def client_made_line(sweep: SweepFile) -> str | None:
    """Said once, after the table: how many runs had tail percentiles (p90/p99) within
    reach of the client's own loop lag, which ones, and the cure (each level's line no
    longer repeats it)."""
    made: dict[str, int] = {}
    runs = 0
    for r in sweep.runs:
        tails = [m for m in r.summary.client_made if m.endswith(("p90", "p99"))]
        runs += bool(tails)
        for m in tails:
            made[m] = made.get(m, 0) + 1
    if not runs:
        return None
    which = ", ".join(f"{m} ({n})" for m, n in sorted(made.items(), key=lambda x: -x[1]))
    return (
        f"client-made tails in {runs} of {len(sweep.runs)} runs: {which} are within reach "
        "of the client's own event-loop lag, so they could be the client's; --workers N "
        "(or auto) spreads the load over more client processes"
    )


#: the findings printed after the table, in this order, besides every crossover
HEADLINE = {
    "concurrency": ("total_tokens_per_s", "ttft_ms.p50", "itl_ms.p50"),
    "rate": ("output_tokens_per_s", "goodput_rps", "requests_per_s", "ttft_ms.p50"),
}


def ordered_findings(findings: list[Finding]) -> list[Finding]:
    """Crossovers and headline findings, the headline metrics of each axis first (a rate
    sweep leads with output tokens/s and goodput: total tokens/s counts prompts that
    arrived, not work the server kept up with)."""
    out: list[Finding] = []
    for f in findings:
        head = HEADLINE[f.axis]
        if f.kind == "crossover" or f.metric in head:
            out.append(f)

    def rank(f: Finding) -> tuple[str, int]:
        head = HEADLINE[f.axis]
        return (f.axis, head.index(f.metric) if f.metric in head else len(head))

    return sorted(out, key=rank)


def findings_lines(
    sweep: SweepFile,
    findings: list[Finding],
    *,
    tie_rel: float = 0.0,
    sweep_dir: Path | None = None,
    gc: Sequence[GcRun] | None = None,
) -> list[str]:
    """The findings as the sweep prints them after its table, in rich markup (every value
    escaped): the overloaded levels, the open-loop levels too short for a steady state
    (``crossover.analysis.short``), the levels whose KV cache was full with requests
    waiting (``crossover.analysis.kv``), with ``sweep_dir`` (its database and engine logs)
    the runs a logged long garbage collection fell in (``crossover.analysis.gc``), the tie
    margin they were read with (when there is one), the crossovers under their heading, the
    headline metrics without one, the arrival-effects notes, and what the intervals of a
    sweep of one repeat per level rest on. ``crossover report`` prints the same lines from
    the stored results. ``gc``: those runs as a caller already read them (else read from
    ``sweep_dir``: a committed folder's database is decompressed for it)."""
    from crossover.analysis import format_crossover
    from crossover.analysis.crossovers import arrival_effects, fmt_margin, format_overloads
    from crossover.analysis.kv import (
        above_slots,
        format_above_slots,
        format_kv_full,
        format_queued,
        kv_full_runs,
        queued_runs,
    )
    from crossover.analysis.short import format_short_levels as short_lines
    from crossover.report.compare import NOISE_FLOOR

    lines = [f"[bold red]overloaded:[/] {escape(line)}" for line in format_overloads(sweep)]
    lines += [f"[bold red]short open-loop levels:[/] {escape(x)}" for x in short_lines(sweep)]
    lines += [
        f"[bold red]KV full:[/] {escape(line)}" for line in format_kv_full(kv_full_runs(sweep))
    ]
    lines += [f"[bold red]queued:[/] {escape(line)}" for line in format_queued(queued_runs(sweep))]
    lines += [
        f"[bold red]above slots:[/] {escape(line)}"
        for line in format_above_slots(above_slots(sweep))
    ]
    if gc is None and sweep_dir is not None:
        from crossover.analysis.gc import gc_runs

        gc = gc_runs(sweep_dir, sweep)
    if gc is not None:
        from crossover.analysis.gc import format_gc_runs

        lines += [f"[bold yellow]GC pause:[/] {escape(line)}" for line in format_gc_runs(gc)]
    if tie_rel > 0.0:
        m = fmt_margin(tie_rel)
        lines.append(
            f"tie margin {m}: means within {m} of each other at a level are level there "
            "(no lead, no sign)"
        )
    shown = ordered_findings(findings)
    xs = [f for f in shown if f.kind == "crossover"]
    others = [f for f in shown if f.kind != "crossover"]
    if xs:
        lines.append("[bold]crossovers[/] (who leads below and above the point; its interval):")
    else:
        lines.append("no crossover in the range measured")
    lines += ["  " + escape(format_crossover(f)) for f in xs]
    if xs and others:
        lines.append("without a crossover:")
    lines += ["  " + escape(format_crossover(f)) for f in others]
    for pooled, wave in arrival_effects(findings):
        lines.append(
            f"[yellow]note[/]: {escape(format_crossover(wave))}: the TTFT p50 crossover of "
            f"{escape(pooled.a)} and {escape(pooled.b)} is how the later requests arrived, "
            'not prefill (docs/metrics.md, "TTFT by wave")'
        )
    counts: dict[tuple[str, float], int] = {}
    for r in sweep.runs:
        if r.is_valid:
            counts[(r.target, r.level)] = counts.get((r.target, r.level), 0) + 1
    if counts and max(counts.values()) == 1:
        lines.append(
            f"[yellow]note[/]: one repeat per level: the intervals rest on an assumed "
            f"{NOISE_FLOOR:.0%} run-to-run noise, not a measured one (--repeats 2 or more "
            "measures it)"
        )
    return lines


def invalid_line(
    invalid: int, runs: int, failed_levels: list[str], version_refused: Sequence[str] = ()
) -> str:
    """The sweep's last line when something did not verify or was not measured: what,
    and the cures (resume, redo, or accept); a target whose engine started at another
    version than its kept runs' (``version_refused``) is measured again by ``--redo``
    alone."""
    parts = []
    if invalid:
        parts.append(
            f"{invalid} of {runs} runs are not valid (shown, never used as points); "
            "--redo-invalid measures them again"
        )
    if failed_levels:
        n = len(failed_levels)
        parts.append(
            f"{n} failed or unmeasured level line{'s' if n != 1 else ''} above; "
            "the same command resumes what was not measured"
        )
    if version_refused:
        names = list(dict.fromkeys(version_refused))
        flags = " ".join(f"--redo {n}" for n in names)
        parts[-1] += f", but for {', '.join(names)} (another engine version: {flags})"
    return "; ".join(parts) + "; --allow-invalid to exit 0"
