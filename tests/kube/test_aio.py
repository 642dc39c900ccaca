"""`wait_set`: an event or a timeout, and a cancellation is never lost (the loop of `shoal run`
ignored SIGTERM when it arrived as a watch event set the cache's `changed`)."""

from __future__ import annotations

import asyncio

import pytest

from shoal.kube.aio import wait_set


async def test_returns_when_set_or_at_the_timeout() -> None:
    ev = asyncio.Event()
    assert await wait_set(ev, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, ev.set)
    assert await wait_set(ev, 5.0) is True


async def test_a_cancellation_arriving_as_the_event_is_set_ends_the_loop() -> None:
    ev = asyncio.Event()
    rounds = 0

    async def loop() -> None:  # the shape of SchedulerService._loop
        nonlocal rounds
        while True:
            await wait_set(ev, 1.0)
            ev.clear()
            rounds += 1

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)
    ev.set()
    await asyncio.sleep(0)  # the inner wait completes in this iteration ...
    task.cancel()           # ... and the cancellation arrives in the same one
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 3.0)  # asyncio.wait_for(ev.wait(), ...) in the loop: TimeoutError here
    assert task.cancelled()
