"""asyncio helpers the service loops share."""

from __future__ import annotations

import asyncio
import contextlib


async def wait_set(event: asyncio.Event, timeout: float) -> bool:
    """Wait until `event` is set or `timeout` seconds pass; True if it is set.

    Not `asyncio.wait_for(event.wait(), timeout)`: on Python 3.11, when a cancellation arrives
    in the same loop iteration as the event is set, wait_for returns the result and drops the
    cancellation, so a loop around it never ends (`shoal run` ignored SIGTERM that way while
    watch events kept setting the cache's `changed` event). `asyncio.timeout` keeps it.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()
