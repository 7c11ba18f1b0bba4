"""``crossover sweep``: several targets over several concurrency levels or arrival rates."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from crossover import defaults
from crossover.cli.common import default_of, help_of
from crossover.cli.run import (
    EndpointOpt,
    PromptLengthsOpt,
    PromptsOpt,
    SharedPrefixOpt,
    ThinkOpt,
    TraceOpt,
    TurnsOpt,
    prompt_lengths_input,
    sessions_of,
)
from crossover.errors import InvalidRunError, UsageError, parse_names
from crossover.spec.run import RunConfig, parse_named_url
from crossover.spec.workload import Workload
from crossover.sweep.config import SweepConfig
from crossover.words import plural

if TYPE_CHECKING:  # types only: the command imports these when it runs
    from collections.abc import Sequence

    from rich.console import Console
    from rich.table import Table

    from crossover.analysis.crossovers import Finding
    from crossover.analysis.schema import SweepFile, SweepRun
    from crossover.measure import Progress
    from crossover.metrics.summary import RunSummary
    from crossover.sweep.check import CheckReport
    from crossover.sweep.cluster import RayCluster
    from crossover.sweep.config import SweepConfig
    from crossover.sweep.driver import SweepOutcome

EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover sweep --out sweep1 --model calib --output-tokens 32 \\\n"
    "      --target a=http://127.0.0.1:8001 --target b=http://127.0.0.1:8002 \\\n"
    "      --concurrency 1,4,16,32\n"
    "  crossover sweep --out sweep2 --config sweep.yaml   # keys: docs/sweep-yaml.md\n"
    "  crossover sweep --config sweep.yaml --check   # check it whole, measure nothing\n"
    "  crossover sweep --config gpu.yaml --check --remote   # paths are another machine's\n"
    "  crossover sweep --out sweep3 --config sweep.yaml --ray auto   # on a Ray cluster\n"
)

if TYPE_CHECKING:
    from crossover.sweep.config import Level


def register(app: typer.Typer) -> None:
    app.command("sweep", epilog=EXAMPLE)(sweep)


def parse_target(text: str, engine: str | None, model: str | None) -> dict[str, Any]:
    """``NAME=URL[,engine=vllm,model=M]``."""
    name, url, settings = parse_named_url(text, "--target")
    out: dict[str, Any] = {"name": name, "url": url, "engine": engine, "model": model}
    out.update(settings)
    if out["engine"] is None:
        out["engine"] = "openai"
    return out


def sweep(
    out: Annotated[
        Path | None,
        typer.Option(help="Sweep folder: sweep.db, sweep.json, engine logs (not with --check)"),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="Sweep YAML (targets may launch engines)")
    ] = None,
    target: Annotated[
        list[str] | None, typer.Option(help="NAME=URL[,engine=E,model=M]; repeat")
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            help="Default request dialect of --target "
            f"[default: {default_of(RunConfig, 'dialect')}]"
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Default model name of --target")] = None,
    concurrency: Annotated[str | None, typer.Option(help="Levels, e.g. 1,2,4,8,16")] = None,
    rates: Annotated[
        str | None,
        typer.Option(help="Or open-loop levels: Poisson arrivals at these requests/s, e.g. 2,4,8"),
    ] = None,
    requests_per_level: Annotated[
        int | None,
        typer.Option(help=f"Measured requests per level [default: {defaults.LEVEL_REQUESTS_HELP}]"),
    ] = None,
    duration_s_per_level: Annotated[float | None, typer.Option(help="Or seconds per level")] = None,
    warmup: Annotated[
        str | None,
        typer.Option(
            metavar="N|level",
            help="Warm-up requests per level, or level: one wave of the level's concurrency "
            f"sent at once [default: {defaults.LEVEL_WARMUP_HELP}]",
        ),
    ] = None,
    warmup_output_tokens: Annotated[
        int | None,
        typer.Option(
            help="Output tokens each warm-up request asks for [default: as the measured ones]"
        ),
    ] = None,
    output_tokens: Annotated[
        str | None,
        typer.Option(
            help="Exactly this many tokens per request, or a distribution each request draws "
            "its own exact N from (uniform:MIN-MAX, normal:MEAN,SD[,MIN-MAX], "
            "lognormal:MEAN,SD[,MIN-MAX], empirical:FILE; with --prompts, dataset:MAX: each "
            "prompt's own reply length, at most MAX)"
        ),
    ] = None,
    input_tokens: Annotated[
        str | None,
        typer.Option(
            help="Prompt length in tokens, or a distribution "
            f"[default: {default_of(Workload, 'input_tokens')}]"
        ),
    ] = None,
    endpoint: EndpointOpt = None,
    turns: TurnsOpt = None,
    think_s: ThinkOpt = None,
    trace: TraceOpt = None,
    shared_prefix: SharedPrefixOpt = None,
    prompts: PromptsOpt = None,
    prompt_lengths: PromptLengthsOpt = None,
    repeats: Annotated[
        int | None, typer.Option(help=help_of(SweepConfig, "repeats", show_default=True))
    ] = None,
    refine: Annotated[
        bool, typer.Option(help="Measure between bracketing levels to narrow crossovers")
    ] = False,
    refine_budget: Annotated[
        int | None, typer.Option(help=help_of(SweepConfig, "refine_budget", show_default=True))
    ] = None,
    slo: Annotated[
        str | None,
        typer.Option(
            help="Goodput SLO, as capacity takes it: ttft_ms.p99=500,tpot_ms.p50=50 (a request "
            "counts when it meets each limit)"
        ),
    ] = None,
    tokenizer: Annotated[str | None, typer.Option(help=help_of(Workload, "tokenizer"))] = None,
    seed: Annotated[
        int | None, typer.Option(help=help_of(Workload, "seed", show_default=True))
    ] = None,
    report: Annotated[bool, typer.Option(help="Render DIR/report.html at the end")] = True,
    allow_invalid: Annotated[bool, typer.Option(help="Exit 0 even with invalid runs")] = False,
    only: Annotated[
        str | None,
        typer.Option(
            help="Measure only these targets this time (NAME,NAME); the others' stored "
            "runs stay in sweep.json"
        ),
    ] = None,
    redo_invalid: Annotated[
        bool,
        typer.Option(help="On resume, measure again levels whose stored run is not valid"),
    ] = False,
    redo: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME[@LEVEL,...]",
            help="On resume, measure again every repeat of these levels of target NAME "
            "(all its levels without @), valid or not: an outlier repeat the sweep "
            "flagged; repeat the flag for more targets",
        ),
    ] = None,
    workers: Annotated[
        str | None,
        typer.Option(
            help="Load processes per level, or auto (sized per level from its streams and "
            "the previous level's client loop lag); with --ray, Ray actors spread over the "
            f"cluster's nodes [default: {default_of(SweepConfig, 'workers')}]"
        ),
    ] = None,
    transport: Annotated[
        str | None,
        typer.Option(
            help="The HTTP client of every level: aiohttp or lean "
            f"[default: {default_of(SweepConfig, 'transport')}]"
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Check the whole config (knobs per engine, model paths, executables, ports, "
            "URLs, tokenizer, workload) and measure nothing: exit 0, or 2 with every problem",
        ),
    ] = False,
    remote: Annotated[
        bool,
        typer.Option(
            "--remote",
            help="With --check: the config is for another machine (a GPU host, a Ray "
            "cluster); model paths, executables, ports, URLs and files are not looked up here",
        ),
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Run each target (its engine and load) as a Ray actor on an existing "
            "cluster: auto, HOST:6379 or ray://HOST:10001; targets run in parallel",
        ),
    ] = None,
) -> None:
    """Sweep targets over concurrency levels; find where one overtakes another."""
    from crossover.cli.common import console as make_console
    from crossover.cli.common import parse_list, run_async
    from crossover.records.store import check_database_file, check_writable
    from crossover.sweep.config import build_sweep_config, load_sweep_config

    flags: dict[str, Any] = {
        "requests_per_level": requests_per_level,
        "duration_s_per_level": duration_s_per_level,
        "warmup_requests": warmup,
        "warmup_output_tokens": warmup_output_tokens,
        "output_tokens": output_tokens,
        "input_tokens": input_tokens,
        "endpoint": endpoint,
        "trace": trace,
        "shared_prefix": shared_prefix,
        "prompts_file": prompts,
        "repeats": repeats,
        "tokenizer": tokenizer,
        "seed": seed,
        "refine_budget": refine_budget,
        "workers": workers,
        "transport": transport,
        "slo": slo,
    }
    if (sessions := sessions_of(turns, think_s)) is not None:  # as run: one turn is none
        flags["sessions"] = sessions
    if refine:
        flags["refine"] = True
    if concurrency is not None and rates is not None:
        raise UsageError("give --concurrency or --rates, not both")
    if concurrency is not None:
        flags["concurrency"] = parse_list(concurrency, "--concurrency")
    if rates is not None:
        flags["rates"] = parse_list(rates, "--rates", float)
    if config is not None:
        if target:
            raise UsageError("give --config or --target, not both")
        cfg = load_sweep_config(config, flags)
    else:
        if not target:
            raise UsageError("give --config sweep.yaml or at least one --target NAME=URL")
        data = {k: v for k, v in flags.items() if v is not None}
        data["targets"] = [parse_target(t, engine, model) for t in target]
        if "output_tokens" not in data:
            raise UsageError("--output-tokens is required")
        if "concurrency" not in data and "rates" not in data:
            raise UsageError("--concurrency (e.g. 1,2,4,8) or --rates (e.g. 2,4,8) is required")
        cfg = build_sweep_config(data)
    if prompt_lengths not in (None, "fit"):  # each prompt as written, the same to all
        prompt_lengths_input(prompt_lengths, cfg.prompts_file, None)
        cfg = cfg.model_copy(update={"input_tokens": None, "input_lengths": None})
    chosen = set(parse_names(only, "--only")) if only is not None else None
    cfg.check_only(chosen)  # before the output folder exists: a mistake writes nothing
    from crossover.sweep.check import check_config, raise_if_errors

    source = str(config) if config is not None else "sweep"
    if remote and not check:
        raise UsageError("--remote goes with --check (a sweep with --ray skips local lookups)")
    if check:
        report_check(check_config(cfg, local=not remote and ray is None, only=chosen), source)
        return
    if out is None:
        raise UsageError("--out DIR is required (or --check to check the config only)")
    check_database_file(out / "sweep.db")  # before any server is asked or engine started
    # the whole config, every target, before the output folder exists; with --ray the
    # paths are the nodes', so only what does not depend on this machine is checked here
    raise_if_errors(check_config(cfg, local=ray is None, only=chosen), source)
    cluster = None
    if ray is not None:  # Ray is imported only here, only with --ray
        from crossover.sweep.cluster import RayCluster

        cluster = RayCluster.connect(ray)
    fresh = not out.exists()
    had_db = (out / "sweep.db").exists()
    try:
        if cluster is not None:
            cluster.check(cfg, chosen)
        check_writable(out)
        console = make_console(stderr=True)
        outcome = run_async(
            run_live(cfg, out, console, chosen, redo_invalid, cluster, parse_redo(redo, cfg))
        )
    except UsageError:
        # refused once running (a prompt file no tokenizer can fit, a server gone since
        # the check): what this command created and left without a run goes again
        forget_empty_sweep(out, fresh=fresh, had_db=had_db)
        raise
    finally:
        if cluster is not None:
            cluster.close()
    print_outcome(outcome, out, console, report)
    invalid = [r for r in outcome.sweep.runs if r.summary.verdict != "valid"]
    if (invalid or outcome.failed_levels) and not allow_invalid:
        raise InvalidRunError(
            invalid_line(len(invalid), len(outcome.sweep.runs), outcome.failed_levels)
        )


def parse_redo(specs: list[str] | None, cfg: SweepConfig) -> dict[str, set[float] | None]:
    """``--redo NAME[@L1,L2]`` (repeatable) as {target: levels or None for all}; an
    unknown target or a level the target does not sweep is one line, before any work."""
    from crossover.errors import unknown_choice

    out: dict[str, set[float] | None] = {}
    names = [t.name for t in cfg.targets]
    levels = {lv.value for lv in cfg.levels()}
    for spec in specs or []:
        name, _, rest = spec.partition("@")
        if name not in names:
            raise UsageError("--redo: " + unknown_choice("target", name, names))
        if not rest:
            out[name] = None
            continue
        mine = set(levels)
        target = next(t for t in cfg.targets if t.name == name)
        if target.concurrency:
            mine = {float(c) for c in target.concurrency}
        chosen: set[float] = set()
        for part in rest.split(","):
            try:
                value = float(part)
            except ValueError:
                raise UsageError(
                    f"--redo {spec}: expected NAME@LEVEL[,LEVEL...], e.g. {name}@4"
                ) from None
            if value not in mine:
                shown = ", ".join(f"{v:g}" for v in sorted(mine))
                raise UsageError(f"--redo {spec}: {name} has no level {part} (its levels: {shown})")
            chosen.add(value)
        if name not in out:
            out[name] = chosen
        elif (had := out[name]) is not None:  # None (all its levels) stays all
            had |= chosen
    return out


def invalid_line(invalid: int, runs: int, failed_levels: list[str]) -> str:
    """The sweep's last line when something did not verify or was not measured: what,
    and the cures (resume, redo, or accept)."""
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
    return "; ".join(parts) + "; --allow-invalid to exit 0"


def forget_empty_sweep(out: Path, *, fresh: bool, had_db: bool) -> None:
    """Remove the sweep.db (and sweep.json) this command created when no run reached it,
    and the folder itself when this command created it and nothing else is in it."""
    import contextlib
    import shutil

    from crossover.records.store import Store

    db = out / "sweep.db"
    if had_db or not db.exists():
        return
    try:
        with Store(db) as store:
            if store.runs():
                return
    except Exception:  # unreadable: leave it for the user to see
        return
    for name in ("sweep.db", "sweep.db-wal", "sweep.db-shm", "sweep.json"):
        (out / name).unlink(missing_ok=True)
    engines = out / "engines"
    if fresh and engines.is_dir() and not any(engines.rglob("*.log")):
        shutil.rmtree(engines, ignore_errors=True)
    if fresh:
        with contextlib.suppress(OSError):
            out.rmdir()  # only when empty


def report_check(report: CheckReport, source: str) -> None:
    """``--check``: one line per target (what it would run), each problem under its
    target; exit 0 when there is none, 2 (a usage error) otherwise."""
    for t in report.targets:
        bad = [f for f in t.findings if f.severity == "error"]
        typer.echo(f"{'error' if bad else 'ok':<5} {t.name}: {t.what}")
        for f in t.findings:
            typer.echo(f"      {f.severity}: {f.message}")
    for f in report.findings:
        typer.echo(f"{f.severity:<5} {f.where}: {f.message}")
    if not report.local:
        from crossover.sweep.check import REMOTE_SKIPS

        typer.echo(f"not looked up on this machine (--remote): {REMOTE_SKIPS}")
    errors = report.errors
    if errors:
        raise UsageError(f"{source}: {len(errors)} problem(s) listed above; nothing measured")
    typer.echo(f"{source}: OK, {len(report.targets)} target(s) checked; nothing measured")


class KeptRuns:
    """Runs done earlier and kept, said in one line per target as such a stretch ends (a
    resumed sweep printed a line for each of them, a hundred on a big grid)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.pending: dict[str, list[str]] = {}

    def add(self, name: str, level: Level, r: int) -> None:
        self.pending.setdefault(name, []).append(f"{level.label} r={r}")

    def flush(self) -> None:
        from rich.markup import escape

        for name, runs in self.pending.items():
            n = f"{len(runs)} runs" if len(runs) > 1 else "1 run"
            self.console.print(
                f"[dim]{escape(name)}: {n} done earlier, kept ({escape(', '.join(runs))})[/]"
            )
        self.pending.clear()


async def run_live(
    cfg: SweepConfig,
    out: Path,
    console: Console,
    only: set[str] | None = None,
    redo_invalid: bool = False,
    cluster: RayCluster | None = None,
    redo: dict[str, set[float] | None] | None = None,
) -> SweepOutcome:
    """Run the sweep with a live progress line and one line per finished level."""
    import asyncio
    import contextlib

    from rich.live import Live
    from rich.markup import escape

    from crossover.cli.render import progress_line
    from crossover.sweep.driver import SweepEvents, SweepRunner

    progress_now: list[Progress | None] = [None]
    label = [""]
    kept = KeptRuns(console)

    def start(name: str, level: Level, r: int, progress: Progress) -> None:
        kept.flush()
        progress_now[0], label[0] = progress, f"{name} {level.label} r={r}"

    def engine(name: str, msg: str) -> None:
        kept.flush()
        console.print(f"[cyan]{escape(name)}[/]: {escape(msg)}")

    def refine(new: list[int], left: int) -> None:
        kept.flush()
        console.print(
            f"[cyan]refine[/]: measuring concurrency {', '.join(map(str, new))}, between "
            "levels where a crossover (or an inconclusive sign change) is not yet placed "
            f"within {cfg.refine_width:.0%} of its level ({left} more level(s) left of "
            f"--refine-budget {cfg.refine_budget})"
        )

    def done(name: str, level: Level, r: int, s: RunSummary, status: str) -> None:
        kept.flush()
        console.print(level_line(name, level.label, r, s, status))
        for p in s.problems:
            if p.severity == "error":
                console.print(f"    [red]{p.code}[/]: {escape(p.message)}")

    events = SweepEvents(
        on_level_start=start,
        on_level_done=done,
        on_skip=kept.add,
        on_engine=engine,
        on_refine=refine,
    )
    runner = SweepRunner(
        cfg, out, events, only=only, redo_invalid=redo_invalid, cluster=cluster, redo=redo
    )
    task = asyncio.ensure_future(runner.run())
    try:
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while not task.done():
                await asyncio.wait({task}, timeout=0.25)
                p = progress_now[0]
                if p is not None:
                    from rich.text import Text

                    live.update(Text.assemble((label[0] + "  ", "bold"), progress_line(p)))
        return task.result()
    finally:
        kept.flush()
        if not task.done():  # Ctrl-C: let the level mark itself interrupted first
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        runner.close()


def level_line(name: str, level: str, r: int, s: RunSummary, status: str) -> str:
    """One finished level, as rich markup; a metric that is missing shows as ``—``, not 0.
    An open-loop level says how many requests/s it served of those arriving, and when
    that fell behind, that it was overloaded."""
    from rich.markup import escape

    from crossover.analysis.overload import open_loop_load
    from crossover.cli.render import _f, client_mark, server_word_note

    style = {"valid": "green", "unverified": "yellow", "invalid": "red"}[s.verdict]
    ttft_mark, itl_mark = client_mark(s, "ttft_ms.p50"), client_mark(s, "itl_ms.p50")
    alone = server_word_note(s).strip()
    note = f" [yellow]{escape(alone)}[/]" if alone else ""
    head = f"[bold]{escape(name)}[/] {level} r={r}  [{style}]{s.verdict}[/]{note}  "
    tail = "" if status == "done" else f"  [red]({status})[/]"
    load = open_loop_load(s)
    if s.load.mode == "rate":
        flag = "[bold red]OVERLOADED[/]  " if load is not None and load.overloaded else ""
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
    done) and TTFT p50 along the rate axis, an overloaded level marked. Invalid runs are
    shown as such, never averaged in."""
    from rich.markup import escape
    from rich.table import Table

    from crossover.cli.render import _f

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


def findings_lines(sweep: SweepFile, findings: list[Finding]) -> list[str]:
    """The findings as the sweep prints them after its table, in rich markup (every value
    escaped): the overloaded levels, the crossovers under their heading, the headline
    metrics without one, the arrival-effects notes, and what the intervals of a sweep of
    one repeat per level rest on. ``crossover report`` prints the same lines from the
    stored results."""
    from rich.markup import escape

    from crossover.analysis import format_crossover
    from crossover.analysis.crossovers import arrival_effects, format_overloads
    from crossover.report.compare import NOISE_FLOOR

    lines = [f"[bold red]overloaded:[/] {escape(line)}" for line in format_overloads(sweep)]
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


def print_outcome(
    outcome: SweepOutcome,
    out: Path,
    console: Console,
    report: bool,
    notes: Sequence[str] = (),
) -> None:
    """The comparison table, the crossovers one per line (then ``notes``, a caller's lines
    on them), where the results are."""
    from rich.markup import escape

    from crossover.cli.common import console as make_console

    stdout = make_console()
    stdout.print(
        f"\n[bold]Sweep[/] {out}: {plural(outcome.ran, 'run')} measured, {outcome.skipped} kept "
        "from before"
    )
    stdout.print(table_caption(outcome.sweep))
    stdout.print(comparison_table(outcome.sweep))
    for line in outlier_lines(outcome.sweep):
        stdout.print(f"[yellow]{escape(line)}[/]")
    made = client_made_line(outcome.sweep)
    if made is not None:
        stdout.print(f"[yellow]{escape(made)}[/]")
    for line in findings_lines(outcome.sweep, outcome.findings):
        stdout.print(line)
    for note in notes:
        stdout.print(escape(note))
    for line in outcome.failed_levels:
        stdout.print(f"[red]failed level[/] {escape(line)}")
    stdout.print(f"results: {out / 'sweep.json'} (database {out / 'sweep.db'})")
    if report:
        try:
            from crossover.report.html import write_report

            path = write_report(out, outcome.sweep)
            stdout.print(f"report: {path}")
        except Exception as exc:  # the sweep's results stand without the report
            console.print(f"[yellow]report not written: {escape(str(exc))}[/]")
