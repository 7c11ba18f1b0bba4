"""``crossover capacity``: the highest arrival rate that meets an SLO."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from crossover import defaults
from crossover.capacity.runner import CapacityConfig
from crossover.cli.common import check_output_file, default_of, help_of, write_output
from crossover.errors import UsageError
from crossover.spec.workload import Workload

if TYPE_CHECKING:
    from crossover.capacity import CapacityFile, CapacityLevel
    from crossover.spec.slo import Slo


EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover capacity --url http://127.0.0.1:8000 --engine vllm --model M \\\n"
    "      --output-tokens 256 --slo ttft_ms.p99=500,tpot_ms.p50=50 --json capacity.json\n"
    "  crossover capacity --config sweep.yaml --slo ttft_ms.p99=250 --json capacity.json\n"
)


def register(app: typer.Typer) -> None:
    app.command("capacity", epilog=EXAMPLE)(capacity)


def capacity(
    slo: Annotated[
        str, typer.Option(help="Terms every level must meet: ttft_ms.p99=500,tpot_ms.p50=50")
    ],
    url: Annotated[str | None, typer.Option(help="Endpoint base URL")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model name sent in requests (default: the one model the server lists)"),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="Or a sweep YAML: each target (launched or URL) searched in turn"),
    ] = None,
    output_tokens: Annotated[
        str | None,
        typer.Option(
            help="Exactly this many tokens per request, or a distribution each request draws "
            "its own exact N from (as crossover run --output-tokens: uniform:MIN-MAX, "
            "normal:MEAN,SD[,MIN-MAX], lognormal:MEAN,SD[,MIN-MAX], empirical:FILE)"
        ),
    ] = None,
    engine: Annotated[
        str, typer.Option(help="Request dialect: openai, or the engine behind the URL")
    ] = default_of(CapacityConfig, "engine"),
    input_tokens: Annotated[
        str | None,
        typer.Option(help="Prompt length in tokens, or a distribution (as --output-tokens)"),
    ] = None,
    precision: Annotated[
        float, typer.Option(help="Stop when the bracket's top is within this of its bottom")
    ] = default_of(CapacityConfig, "precision"),
    start_rate: Annotated[
        float | None,
        typer.Option(help="First rate tried (requests/s; default 1, with --trace its own rate)"),
    ] = None,
    max_rate: Annotated[float | None, typer.Option(help="Never try above (requests/s)")] = None,
    min_rate: Annotated[
        float | None, typer.Option(help="Give up below (default start rate / 64)")
    ] = None,
    duration_s_per_level: Annotated[
        float, typer.Option(help="Seconds each rate is held")
    ] = default_of(CapacityConfig, "duration_s_per_level"),
    warmup: Annotated[
        int, typer.Option(help="Warm-up requests before the first level")
    ] = defaults.CAPACITY_WARMUP,
    early_stop: Annotated[
        bool, typer.Option(help="Stop a level early once its queue keeps growing")
    ] = default_of(CapacityConfig, "early_stop"),
    trace: Annotated[
        Path | None,
        typer.Option(
            help="Replay a Mooncake-style JSONL trace at every level (as crossover run "
            "--trace): a rate is the trace's mean rate times its speed factor"
        ),
    ] = None,
    trace_block_tokens: Annotated[
        int, typer.Option(help=help_of(Workload, "trace_block_tokens"))
    ] = default_of(Workload, "trace_block_tokens"),
    tokenizer: Annotated[str | None, typer.Option(help=help_of(Workload, "tokenizer"))] = None,
    seed: Annotated[int, typer.Option(help=help_of(Workload, "seed"))] = default_of(
        Workload, "seed"
    ),
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write crossover.capacity/1 here")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Keep every level's run and records in DIR/capacity.db")
    ] = None,
) -> None:
    """Search the highest request rate whose measured percentiles meet every SLO term."""
    import tempfile

    from pydantic import ValidationError

    from crossover.capacity.runner import CapacityConfig
    from crossover.cli.common import console as make_console
    from crossover.cli.common import run_async
    from crossover.dialects.discovery import pick_model, served_models
    from crossover.engines import registry
    from crossover.errors import validation_line
    from crossover.measure import api_headers, probe
    from crossover.records.database_file import check_writable
    from crossover.spec.slo import parse_slo

    terms = parse_slo(slo)
    if config is not None:
        if url is not None:
            raise UsageError("give --url or --config, not both")
        _capacity_of_targets(config, terms, locals(), json_path, out)
        return
    if url is None or (output_tokens is None and trace is None):
        raise UsageError("give --url and --output-tokens or --trace (or --config sweep.yaml)")
    try:
        cfg = CapacityConfig(
            url=url,
            engine=engine,
            model=model or "",  # the server's one model where not given (below)
            output_tokens=output_tokens,
            input_tokens=input_tokens or 200,
            trace=trace,
            trace_block_tokens=trace_block_tokens,
            slo=terms,
            precision=precision,
            start_rps=start_rate,
            max_rps=max_rate,
            min_rps=min_rate,
            duration_s_per_level=duration_s_per_level,
            warmup_requests=warmup,
            early_stop=early_stop,
            tokenizer=tokenizer,
            seed=seed,
        )
        first = cfg.run_config(cfg.start_rps, 0)  # the URL and dialect, checked first
    except ValidationError as exc:
        raise UsageError(validation_line(exc, flags=True, names=CAPACITY_FLAGS)) from None
    _check_outputs(json_path, [out / "capacity.db"] if out else [], config)
    console = make_console(stderr=True)
    # as run does: something that is not an LLM server of this dialect is one line and
    # exit 2 before any level (each would be an invalid level of seconds), and the model
    # may be left out where the server lists exactly one
    headers = api_headers(first)
    probe(cfg.url, headers)
    listed = served_models(cfg.url, registry.dialect(first.dialect), model, headers)
    picked, said = pick_model(cfg.url, listed, model)
    if said is not None:
        console.print(said)
    cfg = cfg.model_copy(update={"model": picked})
    with tempfile.TemporaryDirectory(prefix="crossover-capacity-") as tmp:
        folder = out if out is not None else Path(tmp)
        check_writable(folder)
        with _writer(out):
            result = run_async(_run(cfg, folder, console))
    if json_path is not None:
        write_output(json_path, result.to_json(), "--json")
    print_result(result)
    if json_path is not None:
        make_console().print(f"results: {json_path}")


def _writer(out: Path | None) -> AbstractContextManager[object]:
    """One writer per ``--out`` folder (``crossover.records.folder_lock``, as sweep and
    decide hold theirs): a second capacity search there, which would resume the first's
    levels and launch its engines beside the first's, is refused in one line."""
    import contextlib

    from crossover.records.folder_lock import FolderLock

    return FolderLock.take(out, "capacity") if out is not None else contextlib.nullcontext()


#: CapacityConfig fields whose flag is not ``--`` + the field's name
CAPACITY_FLAGS = {
    "start_rps": "--start-rate",
    "max_rps": "--max-rate",
    "min_rps": "--min-rate",
    "warmup_requests": "--warmup",
}


def _capacity_of_targets(
    config: Path, terms: Slo, flags: dict[str, Any], json_path: Path | None, out: Path | None
) -> None:
    """``--config``: capacity per target of a sweep YAML, side by side."""
    import tempfile

    from pydantic import ValidationError

    from crossover.capacity.runner import CapacityConfig, CapacityEvents
    from crossover.capacity.targets import capacity_per_target
    from crossover.cli.common import console as make_console
    from crossover.cli.common import run_async
    from crossover.errors import validation_line
    from crossover.records.database_file import check_writable
    from crossover.spec.workload import Workload
    from crossover.sweep.config import load_sweep_config

    sweep = load_sweep_config(config)
    # the sweep's whole workload and limits, as its own levels would take them
    base: dict[str, Any] = {k: getattr(sweep, k) for k in (*Workload.model_fields, "timeouts")}
    if flags["output_tokens"]:  # a flag's fixed length replaces the YAML's distribution
        base |= {"output_tokens": flags["output_tokens"], "output_lengths": None}
    if flags["input_tokens"]:
        base |= {"input_tokens": flags["input_tokens"], "input_lengths": None}
    if flags["trace"]:
        base |= {"trace": flags["trace"], "trace_block_tokens": flags["trace_block_tokens"]}
    base |= {
        "slo": terms,
        "precision": flags["precision"],
        "start_rps": flags["start_rate"],
        "max_rps": flags["max_rate"],
        "min_rps": flags["min_rate"],
        "duration_s_per_level": flags["duration_s_per_level"],
        "warmup_requests": flags["warmup"],
        "early_stop": flags["early_stop"],
    }
    for t in sweep.targets:  # every target's first level, checked before any engine starts
        dialect = t.launch.adapter.dialect.name if t.launch is not None else t.engine or "openai"
        url = (t.base_urls or ["http://127.0.0.1:8000"])[0]
        try:
            cfg = CapacityConfig.model_validate(
                {**base, "url": url, "engine": dialect, "model": t.model or "m"}
            )
            cfg.run_config(cfg.start_rps, 0)
        except ValidationError as exc:
            line = validation_line(exc, flags=True, names=CAPACITY_FLAGS)
            raise UsageError(f"target {t.name}: {line}") from None
    dbs = [out / t.name / "capacity.db" for t in sweep.targets] if out else []
    _check_outputs(json_path, dbs, config)
    console = make_console(stderr=True)
    events = CapacityEvents(
        lambda rate, _p: console.print(f"[dim]rate {rate:.3g} requests/s ...[/]"),
        lambda level: console.print(level_line(level)),
    )
    with tempfile.TemporaryDirectory(prefix="crossover-capacity-") as tmp:
        folder = out if out is not None else Path(tmp)
        check_writable(folder)
        with _writer(out):  # before any engine is launched for it
            result = run_async(
                capacity_per_target(
                    sweep,
                    base,
                    folder,
                    events,
                    lambda n, msg: console.print(f"[cyan]{n}[/]: {msg}"),
                )
            )
    if json_path is not None:
        write_output(json_path, result.to_json(), "--json")
    for one in result.targets:
        make_console().print(f"\n[bold]{one.target.get('name')}[/]")
        print_result(one)
    print_side_by_side(result.targets)
    if json_path is not None:
        make_console().print(f"results: {json_path}")


def print_side_by_side(results: list[CapacityFile]) -> None:
    from rich.table import Table

    from crossover.cli.common import console as make_console

    table = Table(title="capacity per target", header_style="bold")
    for col in ("target", "capacity/s", "bracket/s", "goodput/s", "levels", "s"):
        table.add_column(col, justify="left" if col == "target" else "right")
    for r in results:
        lo, hi = r.interval
        table.add_row(
            str(r.target.get("name")),
            "-" if r.max_rate_rps is None else f"{r.max_rate_rps:.3g}",
            f"[{'-' if lo is None else f'{lo:.3g}'}, {'-' if hi is None else f'{hi:.3g}'}]",
            "-" if r.goodput_rps is None else f"{r.goodput_rps:.3g}",
            str(len(r.levels)),
            f"{r.seconds:.0f}",
        )
    make_console().print(table)


async def _run(cfg: Any, folder: Path, console: Any) -> CapacityFile:
    from crossover.capacity.runner import CapacityEvents, CapacityRunner

    def start(rate: float, _progress: Any) -> None:
        console.print(f"[dim]rate {rate:.3g} requests/s ...[/]")

    def done(level: CapacityLevel) -> None:
        console.print(level_line(level))

    runner = CapacityRunner(cfg, folder, CapacityEvents(start, done))
    try:
        return await runner.run()
    finally:
        runner.close()


def level_line(level: CapacityLevel) -> str:
    """One finished level; an invalid one says so and why, never a bare ``misses``."""
    from rich.markup import escape

    why = level.invalid_reason()
    mark = "[green]meets[/]" if level.met else "[red]misses[/]"
    if why is not None:
        mark = f"[red]invalid[/] ({escape(why)}; counted as missing)"
    terms = "  ".join(
        f"{c.term} {'-' if c.measured is None else f'{c.measured:.1f}'}" for c in level.checks
    )
    extra = "  [red]overloaded, stopped early[/]" if level.overloaded else ""
    speed = "" if level.trace_speed is None else f" (trace x{level.trace_speed:.3g})"
    took = "kept from before" if level.kept else f"{level.seconds:.1f} s"
    return f"rate {level.rate_rps:7.3f}/s{speed}  {mark}  {terms}  ({took}){extra}"


def slo_word(level: CapacityLevel) -> str:
    """The table's SLO column: meets, misses, or invalid (counted as missing)."""
    if level.invalid_reason() is not None:
        return "invalid (counted as missing)"
    return ("meets" if level.met else "misses") + (" (overloaded)" if level.overloaded else "")


def print_result(result: CapacityFile) -> None:
    from rich.table import Table

    from crossover.cli.common import console as make_console

    stdout = make_console()
    table = Table(title="levels in the order tried", header_style="bold")
    table.add_column("rate/s", justify="right")
    traced = any(lv.trace_speed is not None for lv in result.levels)
    if traced:
        table.add_column("trace x", justify="right")
    for t in result.slo:
        table.add_column(f"{t.path} (<= {t.limit:g})", justify="right")
    table.add_column("goodput/s", justify="right")
    table.add_column("queue p99 ms", justify="right")
    table.add_column("SLO")
    table.add_column("s", justify="right")
    for lv in result.levels:
        s = lv.summary
        good = s.goodput.requests_per_s if s is not None and s.goodput is not None else None
        queue = s.queue_ms.p99 if s is not None else None
        table.add_row(
            f"{lv.rate_rps:.3f}",
            *([f"{lv.trace_speed or 0:.3g}"] if traced else []),
            *[("-" if c.measured is None else f"{c.measured:.1f}") for c in lv.checks],
            "-" if good is None else f"{good:.2f}",
            "-" if queue is None else f"{queue:.1f}",
            slo_word(lv),
            f"{lv.seconds:.1f}",
        )
    stdout.print(table)
    slo = str(result.slo)
    lo, hi = result.interval
    if result.verdict == "found":
        assert lo is not None
        assert hi is not None
        stdout.print(
            f"[bold]capacity {lo:.3g} requests/s[/] meeting {slo}: it lies in "
            f"[{lo:.3g}, {hi:.3g}] (last level meeting, first missing; "
            f"precision {result.precision:g})"
        )
    elif result.verdict == "above_max_rate":
        stdout.print(f"[bold]capacity >= {lo:.3g} requests/s[/]: the maximum rate meets {slo}")
    else:
        stdout.print(f"[bold red]no rate meets {slo}[/]: even {hi:.3g} requests/s misses")
    invalid = [lv for lv in result.levels if lv.invalid_reason() is not None]
    if invalid:
        stdout.print(
            f"[red]{len(invalid)} of {len(result.levels)} levels invalid[/] (counted as "
            f"missing, not measured to miss): {invalid[0].invalid_reason()}"
        )
    at = next((lv for lv in result.levels if lo is not None and lv.rate_rps == lo), None)
    if at is not None and at.trace_speed is not None:
        stdout.print(f"the trace replayed {at.trace_speed:.3g}x as fast as recorded meets it")
    if result.goodput_rps is not None:
        # a Poisson schedule's arrivals match its rate only on average: say what arrived, so
        # goodput above the level's nominal rate reads as what it is
        load = at.summary.load if at is not None and at.summary is not None else None
        arrived = load.arriving_rps if load is not None else None
        came = "" if arrived is None else f" ({arrived:.3g} requests/s arrived at that level)"
        stdout.print(
            f"goodput at capacity: {result.goodput_rps:.3g} requests/s meet every term{came}"
        )
    n = len(result.levels)
    stdout.print(f"{n} level{'' if n == 1 else 's'}, {result.seconds:.0f} s")


def _check_outputs(json_path: Path | None, dbs: list[Path], config: Path | None) -> None:
    """Before any server is asked or engine started: each ``capacity.db`` under ``--out``
    missing or a results database (some other file is left as it is), and ``--json``'s
    folder writable and the file neither a folder nor one of the search's own inputs and
    results."""
    from crossover.records.database_file import check_database_file, check_writable

    for db in dbs:
        check_database_file(db)
    if json_path is not None:
        check_writable(json_path.parent if str(json_path.parent) else Path("."))
    check_output_file(json_path, "--json", keep=[*dbs, config])
