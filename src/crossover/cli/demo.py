"""``crossover demo``: set up (or find) llama-server and Gemma 3 270M, then sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

EXAMPLE = "\b\nExample:\n  crossover demo --quick\n"


def register(app: typer.Typer) -> None:
    app.command("demo", epilog=EXAMPLE)(demo)


def demo(
    out: Annotated[Path, typer.Option(help="Results folder (a rerun resumes it)")] = Path(
        "crossover-results/demo"
    ),
    quick: Annotated[
        bool, typer.Option(help="One repeat instead of four (about 2 minutes)")
    ] = False,
    fresh: Annotated[bool, typer.Option(help="Discard earlier results in OUT first")] = False,
) -> None:
    """Real llama.cpp, real Gemma 3 270M: 1 slot vs 8 with small micro-batches, swept."""
    import shutil

    from crossover.builds.llamacpp import ensure_llama_server
    from crossover.cli.common import console as make_console
    from crossover.cli.common import run_async
    from crossover.cli.sweep_display import print_outcome, run_live
    from crossover.models.gemma import ensure_gemma3_270m
    from crossover.records.database_file import check_writable
    from crossover.records.folder_lock import FolderLock
    from crossover.sweep.demo import demo_config, explain

    console = make_console(stderr=True)
    if fresh and out.exists():
        # never under another process writing it: refused with one line, the folder kept
        held = FolderLock.take(out, "demo")
        try:
            shutil.rmtree(out)
        finally:
            held.release()
    check_writable(out)
    console.print(
        "[bold]crossover demo[/]: llama-server (built from the pinned llama.cpp source) "
        "serving Gemma 3 270M Q4_K_M, 1 slot vs 8 slots with 2-token micro-batches"
    )
    server = ensure_llama_server(progress=True)
    model = ensure_gemma3_270m(progress=True)
    cfg = demo_config(model, server, quick=quick)
    outcome = run_async(run_live(cfg, out, console, command="demo"))
    why = explain(outcome.findings)
    print_outcome(outcome, out, console, report=True, notes=[why] if why else [])
