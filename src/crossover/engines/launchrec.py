"""The launch record an engine's log starts with, and the facts it gives.

``crossover.engines.lifecycle`` writes the argv and environment changes an engine was
started with as the log's first line (``# crossover-launch: {...}``). Where the engine's
own lines are silent, the facts read from it (``effective.launch_facts``, through the
engine's flag table) are *verified* only where the engine is known to obey a switch
without logging it (llama.cpp reads ``GGML_CUDA_DISABLE_GRAPHS`` silently), otherwise
what was requested.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from crossover.engines import logpatterns as lp

HEADER_PREFIX = "# crossover-launch: "
Basis = Literal["log", "log-absence", "launch-env", "launch-argv", "model-file"]


class LaunchRecord(BaseModel):
    """What the lifecycle started; written as the first line of the engine log."""

    engine: str
    argv: list[str]
    env: dict[str, str | None]  # changes only: a value set, or None for removed
    port: int
    started_at: str


def header_line(record: LaunchRecord) -> str:
    return HEADER_PREFIX + record.model_dump_json() + "\n"


def read_header(text: str) -> LaunchRecord | None:
    for line in text.splitlines()[:3]:
        if line.startswith(HEADER_PREFIX):
            try:
                return LaunchRecord.model_validate_json(line[len(HEADER_PREFIX) :])
            except ValidationError:
                return None
    return None


def keep_earlier_log(path: Path) -> Path | None:
    """Move an earlier engine's log out of the way of a new one at ``path``.

    A resumed sweep starts its engines again under the same log names; the earlier log is
    the evidence for the runs already stored, so it is kept beside the new one under the
    time its engine started (``NAME.log`` -> ``NAME.20261201T223412.log``, read from its
    launch header; the file's mtime when it has none). Returns the new name, ``None`` when
    there was nothing to keep.
    """
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with path.open("rb") as fh:
        head = fh.read(8192).decode("utf-8", "replace")
    record = read_header(head)
    stamp = re.sub(r"[^0-9T]", "", record.started_at)[:15] if record else ""
    if not stamp:
        stamp = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y%m%dT%H%M%S")
    base = path.name[: -len(".log")] if path.name.endswith(".log") else path.name
    target = path.with_name(f"{base}.{stamp}.log")
    for n in itertools.count(2):
        if not target.exists():
            break
        target = path.with_name(f"{base}.{stamp}-{n}.log")
    path.rename(target)
    return target


def engine_logs(folder: Path, name: str, *, replicas: bool = False) -> list[Path]:
    """Target ``name``'s engine logs in ``folder``, as the sweep names them: ``NAME.log``
    (``-rK`` for replica K, with ``replicas``), ``.restartN`` for a start again between
    repeats, and an earlier start's kept beside it under its start time
    (:func:`keep_earlier_log`: ``NAME.restart1.20261201T223412.log``); gzipped too."""
    if not folder.is_dir():
        return []
    replica = r"(?:-r\d+)?" if replicas else ""
    pattern = re.compile(
        rf"^{re.escape(name)}{replica}(?:\.restart\d+)?(?:\.\d{{8}}T\d{{6}}(?:-\d+)?)?"
        r"\.log(?:\.gz)?$"
    )
    return sorted(p for p in folder.iterdir() if p.is_file() and pattern.match(p.name))


class Fact(BaseModel):
    setting: str
    value: lp.Value | None
    basis: Basis
    verified: bool
    evidence: str | None = None
    line: int | None = None
    origin: str | None = None
    note: str | None = None
