"""Stages: seconds spent per stage of a request since start (`runguard_stage_seconds_total`).

`admission` is the time from a request's arrival at the guard to its ticket
(the run found, the state batch, the request's checks); `judging` the time
its end took (`Guard.complete`: accounting, response detectors, breakers,
the record built and the observers told). Both are the event loop thread's
CPU time while the stage ran: with the in-memory state a stage never waits,
so that is its own CPU; with Redis, what the loop did for other requests
during the stage's round trips counts too. The bench reads them per request
beside the process's CPU.
"""

from __future__ import annotations


class Stages:
    """Running totals, in seconds, added to by every passage."""

    __slots__ = ("admission", "judging")

    def __init__(self) -> None:
        self.admission = 0.0
        self.judging = 0.0

    def seconds(self) -> dict[str, float]:
        """The totals by stage name."""
        return {"admission": self.admission, "judging": self.judging}
