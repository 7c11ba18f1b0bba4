"""A helper task that lives as long as a block: started on entry, cancelled and awaited on
exit, whichever way the block ends (a sweep level's Prometheus scraper, a capacity level's
overload watcher, each beside the level's measured load)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


@contextlib.asynccontextmanager
async def alongside(helper: Coroutine[Any, Any, T]) -> AsyncIterator[asyncio.Task[T]]:
    """Run ``helper`` as a task for the length of the ``async with`` block. A helper that
    failed before the block ended raises its error at the exit; one that finished on its
    own is left as it ended."""
    task = asyncio.ensure_future(helper)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
