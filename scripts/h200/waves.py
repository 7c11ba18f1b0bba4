"""TTFT of a closed-loop level split by wave, from a sweep's raw records.

A closed-loop level at concurrency c sends its first c requests at once (wave 1) and each
later one when an earlier one finishes (wave 2): how bunched wave 2 arrives depends on how
evenly the engine finished wave 1. An engine that prefills one prompt after another
finishes wave 1 spread out, so its wave 2 finds an idle server; one that prefills a batch
together finishes together, and its wave 2 queues again. The level's TTFT p50 pools both
waves, so two engines can swap places on it without either prefilling faster. This prints,
per target and level, the TTFT p50 of each wave and how spread out wave 2's sends were.

    python scripts/h200/waves.py SWEEP_DIR_OR_DB [TARGET,TARGET,...] [LEVEL,LEVEL,...]

SWEEP_DIR_OR_DB: a sweep folder (its sweep.db, or sweep.db.xz unpacked to a temporary
file) or a sweep.db. Only valid runs are read.
"""

from __future__ import annotations

import lzma
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crossover.errors import UsageError
from crossover.metrics.run import ttft_by_wave
from crossover.pipes import run_tool
from crossover.records.database_file import require_database
from crossover.records.store import Store
from crossover.sweep.driver import parse_run_key


@contextmanager
def sweep_database(arg: str | Path, prefix: str = "waves-") -> Iterator[Path]:
    """The sweep database at ``arg``: a sweep.db, or a folder's (its sweep.db, else its
    sweep.db.xz unpacked to a temporary folder, removed after); a path that holds none is
    one line (``UsageError``), never a database made there."""
    path = Path(arg)
    if path.is_dir():
        if (path / "sweep.db").is_file():
            path = path / "sweep.db"
        elif (path / "sweep.db.xz").is_file():
            path = path / "sweep.db.xz"
        else:
            raise UsageError(f"{arg}: no sweep.db or sweep.db.xz in this folder")
    if path.suffix != ".xz":
        require_database(path)  # read only: a path of no database is one line, not made one
        yield path
        return
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        out = tmp / "sweep.db"
        try:
            with lzma.open(path) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        except (lzma.LZMAError, EOFError) as exc:
            raise UsageError(f"{path}: not an xz-compressed database ({exc})") from None
        require_database(out)
        yield out
    finally:
        shutil.rmtree(tmp)


def arguments(args: list[str]) -> tuple[list[str] | None, list[int] | None]:
    """The targets (``TARGET,TARGET``) and levels (``LEVEL,LEVEL``) after the path."""
    only = args[1].split(",") if len(args) > 1 and args[1] else None
    try:
        lv = [int(x) for x in args[2].split(",")] if len(args) > 2 else None
    except ValueError:
        raise UsageError(f"{args[2]}: levels are whole numbers, e.g. 1,16,64") from None
    return only, lv


def valid_runs(
    store: Store, targets: list[str] | None, levels: list[int] | None
) -> list[tuple[str, int, int, Any]]:
    """(target, c, repeat, run) of the finished valid runs asked for, in the order the
    targets were named (by name otherwise), then level and repeat."""
    rows = []
    for run in store.runs():
        if run.status != "done" or not run.summary or not run.key:
            continue
        if run.summary.get("verdict") != "valid":
            continue
        name, level, rep = parse_run_key(run.key)
        c = int(level.value)
        if (targets and name not in targets) or (levels and c not in levels):
            continue
        rows.append((targets.index(name) if targets else 0, name, c, rep, run))
    return [(name, c, rep, run) for _, name, c, rep, run in sorted(rows, key=lambda r: r[:4])]


def main(db: Path, targets: list[str] | None, levels: list[int] | None) -> None:
    print("| target | c | repeat | wave 1 TTFT p50 ms | wave 2 TTFT p50 ms | wave 2 sent over s |")
    print("|---|---:|---:|---:|---:|---:|")
    with Store(db, read_only=True) as store:  # it only reads: nothing written there
        for name, c, rep, run in valid_runs(store, targets, levels):
            run_id = run.run_id
            recs = sorted(store.records(run_id, include_warmup=False), key=lambda r: r.t_send_ns)
            w = ttft_by_wave(recs, c)  # what the run summaries carry as `waves`
            if w is None or w.first_ttft_ms.p50 is None or w.later_ttft_ms.p50 is None:
                continue
            cells = [name, str(c), str(rep), f"{w.first_ttft_ms.p50:,.0f}"]
            print(
                "| "
                + " | ".join(cells)
                + f" | {w.later_ttft_ms.p50:,.0f} | {w.later_sent_over_s:.2f} |"
            )


def cli(args: list[str]) -> int:
    """``python scripts/h200/waves.py ARGS``: 0, or 1 with one line on stderr."""
    if not args:
        print(__doc__, file=sys.stderr)
        return 1
    try:
        only, lv = arguments(args)
        with sweep_database(args[0]) as db:
            main(db, only, lv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # piped into `head`: a quiet stop (141), as the crossover CLI's, not a traceback
    run_tool(lambda: cli(sys.argv[1:]))
