"""Background tasks kept alive until they finish.

The event loop holds only weak references to tasks: one nobody refers to can
be collected mid-way. Each owner keeps its own set (so it can wait for or
cancel them at shutdown), and `hold` starts a task in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def hold(tasks: set[asyncio.Task[T]], work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start `work` as a task that stays in `tasks` until it is done."""
    task = asyncio.ensure_future(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task
