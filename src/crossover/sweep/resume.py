"""A sweep resumed in its folder: which stored levels ``--redo`` measures again (checked
against the config before any work), and what a sweep refused once running leaves
behind: nothing it created without a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crossover.errors import UsageError, unknown_choice

if TYPE_CHECKING:
    from pathlib import Path

    from crossover.sweep.config import SweepConfig


def parse_redo(specs: list[str] | None, cfg: SweepConfig) -> dict[str, set[float] | None]:
    """``--redo NAME[@L1,L2]`` (repeatable) as {target: levels or None for all}; an
    unknown target or a level the target does not sweep is one line, before any work."""
    out: dict[str, set[float] | None] = {}
    names = [t.name for t in cfg.targets]
    for spec in specs or []:
        name, _, rest = spec.partition("@")
        if name not in names:
            raise UsageError("--redo: " + unknown_choice("target", name, names))
        if not rest:
            out[name] = None
            continue
        mine = {float(lv.value) for lv in cfg.levels_of(cfg.target_named(name))}
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


def forget_empty_sweep(out: Path, *, fresh: bool, had_db: bool) -> None:
    """Remove the sweep.db (and sweep.json) this command created when no run reached it,
    and the folder itself when this command created it and nothing else is in it.

    Done holding the folder's lock, and not at all where another process holds it: the
    sweep.db without a run may be another sweep's, just begun."""
    import contextlib
    import shutil

    from crossover.records.folder_lock import FolderLock
    from crossover.records.store import Store

    db = out / "sweep.db"
    if had_db or not db.exists():
        return
    try:
        lock = FolderLock.take(out, "sweep")
    except UsageError:  # busy, or no longer writable: leave it as it is
        return
    try:
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
    finally:
        # the lock file goes too from a folder this command made (removed while held)
        lock.release(remove=fresh)
    if fresh:
        with contextlib.suppress(OSError):
            out.rmdir()  # only when empty


def resume_refusal(
    cfg: SweepConfig, out: Path, only: set[str] | None, redo: dict[str, set[float] | None]
) -> str | None:
    """Why ``crossover sweep`` would refuse to resume in ``out`` under ``cfg`` (another
    workload or axis, or a target's changed settings not under ``--redo NAME``), as its
    run says it; ``None`` where it would resume (or start) there. Read only: ``sweep
    --check --out DIR`` says it before anything is measured. An engine's version is
    known only once it has started: not checked here."""
    from crossover.records.store import Store
    from crossover.sweep.config import settings_refusal
    from crossover.sweep.driver import held_axes, held_settings

    db = out / "sweep.db"
    if not db.is_file() or db.stat().st_size == 0:
        return None
    with Store(db, read_only=True) as store:
        differ = cfg.identity_differs(store.get_meta("identity"), held_axes(store))
        if differ:
            return (
                f"{out} holds a sweep with a different workload ({', '.join(differ)}); "
                "use another --out or the same settings to resume"
            )
        held = held_settings(store)
    whole = {n for n, levels in redo.items() if levels is None}
    picked = {n for n in held if only is None or n in only}
    refused = {n: d for n, d in cfg.settings_differ(held, picked).items() if n not in whole}
    return settings_refusal(out, refused, "sweep") if refused else None
