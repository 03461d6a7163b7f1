"""Responses API background mode: a response's cost counted when its poll finds it finished.

`POST /v1/responses` with `background: true` is answered at once with a
queued Response object (no output, no usage); the client then polls
`GET /v1/responses/{id}` (or resumes its stream with `?stream=true`) until
the response is done. The POST's entry in the state (`continuation.entry`,
in its tenant's) says which request started it; a poll looks it up in the
poll's own tenant, so another tenant's poll counts nothing in this run. The first answer of a poll
that is final, for a response so remembered, adds its usage and cost to that
request's run, key, key and model, and key's day (`accounting.usage_ops`),
once: a claim in the state (`StateBackend.claim`) lets one poll of all those
on all replicas do it. The entry is then rewritten with the response's tool
calls (and no longer pending), so a `previous_response_id` follow-up finds
their names. The poll is recorded as a request record of the run with the
index of the request it finishes, marked `polled`: its tokens and cost count
in the run's totals, not as a request.

Nothing here delays the client: it runs once the poll's answer is sent.
A poll of a response the proxy did not see start, or one not finished, is
forwarded and counted nowhere. Failures of the state are counted, never raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.guard import accounting
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.observer import Observer
from runguard.proxy.guard.records import reporting
from runguard.proxy.guard.ticket import scope_ids
from runguard.proxy.runs import continuation, nesting, roots, tenants
from runguard.proxy.state import StateBackend
from runguard.proxy.store.records import RecordSink

log = logging.getLogger("runguard.background")


def claim_key(tenant: str, response_id: str) -> str:
    return f"polled:{tenant}:{response_id}"


class BackgroundCosts:
    """Accounts for background responses as their polls find them finished."""

    def __init__(
        self,
        state: StateBackend,
        tables: ModelTables,
        sink: RecordSink,
        observer: Observer,
        ttl: float,
        of: tenants.Tenants,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`ttl`: seconds a response's entry and its claim are kept (a run's idle time)."""
        self._state = state
        self._tables = tables
        self._sink = sink
        self._observer = observer
        self._ttl = ttl
        self._tenants = of
        self._clock = clock

    async def _quietly(self, step: Awaitable[object]) -> None:
        """One step of the accounting: a failure of the state is counted, and the next step still runs."""
        try:
            await step
        except StateUnavailable:
            self._observer.state_error()

    async def polled(
        self,
        info: ResponseInfo,
        *,
        key_hash: str,
        streamed: bool,
        status: int,
        latency: float,
        began: float,
        final: Collection[str],
    ) -> None:
        """A poll's answer, sent to the client already: account for it if it finishes a pending response.

        `key_hash`: the poll's key (its tenant's responses are the ones it can finish); `latency`: seconds
        the upstream took; `began`: `time.perf_counter()` when the poll arrived; `final`: the statuses of a
        finished response (its API's `Polls.final`).
        """
        response_id = info.response_id
        if status != 200 or response_id is None or info.finish_reason not in final:
            return
        try:
            await self._account(self._tenants.of(key_hash), response_id, info, streamed, status, latency, began)
        except StateUnavailable:
            self._observer.state_error()
        except Exception:  # the client has its answer; a bug here must not surface as a failed request
            log.exception("accounting for a background response failed")

    async def _account(
        self,
        tenant: str,
        response_id: str,
        info: ResponseInfo,
        streamed: bool,
        status: int,
        latency: float,
        began: float,
    ) -> None:
        entry = continuation.entry(tenant, response_id)
        raw = await self._state.recall(entry)
        found = continuation.pending_of(raw) if raw is not None else None
        if found is None:
            return  # not started through this proxy, or accounted for already (or an ordinary response)
        if not await self._state.claim(claim_key(tenant, response_id), self._ttl):
            return  # another poll (here or on another replica) accounts for it
        run_id, pending = found
        now = self._clock()
        usd = self._tables.bill(pending.model, info.usage)  # None: unpriced, it adds nothing to a spend
        ops = accounting.usage_ops(info.usage, usd or 0.0)
        finished = continuation.dumps(run_id, info.tool_calls)  # no longer pending: later polls stop at `recall`
        # One after the other: a gather's tasks would hand the loop over, and with a state that never
        # waits nothing here is shielded from the handler's cancellation (`ProxyContext.settle`).
        await self._quietly(self._state.remember(entry, finished, self._ttl))
        if ops:
            ids = scope_ids(tenants.state_id(tenant, run_id), pending.key_hash, pending.model, now)
            await self._quietly(self._state.execute(ids, ops))
        if pending.nests:
            scope = roots.scope(tenant, pending.end_user, pending.session)
            await self._quietly(nesting.remember(self._state, scope, run_id, info.tool_calls, self._ttl))
        record = reporting.polled_record(
            run_id, pending, info, at=now, usd=usd, streamed=streamed, status=status, latency=latency, began=began
        )
        self._sink.submit(record)
        try:
            self._observer.request_done(record)
        except Exception:  # an observer must never break a request
            log.exception("observer failed")
