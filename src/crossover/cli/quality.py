"""``crossover quality``: candidates' tokens against a reference's, same prompts, same
harness (``crossover.quality``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossover.words import plural

EXAMPLE = """Example (two llama-servers, the shipped Q4_K_M and a Q8_0 made from it):

  crossover quality --reference q4km=http://127.0.0.1:8080,engine=llamacpp \\
      --candidate q8_0=http://127.0.0.1:8081,engine=llamacpp --json quality.json
"""


#: what the table's last column means, under the table (and in the report)
DIVERGENCE = (
    "1st divergence: over the prompts where the candidate's greedy token ever differed "
    "from the reference's, the median output position (0: the first generated token) "
    "where it first did; - when no prompt diverged"
)


def quality(
    reference: Annotated[
        str, typer.Option(help="NAME=URL[,engine=E,model=M]: whose greedy tokens are the truth")
    ],
    candidate: Annotated[
        list[str], typer.Option(help="NAME=URL[,engine=E,model=M]; repeat for several")
    ],
    prompts: Annotated[
        Path | None,
        typer.Option(help="One prompt per line (or a JSON string per line); default: built-in 60"),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Use only the first N prompts")] = None,
    max_tokens: Annotated[int, typer.Option(help="Greedy tokens per prompt")] = 256,
    top_logprobs: Annotated[int, typer.Option(help="Top-K log-probs asked for (KL)")] = 5,
    concurrency: Annotated[int, typer.Option(help="Requests in flight per server")] = 4,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write crossover.quality/1 here")
    ] = None,
) -> None:
    """Score candidate engines against a reference: top-1 agreement, KL, first divergence."""
    import asyncio

    import orjson
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    from crossover.cli.common import check_output_file, write_output
    from crossover.cli.common import console as make_console
    from crossover.errors import EngineError, UsageError
    from crossover.quality.api import ApiError, parse_endpoint
    from crossover.quality.measure import measure_quality
    from crossover.quality.prompts import load_prompts

    ref = parse_endpoint(reference, "--reference")
    cands = [parse_endpoint(c, "--candidate") for c in candidate]
    names = [ref.name, *(c.name for c in cands)]
    if len(set(names)) != len(names):
        raise UsageError("--reference/--candidate: every name must be different")
    if max_tokens < 1 or not 1 <= top_logprobs <= 20 or concurrency < 1:
        raise UsageError("--max-tokens >= 1, --top-logprobs 1..20, --concurrency >= 1")
    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    if json_path is not None and not json_path.parent.is_dir():
        raise UsageError(f"--json {json_path}: no such folder {json_path.parent}")
    check_output_file(json_path, "--json", keep=[prompts])
    texts = load_prompts(prompts, limit)
    err = make_console(stderr=True)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=err,
        transient=True,
    ) as bar:  # fmt: skip
        tasks = {n: bar.add_task(n, total=len(texts)) for n in names}

        def advance(name: str, n: int) -> None:
            bar.advance(tasks[name], n)

        try:
            result = asyncio.run(
                measure_quality(
                    ref, cands, texts, max_tokens, top_logprobs, concurrency, progress=advance
                )
            )
        except ApiError as exc:
            raise EngineError(f"reference {ref.name}: {exc}") from None
    table = Table(
        title=f"quality against {ref.name} ({result.reference_tokens:,} tokens)",
        caption=DIVERGENCE,
    )
    for col in ("candidate", "scored", "top-1 agreement", "mean KL (nats)", "1st divergence"):
        table.add_column(col, justify="left" if col == "candidate" else "right")
    for c in result.candidates:
        ia, ik = c.interval.get("top1_agreement"), c.interval.get("mean_kl")
        agree = "-" if c.top1_agreement is None else f"{c.top1_agreement:.2%}"
        if ia:
            agree += f" ({ia[0]:.2%}-{ia[1]:.2%})"
        kl = "-" if c.mean_kl is None else f"{c.mean_kl:.4f}"
        if ik:
            kl += f" ({ik[0]:.4f}-{ik[1]:.4f})"
        first = "-" if c.first_divergence_p50 is None else f"{c.first_divergence_p50:g}"
        table.add_row(c.name, f"{c.scored_tokens:,}", agree, kl, first)
    make_console().print(table)
    for c in result.candidates:
        for e in c.errors[:3]:
            err.print(f"{c.name}: {e}", markup=False, highlight=False)
    if json_path is not None:
        write_output(
            json_path, orjson.dumps(result.to_json_dict(), option=orjson.OPT_INDENT_2), "--json"
        )
        err.print(f"quality: {json_path}", markup=False, highlight=False)
    failed = [c for c in result.candidates if c.errors]
    if failed:  # scored what answered, said so, and fail the command
        c = failed[0]
        failed_n = plural(len(c.errors), "prompt")
        raise EngineError(f"candidate {c.name}: {failed_n} failed; {c.errors[0]}")


def register(app: typer.Typer) -> None:
    app.command("quality", epilog=EXAMPLE)(quality)
