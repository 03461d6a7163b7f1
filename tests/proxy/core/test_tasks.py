from __future__ import annotations

import asyncio

from runguard.proxy.core.tasks import hold


async def test_a_held_task_stays_in_its_set_until_it_is_done() -> None:
    tasks: set[asyncio.Task[int]] = set()
    release = asyncio.Event()

    async def work() -> int:
        await release.wait()
        return 7

    task = hold(tasks, work())
    assert tasks == {task}
    release.set()
    assert await task == 7
    await asyncio.sleep(0)  # done callbacks run on the next loop turn
    assert tasks == set()
