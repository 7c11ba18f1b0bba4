"""``crossover sweep``: several targets over several concurrency levels or arrival rates."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from crossover import defaults
from crossover.cli.common import check_tie_margin, default_of, help_of
from crossover.cli.options import (
    EndpointOpt,
    PromptLengthsOpt,
    PromptsOpt,
    SharedPrefixOpt,
    ThinkOpt,
    TokenizerOpt,
    TraceOpt,
    TurnsOpt,
)
from crossover.cli.sweep_display import print_outcome, run_live
from crossover.errors import InvalidRunError, UsageError, parse_names
from crossover.spec.run import RunConfig
from crossover.spec.workload import Workload
from crossover.sweep.config import SweepConfig

if TYPE_CHECKING:  # types only: the command imports these when it runs
    from crossover.sweep.check import CheckReport

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


def register(app: typer.Typer) -> None:
    app.command("sweep", epilog=EXAMPLE)(sweep)


def sweep(
    out: Annotated[
        Path | None,
        typer.Option(
            help="Sweep folder: sweep.db, sweep.json, engine logs (with --check: whether a "
            "resume there would be refused, read only)"
        ),
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
    restart_between_repeats: Annotated[
        bool,
        typer.Option(
            help="Measure each repeat in its own engine start: every launched target's "
            "levels of a repeat, then its engine stopped and started again (launched "
            "targets only; one start per repeat per target)"
        ),
    ] = False,
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
    tie_margin: Annotated[
        float | None,
        typer.Option(
            help="Means within this share of each other are level at a level: neither a "
            "lead nor a sign change, in the crossovers printed, --refine's levels, "
            "sweep.json and the report (e.g. 0.03; default: the margin a resumed sweep "
            "was measured with, else 0: any significant gap leads)"
        ),
    ] = None,
    tokenizer: TokenizerOpt = None,
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
            "flagged; repeat the flag for more targets. Where NAME's settings changed "
            "since its runs (more requests per level, a launch setting), NAME alone "
            "measures again its runs measured otherwise, and only those",
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
    from crossover.cli.common import run_async
    from crossover.records.database_file import check_database_file, check_writable
    from crossover.records.folder_lock import FolderLock
    from crossover.sweep.flags import sweep_config_of
    from crossover.sweep.resume import forget_empty_sweep, parse_redo

    if tie_margin is not None:
        check_tie_margin(tie_margin)
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
        "restart_between_repeats": True if restart_between_repeats else None,
        "tokenizer": tokenizer,
        "seed": seed,
        "refine_budget": refine_budget,
        "workers": workers,
        "transport": transport,
        "slo": slo,
    }
    cfg = sweep_config_of(
        flags,
        config=config,
        target=target,
        engine=engine,
        model=model,
        concurrency=concurrency,
        rates=rates,
        turns=turns,
        think_s=think_s,
        refine=refine,
        prompt_lengths=prompt_lengths,
    )
    chosen = set(parse_names(only, "--only")) if only is not None else None
    cfg.check_only(chosen)  # before the output folder exists: a mistake writes nothing
    from crossover.sweep.check import check_config, raise_if_errors

    source = str(config) if config is not None else "sweep"
    if remote and not check:
        raise UsageError("--remote goes with --check (a sweep with --ray skips local lookups)")
    if check:
        if out is not None:  # a folder to resume: refused as the run would refuse it
            from crossover.sweep.resume import parse_redo, resume_refusal

            refused = resume_refusal(cfg, out, chosen, parse_redo(redo, cfg))
            if refused is not None:
                raise UsageError(refused)
        report_check(check_config(cfg, local=not remote and ray is None, only=chosen), source)
        return
    if out is None:
        raise UsageError("--out DIR is required (or --check to check the config only)")
    FolderLock.refuse_if_busy(out)  # another writer: said before the slower checks
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
            run_live(
                cfg, out, console, chosen, redo_invalid, cluster, parse_redo(redo, cfg), tie_margin
            )
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
        from crossover.report.text import invalid_line

        raise InvalidRunError(
            invalid_line(
                len(invalid),
                len(outcome.sweep.runs),
                outcome.failed_levels,
                outcome.version_refused,
            )
        )


def report_check(report: CheckReport, source: str) -> None:
    """``--check``: one line per target (what it would run), each problem under its
    target; exit 0 when there is none, 2 (a usage error) otherwise."""
    for line in report.lines():
        typer.echo(line)
    errors = report.errors
    if errors:
        raise UsageError(f"{source}: {len(errors)} problem(s) listed above; nothing measured")
    typer.echo(f"{source}: OK, {len(report.targets)} target(s) checked; nothing measured")
