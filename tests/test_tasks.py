"""``crossover.tasks.alongside``: a helper task lives exactly as long as its block."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from crossover.tasks import alongside, cancel_and_wait


async def _forever(started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()


def test_the_helper_is_cancelled_when_the_block_ends() -> None:
    async def go() -> asyncio.Task[None]:
        started = asyncio.Event()
        async with alongside(_forever(started)) as task:
            await started.wait()
            assert not task.done()
        return task

    task = asyncio.run(go())
    assert task.cancelled()


def test_the_helper_is_cancelled_when_the_block_fails() -> None:
    seen: list[asyncio.Task[None]] = []

    async def go() -> None:
        started = asyncio.Event()
        async with alongside(_forever(started)) as task:
            seen.append(task)
            await started.wait()
            raise RuntimeError("the level failed")

    with pytest.raises(RuntimeError, match="the level failed"):
        asyncio.run(go())
    assert seen[0].cancelled()


def test_a_helper_that_failed_raises_at_the_exit() -> None:
    async def broken() -> None:
        raise ValueError("scrape failed")

    async def go() -> None:
        async with alongside(broken()):
            await asyncio.sleep(0.01)

    with pytest.raises(ValueError, match="scrape failed"):
        asyncio.run(go())


def test_a_helper_that_finished_keeps_its_result() -> None:
    async def quick() -> int:
        return 7

    async def go() -> asyncio.Task[int]:
        async with alongside(quick()) as task:
            await asyncio.sleep(0.01)
        return task

    assert asyncio.run(go()).result() == 7


async def _loses_one_cancel(
    started: asyncio.Event, lost: list[int], losing: asyncio.Event | None = None
) -> None:
    """A scraper whose first cancellation came back as a ``TimeoutError`` (aiohttp's
    request timer: ``crossover.tasks``) and was taken for one failed scrape."""
    started.set()
    while True:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            if lost:
                raise
            lost.append(1)  # taken for a timed-out scrape: the loop goes on
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            if losing is not None:
                losing.set()


def test_a_helper_that_loses_its_cancellation_is_cancelled_again() -> None:
    # 2026-12-05 on an H200: a level's scraper lost its cancellation and the block's exit
    # waited on it for 4 minutes with vLLM up, sampling an idle GPU, until SIGTERM
    lost: list[int] = []

    async def go() -> tuple[asyncio.Task[None], float]:
        started = asyncio.Event()
        async with alongside(_loses_one_cancel(started, lost)) as task:
            await started.wait()
            t0 = time.perf_counter()
        return task, time.perf_counter() - t0

    async def bounded() -> tuple[asyncio.Task[None], float]:
        return await asyncio.wait_for(go(), timeout=5)

    task, took = asyncio.run(bounded())
    assert lost == [1]
    assert task.cancelled()
    assert took < 2.0  # not the 5 s the bound cancels at


def test_a_helper_that_never_ends_is_left_after_a_while() -> None:
    done = asyncio.Event()

    async def stubborn(started: asyncio.Event) -> None:
        started.set()
        while not done.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.05)

    async def go() -> bool:
        started = asyncio.Event()
        task = asyncio.ensure_future(stubborn(started))
        await started.wait()
        ended = await cancel_and_wait(task, every_s=0.05, give_up_s=0.3)
        done.set()  # this test's own way to end it
        await task
        return ended

    assert asyncio.run(asyncio.wait_for(go(), timeout=5)) is False


def test_the_callers_cancellation_is_not_swallowed_at_the_exit() -> None:
    # the caller cancelled (SIGTERM) while the exit waits on a helper: the cancellation
    # goes on up; it used to be taken for the helper's own and the level carried on
    lost: list[int] = []

    async def go() -> None:
        losing = asyncio.Event()

        async def level() -> None:
            started = asyncio.Event()
            async with alongside(_loses_one_cancel(started, lost, losing)):
                await started.wait()

        task = asyncio.ensure_future(level())
        await losing.wait()
        task.cancel()  # while the exit waits for the helper to end
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(asyncio.wait_for(go(), timeout=5))
