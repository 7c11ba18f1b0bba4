"""``crossover run``: one load level against one endpoint (``crossover summarize``, its
records summarized again, is :mod:`crossover.cli.summarize`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from crossover import defaults
from crossover.cli.common import check_output_file, default_of, help_of, write_output
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
from crossover.errors import InvalidRunError, UsageError
from crossover.spec.limits import Limits, Timeouts
from crossover.spec.run import RunConfig
from crossover.spec.workload import Workload, prompt_lengths_input, sessions_of
from crossover.words import plural

EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover calibration-server --port 8001 &\n"
    "  crossover run --url http://127.0.0.1:8001 --model calib --output-tokens 32 --concurrency 4\n"
)


def register(app: typer.Typer) -> None:
    app.command("run", epilog=EXAMPLE)(run)


def run(
    url: Annotated[
        list[str],
        typer.Option(
            help="Base URL of the server, e.g. http://127.0.0.1:8080; repeat it for identical "
            "replicas (request i goes to replica i mod N)"
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option(
            help="Model name sent in each request (default: the one model the server lists "
            "in /v1/models, or its dialect's listing)"
        ),
    ] = None,
    output_tokens: Annotated[
        str | None,
        typer.Option(
            help="Exactly this many tokens per request, or a distribution each request draws "
            "its own exact N from: uniform:MIN-MAX, normal:MEAN,SD[,MIN-MAX], "
            "lognormal:MEAN,SD[,MIN-MAX], empirical:FILE; with --prompts, dataset:MAX (each "
            "prompt's own reply length, at most MAX) (required unless --trace)"
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="Request dialect: openai, or the engine behind the URL (its dialect: "
            "`crossover engines list` names them)"
        ),
    ] = default_of(RunConfig, "dialect"),
    endpoint: EndpointOpt = None,
    concurrency: Annotated[int | None, typer.Option(help="Closed loop: requests in flight")] = None,
    rate: Annotated[
        float | None, typer.Option(help="Open loop: Poisson arrivals per second")
    ] = None,
    max_in_flight: Annotated[
        int | None,
        typer.Option(help="Open loop: cap on requests in flight (the wait counts in queue_ms)"),
    ] = None,
    requests: Annotated[
        int | None, typer.Option(help=f"Measured requests (default {defaults.RUN_REQUESTS_HELP})")
    ] = None,
    duration_s: Annotated[float | None, typer.Option(help="Measure for this long instead")] = None,
    warmup: Annotated[
        str | None,
        typer.Option(
            metavar="N|level",
            help="Warm-up requests outside the measurement, or level: one wave of "
            f"--concurrency sent at once (default {defaults.RUN_WARMUP_HELP})",
        ),
    ] = None,
    warmup_output_tokens: Annotated[
        int | None,
        typer.Option(
            help="Output tokens each warm-up request asks for (default: as the measured ones)"
        ),
    ] = None,
    input_tokens: Annotated[
        str | None,
        typer.Option(help="Prompt length in tokens, or a distribution (as --output-tokens)"),
    ] = str(default_of(Workload, "input_tokens")),
    turns: TurnsOpt = None,
    think_s: ThinkOpt = None,
    trace: TraceOpt = None,
    trace_speed: Annotated[
        float, typer.Option(help="Replay the trace this many times faster")
    ] = default_of(RunConfig, "trace_speed"),
    trace_block_tokens: Annotated[
        int, typer.Option(help=help_of(Workload, "trace_block_tokens"))
    ] = default_of(Workload, "trace_block_tokens"),
    shared_prefix: SharedPrefixOpt = None,
    prompts: PromptsOpt = None,
    prompt_lengths: PromptLengthsOpt = None,
    tokenizer: TokenizerOpt = None,
    seed: Annotated[
        int | None,
        typer.Option(
            help="Seed for prompts and arrivals [default: a new one each run, so no prompt "
            "is sent again to a server a run measured before; the run's JSON keeps it]"
        ),
    ] = None,
    timeout_s: Annotated[float, typer.Option(help=help_of(Timeouts, "total_s"))] = default_of(
        Timeouts, "total_s"
    ),
    first_token_timeout_s: Annotated[
        float, typer.Option(help=help_of(Timeouts, "first_token_s"))
    ] = default_of(Timeouts, "first_token_s"),
    gap_timeout_s: Annotated[float, typer.Option(help=help_of(Timeouts, "gap_s"))] = default_of(
        Timeouts, "gap_s"
    ),
    connect_timeout_s: Annotated[
        float, typer.Option(help=help_of(Timeouts, "connect_s"))
    ] = default_of(Timeouts, "connect_s"),
    max_event_bytes: Annotated[
        int,
        typer.Option(
            help=help_of(
                Limits, "max_event_bytes", "; a bigger one ends the request as event_too_large"
            )
        ),
    ] = default_of(Limits, "max_event_bytes"),
    metrics_url: Annotated[
        str,
        typer.Option(
            help="The engine's Prometheus metrics, read before and after the run as a "
            "witness of the output tokens: auto (URL/metrics), off, or a URL"
        ),
    ] = "auto",
    allowed_failures: Annotated[
        int, typer.Option(help=help_of(Limits, "allowed_failures"))
    ] = default_of(Limits, "allowed_failures"),
    slo: Annotated[
        str | None,
        typer.Option(
            help="SLO terms, as capacity takes them: ttft_ms.p99=500,tpot_ms.p50=50; each is "
            "judged against the run, and a request meeting every limit counts as goodput "
            "(ttft_ms=500 is short for ttft_ms.max=500)"
        ),
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the API key")
    ] = None,
    out: Annotated[Path, typer.Option(help="Output folder (database and summaries)")] = Path(
        "crossover-results"
    ),
    db: Annotated[
        Path | None, typer.Option(help="SQLite database (default OUT/results.db)")
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the run summary here")
    ] = None,
    allow_invalid: Annotated[
        bool, typer.Option(help="Exit 0 even when the verdict is not valid")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="No live progress")] = False,
    client_floor: Annotated[
        str,
        typer.Option(
            help="auto: the floor cached by `crossover calibrate` (nearest concurrency); "
            "off; or a floor JSON file"
        ),
    ] = "auto",
    workers: Annotated[
        str,
        typer.Option(
            help="Client processes sharing the load: N, or auto (sized from the "
            "concurrency and a short event-loop lag probe; 1 below 256 streams)"
        ),
    ] = "1",
    transport: Annotated[
        str,
        typer.Option(
            help="The HTTP client: aiohttp, or lean (an asyncio.Protocol client with "
            "one-pass SSE parsing, less client CPU per token; https URLs use aiohttp)"
        ),
    ] = "aiohttp",
) -> None:
    """Drive one endpoint at one load level with matched work, verify it, report."""
    from rich.live import Live

    from crossover.analysis.schema import summary_value
    from crossover.cli.common import console as make_console
    from crossover.cli.common import parse_transport, run_async, validated
    from crossover.cli.render import print_summary, progress_line
    from crossover.load.sizing import workers_for
    from crossover.measure import Progress, choose_tokenizer, execute, served_model
    from crossover.measure.probes import api_headers, url_version
    from crossover.metrics.client_floor import resolve_client_floor
    from crossover.records.database_file import check_database_file, check_writable
    from crossover.records.store import Store
    from crossover.spec.run import base_url, engine_metrics_url, run_seed
    from crossover.spec.slo import Slo, parse_slo
    from crossover.workload import load_tokenizer

    terms = parse_slo(slo) if slo is not None else Slo()
    for more in url[1:]:  # the first is checked with the rest of the config, as always
        try:
            base_url(more)
        except ValueError as exc:
            raise UsageError(f"--url: {exc}") from None
    if output_tokens is None and trace is None:
        raise UsageError(
            "--output-tokens is required (a number or a distribution), unless --trace gives "
            "each request's length"
        )
    config = validated(
        RunConfig,
        names=RUN_FLAGS,
        url=url[0],
        urls=url if len(url) > 1 else [],
        engine=engine,
        model=model or "",
        endpoint=endpoint or "completions",
        concurrency=concurrency,
        rate_rps=rate,
        max_in_flight=max_in_flight,
        requests=requests,
        duration_s=duration_s,
        warmup_requests=warmup,
        warmup_output_tokens=warmup_output_tokens,
        output_tokens=output_tokens,
        input_tokens=prompt_lengths_input(prompt_lengths, prompts, input_tokens),
        shared_prefix=shared_prefix,
        sessions=sessions_of(turns, think_s),
        trace=trace,
        trace_speed=trace_speed,
        trace_block_tokens=trace_block_tokens,
        prompts_file=prompts,
        tokenizer=tokenizer,
        seed=run_seed(seed),
        allowed_failures=allowed_failures,
        slo=terms.per_request(),
        api_key_env=api_key_env,
        workers=workers_for(workers, concurrency),
        max_event_bytes=max_event_bytes,
        transport=parse_transport(transport),
        timeouts=validated(
            Timeouts,
            names=TIMEOUT_FLAGS,
            connect_s=connect_timeout_s,
            first_token_s=first_token_timeout_s,
            gap_s=gap_timeout_s,
            total_s=timeout_s,
        ),
    )
    engine_metrics = engine_metrics_url(metrics_url, config.url)
    check_writable(out)
    if db is not None:
        check_writable(db.parent)
    check_database_file(db or out / "results.db")  # before the server is contacted
    if json_path is not None:
        check_writable(json_path.parent if str(json_path.parent) else Path("."))
    check_output_file(json_path, "--json", keep=[db or out / "results.db", prompts])
    console = make_console(stderr=True)
    # a local tokenizer and a floor file are checked before the server is contacted
    local_tok = load_tokenizer(config.tokenizer) if config.tokenizer else None
    floor, floor_note = resolve_client_floor(
        client_floor,
        config.concurrency if config.mode == "concurrency" else config.max_in_flight,
        transport=config.transport,
    )
    config = served_model(config, model, console.print)
    version = url_version(config.url, config.dialect, api_headers(config))
    console.print(f"[dim]{floor_note}[/]")  # said once the server answered, as before
    tok = local_tok or choose_tokenizer(config)
    progress = Progress(total=config.requests)
    with Store(db or out / "results.db") as store:

        async def go() -> Any:
            task = asyncio.ensure_future(
                execute(
                    config,
                    store,
                    version=version,
                    tokenizer=tok,
                    progress=progress,
                    client_floor=floor,
                    metrics_url=engine_metrics,
                )
            )
            if quiet:
                return await task
            with Live(
                progress_line(progress), console=console, refresh_per_second=4, transient=True
            ) as live:
                while not task.done():
                    await asyncio.wait({task}, timeout=0.25)
                    live.update(progress_line(progress))
            return task.result()

        outcome = run_async(go())
    from crossover.measure.host import read_host

    # the machine it was measured from, with the summary (`compare` notes two that differ)
    summary = outcome.summary.model_copy(update={"host": read_host()})
    where = config.url
    if len(config.replica_urls) > 1:
        where += f" (+{plural(len(config.replica_urls) - 1, 'replica')}, round robin)"
    engine = config.dialect if version is None else f"{config.dialect} {version}"
    print_summary(make_console(), summary, f"{engine} @ {where}")
    for t in terms:  # each term against the run, as capacity judges a level
        v = summary_value(summary, t.path)
        met = "meets" if t.holds(v) else "misses"
        typer.echo(f"SLO {t}: {met} ({'-' if v is None else f'{v:,.1f}'})")
    if json_path is not None:
        import orjson

        write_output(
            json_path, orjson.dumps(summary.to_json_dict(), option=orjson.OPT_INDENT_2), "--json"
        )
    console.print(f"[dim]records: {db or out / 'results.db'} (run {outcome.run_id})[/]")
    if summary.verdict != "valid" and not allow_invalid:
        raise InvalidRunError(
            f"verdict {summary.verdict}: see the problems above (--allow-invalid to exit 0)"
        )


#: RunConfig fields whose flag is not ``--`` + the field's name
RUN_FLAGS = {
    "rate_rps": "--rate",
    "dialect": "--engine",
    "engine": "--engine",
    "warmup_requests": "--warmup",
    "prompts_file": "--prompts",
    # a distribution given to --output-tokens is checked as output_tokens (FieldError)
    "output_lengths": "--output-tokens",
    "input_lengths": "--input-tokens",
    "urls": "--url",
    "slo": "--slo",
}
#: Timeouts fields and the flags that set them
TIMEOUT_FLAGS = {
    "connect_s": "--connect-timeout-s",
    "first_token_s": "--first-token-timeout-s",
    "gap_s": "--gap-timeout-s",
    "total_s": "--timeout-s",
}
