"""Stages: seconds spent per stage of a request since start (`runguard_stage_seconds_total`).

`admission` is the time from a request's arrival at the guard to its ticket
(the run found, the state batch, the request's checks); `judging` the time
its end took (`Guard.complete`: accounting, response detectors, breakers,
the record built and the observers told). Both are the event loop thread's
CPU time in the stage's own steps (`own_cpu`): what runs between its waits,
the state client's work there included (a batch's commands written, its
replies parsed). While a stage waits (a Redis round trip, a run's pending
end), what the loop runs (other requests, replies read off the socket) is
not in it. The bench reads the stages per request beside the process's CPU.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class Stages:
    """Running totals, in seconds, added to by every passage."""

    __slots__ = ("admission", "judging")

    def __init__(self) -> None:
        self.admission = 0.0
        self.judging = 0.0

    def admitted(self, seconds: float) -> None:
        self.admission += seconds

    def judged(self, seconds: float) -> None:
        self.judging += seconds

    def seconds(self) -> dict[str, float]:
        """The totals by stage name."""
        return {"admission": self.admission, "judging": self.judging}


@types.coroutine
def own_cpu(work: Coroutine[Any, Any, T], spent: Callable[[float], None]) -> Generator[Any, Any, T]:
    """Await `work`, and hand `spent` the thread's CPU time of `work`'s own steps, however it ends.

    `work` is driven step by step in the awaiting task: each step (from a resume to its next wait)
    is timed, and what the loop runs while `work` waits is not. A `work` that never waits (the
    in-memory state) is one step: two clock readings, as around a plain await.
    """
    clock = time.thread_time
    total = 0.0
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            began = clock()
            try:
                waiting_on = work.send(value) if error is None else work.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            finally:
                total += clock() - began
            try:
                value, error = (yield waiting_on), None
            except GeneratorExit:
                work.close()
                raise
            except BaseException as exc:  # a cancellation: `work` handles it (or not) in its own step
                value, error = None, exc
    finally:
        spent(total)
