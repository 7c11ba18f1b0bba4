"""``crossover.tasks.alongside``: a helper task lives exactly as long as its block."""

from __future__ import annotations

import asyncio

import pytest

from crossover.tasks import alongside


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
