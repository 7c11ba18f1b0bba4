"""Files written whole or not at all: a sweep file, the client-floor cache, a command's
``--json`` output."""

from __future__ import annotations

import contextlib
from pathlib import Path


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``path`` whole or not at all: the bytes (a text as UTF-8) go to a file beside
    it (``NAME.tmp``), renamed over it once written; its folder is made where missing. An
    error or an interrupt on the way (Ctrl-C, a task cancelled) leaves the old file as it
    was and no ``.tmp`` behind, and is raised as it came."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.write_bytes(raw)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
