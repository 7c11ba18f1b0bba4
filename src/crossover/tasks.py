"""A helper task that lives as long as a block: started on entry, cancelled and awaited on
exit, whichever way the block ends (a sweep level's Prometheus scraper, a capacity level's
overload watcher, each beside the level's measured load).

One ``cancel()`` is not always enough: a helper may lose it. aiohttp's request timer
(``ClientTimeout``) is entered twice while a response's headers are awaited (the request's
``with timer`` and the response's own); when the timer fires in the same loop pass as a
cancellation (uvloop runs due timers before the cancelled task's step, and a loop blocked
past the timeout makes both due at once), both exits call ``uncancel()`` and the outer
one turns the cancellation into a ``TimeoutError``, which a scraper catches as one failed
scrape and goes on. On an H200 (2026-12-05) a sweep level's scraper did so after the level
ended, and the sweep waited on it for 4 minutes with vLLM up, until SIGTERM. So a helper
is cancelled again while it runs on, and left after ``GIVE_UP_S``: the block never waits
on it for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: a cancelled helper still running after this long has lost its cancellation: cancel again
RECANCEL_S = 0.5
#: a helper still running after this long is left running, and the caller goes on
GIVE_UP_S = 10.0


async def cancel_and_wait(
    task: asyncio.Future[Any], *, every_s: float = RECANCEL_S, give_up_s: float = GIVE_UP_S
) -> bool:
    """Cancel ``task`` and wait until it has ended, cancelling it again every ``every_s``
    while it runs on (a cancellation it lost); after ``give_up_s`` it is left. True once it
    has ended. The caller's own cancellation is never swallowed: it propagates (the task
    cancelled once more first)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + give_up_s
    try:
        while not task.done():
            left = deadline - loop.time()
            if left <= 0:
                return False
            task.cancel()
            await asyncio.wait({task}, timeout=min(every_s, left))
    except asyncio.CancelledError:
        task.cancel()
        raise
    return True


@contextlib.asynccontextmanager
async def alongside(helper: Coroutine[Any, Any, T]) -> AsyncIterator[asyncio.Task[T]]:
    """Run ``helper`` as a task for the length of the ``async with`` block. A helper that
    failed before the block ended raises its error at the exit; one that finished on its
    own is left as it ended. At the exit the helper is cancelled until it ends
    (``cancel_and_wait``), never waited on for ever."""
    task = asyncio.ensure_future(helper)
    try:
        yield task
    finally:
        await cancel_and_wait(task)
        if task.done() and not task.cancelled():
            task.result()  # a helper that failed raises its error here
