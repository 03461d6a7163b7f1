"""Tally: per-name counters with a cap on how many names a run may have.

Counting per tool or per agent pair needs one state field per name, and the
names come from the traffic, so their number must be capped. A roster (a
window of name tags, first come first kept) is read in the request phase; in
the response phase only names already on it, or new ones while it has room,
get a field. Two concurrent requests may both see the last free place, so a
run can exceed the cap by its number of requests in flight, never more.
"""

from __future__ import annotations

from collections.abc import Iterable

from runguard.proxy.core.ops import Get, Op, OpResult, Push, Scope


def fetch(roster: str) -> Get:
    """The request-phase read of the roster field."""
    return Get(Scope.RUN, roster)


def admit(stored: OpResult, tags: Iterable[str], cap: int) -> tuple[list[str], list[str]]:
    """(every tag that may be counted, the new ones among them) given the roster read earlier."""
    known = set(stored) if isinstance(stored, tuple) else set()
    room = cap - len(known)
    admitted: list[str] = []
    new: list[str] = []
    for name in dict.fromkeys(tags):
        if name in known:
            admitted.append(name)
        elif room > 0:
            admitted.append(name)
            new.append(name)
            room -= 1
    return admitted, new


def enrol(roster: str, new: list[str], cap: int) -> list[Op]:
    """The response-phase write that adds new tags to the roster (nothing when there are none)."""
    return [Push(Scope.RUN, roster, tuple(new), keep=cap, unique=True, head=True)] if new else []
