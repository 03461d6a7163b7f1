"""Deadlines: one timeout for many tasks, kept by one timer for them all.

`asyncio.timeout` arms and cancels a timer of the event loop for every
request (7.5 us a request under uvloop, where the request's own work beyond
the parse is a few hundred). Every wait an `Upstream` bounds by its
`first_byte_timeout` has the same length, so the waits end in the order they
began: `Deadlines` keeps the tasks waiting in that order, and one timer,
armed while any task waits, walks them from the oldest and cancels those
past due. A task it cancels raises `TimeoutError` where it waited, as under
`asyncio.timeout`; a cancellation from elsewhere (the client left) passes
through as one.

A deadline is kept late by at most a tenth of the timeout (and a second):
600 s at most 601 s.
"""

from __future__ import annotations

import asyncio
from typing import Any

TICK_SHARE = 0.1  # the timer's period, as a share of the timeout
MAX_TICK = 1.0  # seconds: the timer's period, at most


class Deadlines:
    """Waits of `seconds` each (see the module docstring):

    task = deadlines.start()
    try:
        await ...
    except asyncio.CancelledError:
        if deadlines.stop(task, cancelled=True):
            ...  # the deadline passed: a timeout
        raise
    deadlines.stop(task, cancelled=False)
    """

    __slots__ = ("_due", "_expired", "_loop", "_seconds", "_tick", "_timer")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._tick = min(MAX_TICK, seconds * TICK_SHARE)
        self._due: dict[asyncio.Task[Any], tuple[float, int]] = {}  # oldest first: (deadline, cancelling)
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the timer's

    @property
    def waiting(self) -> int:
        """How many tasks wait under a deadline now."""
        return len(self._due)

    def start(self) -> asyncio.Task[Any]:
        """The current task begins a wait; it must `stop` it however the wait ends."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline bounds a task's wait: no task is running")
        loop = task.get_loop()
        self._due[task] = (loop.time() + self._seconds, task.cancelling())
        if self._timer is None or self._loop is not loop:  # (a timer of a loop that ended never fires)
            self._arm(loop)
        return task

    def stop(self, task: asyncio.Task[Any], *, cancelled: bool) -> bool:
        """The task's wait is over (`cancelled`: by a CancelledError); True if its deadline cancelled it,
        which is then a timeout."""
        _, cancelling = self._due.pop(task, (0.0, 0))
        if task not in self._expired:
            return False
        self._expired.discard(task)
        # As `asyncio.timeout`: the deadline's cancellation taken back, and a timeout only if nothing else
        # asked to cancel the task meanwhile.
        return task.uncancel() <= cancelling and cancelled

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._timer = loop.call_later(self._tick, self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now, due = loop.time(), self._due
        while due:
            task = next(iter(due))
            if due[task][0] > now:
                break  # the rest began later: not due either
            del due[task]
            self._expired.add(task)
            task.cancel()
        if due:
            self._arm(loop)
