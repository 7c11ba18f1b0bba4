"""``crossover calibrate``: measure the client floor against a spawned calibration server."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from crossover.words import plural


def calibrate(
    concurrency: Annotated[
        str, typer.Option(help="Comma-separated concurrency levels to measure")
    ] = "1,64,512",
    itl_ms: Annotated[float, typer.Option(help="The server's per-token gap, ms")] = 20.0,
    output_tokens: Annotated[int, typer.Option(help="Tokens per request")] = 256,
    tokens_per_chunk: Annotated[int, typer.Option(help="Tokens per SSE chunk")] = 1,
    requests: Annotated[
        int | None, typer.Option(help="Requests per level (default: one per stream)")
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the measurements here")
    ] = None,
    cache: Annotated[
        Path | None,
        typer.Option(
            help="Floor cache to write (default: the one `run --client-floor auto` reads, "
            "~/.cache/crossover/floor.json; another is read with `run --client-floor PATH`)"
        ),
    ] = None,
    write_cache: Annotated[
        bool, typer.Option("--write-cache/--no-cache", help="Merge the results into the cache")
    ] = True,
    transport: Annotated[
        str,
        typer.Option(
            help="The client to measure, as run --transport: aiohttp or lean (each has its "
            "own floor in the cache; a run reads its own transport's)"
        ),
    ] = "aiohttp",
) -> None:
    """Measure crossover's own client overhead (the client floor) per load level."""
    import orjson
    from rich.table import Table

    from crossover.cli.common import check_output_file, parse_list, parse_transport, write_output
    from crossover.cli.common import console as make_console
    from crossover.errors import UsageError
    from crossover.metrics.client_floor import (
        default_cache_path,
        load_cache,
        measure_floors,
        save_results,
    )
    from crossover.spec.run import MAX_CONCURRENCY

    levels: list[int] = parse_list(concurrency, "--concurrency", int)
    if max(levels) > MAX_CONCURRENCY:  # 99999999 streams: it ran on, opening sockets
        raise UsageError(
            f"--concurrency {max(levels)}: at most {MAX_CONCURRENCY} (as run --concurrency)"
        )
    if not (0 < itl_ms < math.inf) or output_tokens < 2 or tokens_per_chunk < 1:
        raise UsageError("--itl-ms must be > 0, --output-tokens >= 2, --tokens-per-chunk >= 1")
    if requests is not None and requests < 1:
        raise UsageError("--requests: at least 1")
    the_transport = parse_transport(transport)
    if json_path is not None and not json_path.parent.is_dir():
        raise UsageError(f"--json {json_path}: no such folder {json_path.parent}")
    check_output_file(json_path, "--json")
    if write_cache:
        # the cache is merged into after the measuring: a bad one is said before it
        check_output_file(cache or default_cache_path(), "--cache")
        load_cache(cache)
    err = make_console(stderr=True)
    err.print(
        f"[dim]calibrating: {plural(len(levels), 'level')}, {plural(output_tokens, 'token')} "
        f"at {itl_ms:g} ms/token "
        "against a spawned calibration server[/]"
    )
    results = measure_floors(
        levels,
        itl_ms,
        output_tokens,
        tokens_per_chunk=tokens_per_chunk,
        requests=requests,
        transport=the_transport,
    )

    def f(x: float | None, fmt: str = ".2f") -> str:
        return "—" if x is None else format(x, fmt)

    t = Table(title="client floor (ms unless named)", header_style="bold")
    for col in (
        "conc", "deliv p50", "deliv p99", "deliv max", "send lag p50", "send lag p99",
        "loop lag p50", "loop lag p99", "cpu s", "tok/s", "tok/cpu-s", "TPOT err %",
        "server lag mean",
    ):  # fmt: skip
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(
            str(r.concurrency),
            f(r.delivery_ms.p50, ".3f"),
            f(r.delivery_ms.p99),
            f(r.delivery_ms.max),
            f(r.send_lag_ms.p50, ".3f"),
            f(r.send_lag_ms.p99),
            f(r.loop_lag_ms.p50, ".3f"),
            f(r.loop_lag_ms.p99),
            f(r.client_cpu_s),
            f(r.tokens_per_s, ",.0f"),
            f(r.tokens_per_cpu_s, ",.0f"),
            f(r.tpot_error_pct),
            f(r.server.mean_ms, ".3f"),
        )
    make_console().print(t)
    doc = {
        "schema": "crossover.floor/1",
        "measurements": [r.model_dump(mode="json") for r in results],
    }
    if json_path is not None:
        write_output(json_path, orjson.dumps(doc, option=orjson.OPT_INDENT_2), "--json")
    if write_cache:
        where = save_results(results, cache)
        default = default_cache_path()
        read_by = "auto" if where.resolve() == default.resolve() else str(where)
        err.print(f"[dim]floor cached in {where} (crossover run --client-floor {read_by})[/]")


EXAMPLE = "\b\nExample:\n  crossover calibrate --concurrency 1,64\n"


def register(app: typer.Typer) -> None:
    app.command("calibrate", epilog=EXAMPLE)(calibrate)
