"""Which run a conversation without `X-Run-Id` belongs to, by its API key and root.

Without the header, a conversation is known by its API key and its root (the
first user message). One state entry per key and root names the run that
conversation belongs to now:

- a run of its own. The root's first request creates it with `claim`, so
  concurrent first requests agree on one id on any replica. A root that starts
  over (no assistant turn yet) after its run has been idle for
  `runs.inferred_idle_seconds`, with nothing in flight, gets a new run: a
  scheduled agent's next invocation is a run of its own, not more steps of the
  last one (`Guard`). The entry is rewritten while its run goes on, so it
  outlives the run's state (`OWNER_TTL_RUNS` times the run's idle time).
- or a run waiting on a tool call that handed this exact text to another agent
  (`nested`: see `nesting`).

A request that names its end user (`RequestInfo.end_user`) looks its root up
under that user (`scope`): a chatbot whose users' chats open with the same
message is a run per user, while one user's agent started again and again
stays one run until it pauses.

A request that names its session (`RequestInfo.session`: codex's
`session-id`, Claude Code's session id) is rooted by that session, before its
first user message: its roots live in the session's scope, and the session
itself is the root of every conversation in it but a sub-agent's thread
(`root_of`). A session's requests are one run; a new session is a new run,
whatever its first message and whatever became of the session before it; and a
session's run does not start over after a pause (a new invocation comes with a
new session).

A run's id carries the time it began, so a root that comes back after its run
was forgotten starts a run with a new id instead of adding to the old run's
records.
"""

from __future__ import annotations

from runguard.proxy.core.events import digest
from runguard.proxy.core.frozen import frozen

OWNER_TTL_RUNS = 2.0  # an own run's entry lives this many times the run's idle time after it is written


@frozen
class Owner:
    """The run a conversation root belongs to."""

    run_id: str
    nested: bool = False  # a thread started by a tool call of `run_id` (see `nesting`)
    since: float = 0.0  # when the entry was written (epoch seconds)

    def due(self, now: float, idle_seconds: float) -> bool:
        """A run's entry is written again once it is half a run's idle time old."""
        return not self.nested and now - self.since > idle_seconds / 2


SESSION_ROOT = "session"  # the root of a session's conversations (`root_of`)


def scope(key_hash: str, end_user: str | None, session: str | None = None) -> str:
    """Where a request's roots live: its API key's (its tenant's), or the end user's under that key if it
    names one, or its session's there if it names one (`RequestInfo.session`)."""
    base = key_hash if end_user is None else f"{key_hash}~{end_user}"
    return base if session is None else f"{base}~s{session}"


def root_of(root_hash: str | None, session: str | None) -> str | None:
    """The root a conversation's run is found by in its `scope`: its session, if it names one, else its
    first user message (`root_hash`)."""
    return SESSION_ROOT if session is not None else root_hash


def key(scope: str, root_hash: str | None) -> str:
    """The state entry of a root in a `scope`."""
    return f"root:{scope}:{root_hash or 'no-root'}"


def new_run(scope: str, root_hash: str | None, now: float) -> Owner:
    """A run of its own for a root, begun at `now`."""
    return Owner(_run_id(scope, root_hash, repr(now)), since=now)


def fallback_run(scope: str, root_hash: str | None) -> str:
    """A root's run id when its entry cannot be read (the state does not answer): the same on every
    replica, as good as any while the state is down."""
    return _run_id(scope, root_hash)


def _run_id(scope: str, root_hash: str | None, *more: str) -> str:
    return "r-" + digest("\x00".join((scope, root_hash or "no-root", *more)), 10)


def dumps(owner: Owner) -> str:
    return f"{'n' if owner.nested else 'r'}{owner.since!r}\x00{owner.run_id}"


def loads(value: str) -> Owner | None:
    """The entry `dumps` wrote, or None for anything else."""
    head, sep, run_id = value.partition("\x00")
    if not sep or not run_id or head[:1] not in ("n", "r"):
        return None
    try:
        since = float(head[1:])
    except ValueError:
        return None
    return Owner(run_id, nested=head[0] == "n", since=since)
