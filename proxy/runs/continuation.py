"""Responses API continuations: what the proxy remembers about a response id.

With `previous_response_id` a request carries only the new items, so the
proxy remembers, per response id it forwarded, the run and the tool calls
made (call id -> name and arguments) and fills them into the next request.

A background response (`background: true`) is answered before it is done:
its entry then also says who asked (`Pending`), so that the poll that finds
it finished can count its usage in that request's run (`background`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import orjson

from runguard.proxy.core.events import RequestInfo, ToolCall
from runguard.proxy.core.frozen import frozen

Calls = dict[str, tuple[str, str]]  # call id -> (name, arguments)


@frozen
class Pending:
    """The request that started a background response, as its poll accounts for it (no content)."""

    key_hash: str
    model: str
    agent: str  # the agent's label in the records
    index: int  # the request's position in its run
    nests: bool  # no X-Run-Id: threads the response's tool calls start join the run (see `nesting`)
    end_user: str | None = None  # the request's `RequestInfo.end_user`: where those threads are looked up
    session: str | None = None  # and its `RequestInfo.session`


def entry(tenant: str, response_id: str) -> str:
    """The state entry of a response id, in the tenant of the request that made it (`tenants`): another
    tenant's `previous_response_id` or poll finds nothing there."""
    return f"resp:{tenant}:{response_id}"


def dumps(run_id: str, calls: Sequence[ToolCall], pending: Pending | None = None) -> str:
    table = {c.call_id: [c.name, c.arguments[:2000]] for c in calls if c.call_id}
    entry: dict[str, object] = {"run": run_id, "calls": table}
    if pending is not None:
        entry["pending"] = [
            pending.key_hash,
            pending.model,
            pending.agent,
            pending.index,
            pending.nests,
            pending.end_user,
            pending.session,
        ]
    return orjson.dumps(entry).decode()


def loads(raw: str) -> tuple[str | None, Calls]:
    try:
        data = orjson.loads(raw)
        calls = {str(k): (str(v[0]), str(v[1])) for k, v in (data.get("calls") or {}).items()}
        return (str(data["run"]) if data.get("run") else None), calls
    except (orjson.JSONDecodeError, AttributeError, IndexError, TypeError):
        return None, {}


def pending_of(raw: str) -> tuple[str, Pending] | None:
    """The run and the request of a background response not accounted for yet; None for any other entry."""
    try:
        data = orjson.loads(raw)
        key_hash, model, agent, index, nests, *rest = data["pending"]  # older entries end earlier
        run_id = data["run"]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if not isinstance(run_id, str) or not run_id:
        return None
    end_user = rest[0] if rest and isinstance(rest[0], str) else None
    session = rest[1] if len(rest) > 1 and isinstance(rest[1], str) else None
    return run_id, Pending(str(key_hash), str(model), str(agent), int(index), bool(nests), end_user, session)


def fill_names(request: RequestInfo, calls: Calls) -> RequestInfo:
    """Name the results (and rebuild the prior calls) from the remembered response."""
    if not calls or not request.new_results:
        return request
    results = tuple(
        r if r.name is not None or r.call_id not in calls else dataclasses.replace(r, name=calls[r.call_id][0])
        for r in request.new_results
    )
    prior = request.prior_calls or tuple(
        ToolCall(name, args, call_id, i) for i, (call_id, (name, args)) in enumerate(calls.items())
    )
    return dataclasses.replace(request, new_results=results, prior_calls=prior, derived={})
