"""Options ``crossover run`` and ``crossover sweep`` both take: the same flag, help and
parsing, written once. Each defaults to None in both commands, so a sweep YAML's key is
kept unless the flag is given (``run`` supplies the default itself). Options only one
command takes stay in its own module."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossover.cli.common import help_of
from crossover.spec.workload import Workload

EndpointOpt = Annotated[
    str | None, typer.Option(help=help_of(Workload, "endpoint", show_default=True))
]
TurnsOpt = Annotated[
    int | None,
    typer.Option(
        help="Multi-turn sessions of this many turns: each turn's prompt carries the "
        "session's history (earlier prompts and stand-ins of their replies' lengths); "
        "--concurrency/--rate count sessions [default: 1]"
    ),
]
ThinkOpt = Annotated[
    float | None,
    typer.Option(help="Seconds between a turn's reply and the session's next turn [default: 0]"),
]
TraceOpt = Annotated[
    Path | None,
    typer.Option(
        help="Replay a Mooncake-style JSONL trace (timestamp ms, input_length, "
        "output_length, hash_ids): its arrivals, lengths and shared blocks"
    ),
]
SharedPrefixOpt = Annotated[
    str | None,
    typer.Option(
        help="PxL[:random]: P shared prefixes of L tokens before each prompt's own "
        "--input-tokens (prefix caches matter); round robin unless :random"
    ),
]
PromptsOpt = Annotated[
    Path | None,
    typer.Option(
        help="Prompts from a JSONL or ShareGPT file (fitted to --input-tokens unless "
        "--prompt-lengths dataset)"
    ),
]
PromptLengthsOpt = Annotated[
    str | None,
    typer.Option(
        help="With --prompts: fit (trim or pad each to --input-tokens) or dataset (each "
        "prompt as written: the dataset's own lengths, the same prompts to every engine) "
        "[default: fit]"
    ),
]
TokenizerOpt = Annotated[str | None, typer.Option(help=help_of(Workload, "tokenizer"))]
