"""``crossover report DIR`` and ``crossover compare A B``: parsing only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crossover.cli.common import check_output_file, check_tie_margin

if TYPE_CHECKING:
    from crossover.analysis.schema import SweepFile
    from crossover.report.resummarize import Resummarized


def report(
    directory: Annotated[Path, typer.Argument(help="sweep directory (holds sweep.json)")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="HTML file to write, its PNGs in NAME_files/ beside it "
            "[default: DIR/report.html, PNGs in DIR/report/]",
        ),
    ] = None,
    tie_margin: Annotated[
        float | None,
        typer.Option(
            help="Means within this share of each other are level at a level: neither a "
            "lead nor a sign change, so no crossover rests on them (e.g. 0.03) "
            "[default: the margin sweep.json records, else 0]"
        ),
    ] = None,
    resummarize: Annotated[
        bool,
        typer.Option(
            "--resummarize",
            help="Recompute every run's summary from sweep.db's per-request records (or "
            "a results folder's sweep.db.xz) with this crossover's metric code (its newer "
            "fields, validity checks and window rules) before analysing, and say what "
            "changed; sweep.json and the database are only read",
        ),
    ] = False,
) -> None:
    """Render a sweep directory into one self-contained HTML report (PNGs in DIR/report/;
    with --out, beside OUT and nothing written into DIR)."""
    from rich.markup import escape

    from crossover.analysis import analyze_sweep, check_sweep
    from crossover.analysis.gc import gc_runs
    from crossover.cli.common import console
    from crossover.errors import CrossoverError, UsageError
    from crossover.report import load_sweep, write_report
    from crossover.report.text import findings_lines

    if tie_margin is not None:
        check_tie_margin(tie_margin)
    sweep = load_sweep(directory)
    margin = tie_margin if tie_margin is not None else sweep.tie_margin or 0.0
    sweep_dir = directory if directory.is_dir() else directory.parent
    kept = [sweep_dir / name for name in ("sweep.json", "sweep.db", "sweep.db.xz")]
    check_output_file(out, "--out", keep=kept)
    stdout = console()
    note = None
    if resummarize:
        done = _resummarized(sweep_dir, sweep)
        sweep, note = done.sweep, done.line()
        stdout.print(escape(note))
    findings = analyze_sweep(sweep, tie_rel=margin)
    gc = gc_runs(sweep_dir, sweep)  # once: a committed folder's database is decompressed for it
    try:
        path = write_report(
            sweep_dir, sweep, out, tie_rel=margin, findings=findings, resummarized=note, gc=gc
        )
    except OSError as exc:
        raise UsageError(f"cannot write the report: {exc}") from None
    except ImportError as exc:  # a core dependency removed by hand: say the one fix
        if not (exc.name or "").startswith("matplotlib"):
            raise
        raise CrossoverError(
            "the report needs matplotlib (a core dependency): pip install 'matplotlib>=3.8'"
        ) from None
    # as the sweep printed them
    for line in findings_lines(sweep, findings, tie_rel=margin, gc=gc):
        stdout.print(line)
    for check in check_sweep(sweep):
        stdout.print(escape(check.describe()))
    stdout.print(f"report: {escape(str(path))}")


def _resummarized(sweep_dir: Path, sweep: SweepFile) -> Resummarized:
    """The sweep's summaries recomputed from sweep.db, a progress bar on stderr meanwhile
    (hundreds of runs of thousands of records take a while; gone when done)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from crossover.cli.common import console
    from crossover.report.resummarize import resummarize_sweep

    with Progress(
        TextColumn("resummarizing"), BarColumn(), MofNCompleteColumn(),
        console=console(stderr=True), transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("runs", total=len(sweep.runs))
        return resummarize_sweep(sweep_dir, sweep, lambda: bar.advance(task))


def compare(
    before: Annotated[Path, typer.Argument(help="run summary JSON or sweep directory (before)")],
    after: Annotated[Path, typer.Argument(help="run summary JSON or sweep directory (after)")],
    html: Annotated[
        Path | None, typer.Option("--html", help="also write the comparison as HTML here")
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Compare even a run that is not valid, or work that is not matched"
        ),
    ] = False,
    tie_margin: Annotated[
        float,
        typer.Option(
            help="A ratio within this share of 1 is no significant change even where its "
            "interval excludes 1: repeats on one engine start miss the start-to-start "
            "variation (e.g. 0.03; default 0: the interval alone decides)"
        ),
    ] = 0.0,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            help="Two sweeps: compare BEFORE's target A with AFTER's target B (A=B; A alone: "
            "the same name on both); repeatable (default: the targets of one name on both "
            "sides, or the only target of each)",
        ),
    ] = None,
) -> None:
    """Before/after table of the headline metrics of two runs or two sweeps, with ratios.

    Both must be valid and measured with the same work (input and output tokens,
    endpoint); otherwise compare refuses (exit 3 for a run that is not valid, 2 for
    unmatched work) unless --force.
    """
    from crossover.errors import InvalidRunError, UsageError
    from crossover.report import compare_paths, format_table, write_compare_html

    check_tie_margin(tie_margin)
    pairs = [_pair(t) for t in target or []]
    inputs = [
        p / name for p in (before, after) for name in ("sweep.json", "sweep.db", "sweep.db.xz")
    ]
    check_output_file(html, "--html", keep=[before, after, *inputs])
    cmp = compare_paths(before, after, tie_rel=tie_margin, pairs=pairs)
    why = cmp.refusal()
    if why is not None and not force:
        error = InvalidRunError if cmp.invalid_runs else UsageError
        raise error(f"{why} (--force to compare anyway)")
    typer.echo(format_table(cmp))
    if html is not None:
        try:
            typer.echo(f"html: {write_compare_html(cmp, html)}")
        except OSError as exc:
            raise UsageError(f"cannot write {html}: {exc}") from None


def _pair(text: str) -> tuple[str, str]:
    """``--target A=B`` as (A, B); ``A`` alone as (A, A)."""
    from crossover.errors import UsageError

    a, eq, b = text.partition("=")
    a, b = a.strip(), b.strip()
    if not a or (eq and not b):
        raise UsageError(f"--target {text!r}: give BEFORE_NAME=AFTER_NAME, or one name")
    return (a, b if eq else a)


REPORT_EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover report sweep1   # writes sweep1/report.html\n"
    "  crossover report sweep1 --resummarize   # summaries recomputed from sweep1/sweep.db\n"
    "  crossover report results/sweep1 --out /tmp/sweep1.html   # sweep.db.xz read as kept\n"
)
COMPARE_EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover run ... --json a.json; crossover run ... --json b.json\n"
    "  crossover compare a.json b.json\n"
    "  crossover compare sweep1 sweep2 --html compare.html\n"
    "  crossover compare sweep1 sweep1b --tie-margin 0.03\n"
    "  crossover compare sweep1 sweep2 --target sglang=sglang-512\n"
)


def register(app: typer.Typer) -> None:
    app.command("report", epilog=REPORT_EXAMPLE)(report)
    app.command("compare", epilog=COMPARE_EXAMPLE)(compare)
