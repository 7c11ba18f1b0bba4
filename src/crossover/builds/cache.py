"""Where crossover keeps what it downloads and builds, and how writers take turns.

The root is ``$CROSSOVER_CACHE`` if set, else ``~/.cache/crossover``. Several
processes (tests, engineers, ``make``) may ask for the same artifact at once, so
producers hold an exclusive ``flock`` on a sibling ``.lock`` file and publish with
an atomic rename; readers never see half-written files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from crossover.errors import UsageError

CACHE_ENV = "CROSSOVER_CACHE"


def cache_dir() -> Path:
    """The cache root (created if missing)."""
    raw = os.environ.get(CACHE_ENV)
    root = Path(raw).expanduser() if raw else Path.home() / ".cache" / "crossover"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create cache directory {root} ({CACHE_ENV}): {exc}") from exc
    return root


def cache_subdir(*parts: str) -> Path:
    """A directory under the cache root (created if missing)."""
    path = cache_dir().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
