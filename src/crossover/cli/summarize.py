"""``crossover summarize``: run summaries recomputed from a database's per-request
records."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossover.cli.common import check_output_file, write_output
from crossover.errors import UsageError

SUMMARIZE_EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover summarize crossover-results/results.db\n"
    "  crossover summarize sweep1/sweep.db --json summaries.json\n"
    "  crossover summarize results/sweep1/sweep.db.xz\n"
)


def register(app: typer.Typer) -> None:
    app.command("summarize", epilog=SUMMARIZE_EXAMPLE)(summarize_cmd)


def summarize_cmd(
    db: Annotated[
        Path,
        typer.Argument(
            help="A crossover results database (sweep.db, or a results folder's "
            "sweep.db.xz, or the folder)"
        ),
    ],
    run_id: Annotated[str | None, typer.Option(help="One run (default: every run)")] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write summaries here")] = None,
) -> None:
    """Recompute run summaries from the raw per-request records."""
    import orjson

    from crossover.cli.common import console as make_console
    from crossover.cli.render import print_summary
    from crossover.measure import resummarize, run_title
    from crossover.records.database_file import require_database
    from crossover.records.readable import readable_database
    from crossover.records.store import Store

    kept = [db, db / "sweep.db", db / "sweep.db.xz"] if db.is_dir() else [db]
    check_output_file(json_path, "--json", keep=kept)
    console = make_console()
    out = []
    with readable_database(db) as readable:  # a committed sweep.db.xz: a copy, removed after
        require_database(readable)
        with Store(readable, read_only=True) as store:
            keys = {r.run_id: r.key for r in store.runs()}
            if run_id is not None and run_id not in keys:
                raise UsageError(f"{db}: no run {run_id!r}")
            ids = [run_id] if run_id else list(keys)
            for rid in ids:
                s = resummarize(store, rid)
                target, title = run_title(keys.get(rid), s)
                print_summary(console, s, f"{title}  (run {rid})")
                out.append({"run_id": rid, "target": target, "summary": s.to_json_dict()})
    if json_path is not None:
        write_output(json_path, orjson.dumps(out, option=orjson.OPT_INDENT_2), "--json")
