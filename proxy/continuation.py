"""Responses API continuations: what the proxy remembers about a response id.

With `previous_response_id` a request carries only the new items, so the
proxy remembers, per response id it forwarded, the run and the tool calls
made (call id -> name and arguments) and fills them into the next request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import orjson

from runguard.proxy.events import RequestInfo, ToolCall

Calls = dict[str, tuple[str, str]]  # call id -> (name, arguments)


def dumps(run_id: str, calls: Sequence[ToolCall]) -> str:
    table = {c.call_id: [c.name, c.arguments[:2000]] for c in calls if c.call_id}
    return orjson.dumps({"run": run_id, "calls": table}).decode()


def loads(raw: str) -> tuple[str | None, Calls]:
    try:
        data = orjson.loads(raw)
        calls = {str(k): (str(v[0]), str(v[1])) for k, v in (data.get("calls") or {}).items()}
        return (str(data["run"]) if data.get("run") else None), calls
    except (orjson.JSONDecodeError, AttributeError, IndexError, TypeError):
        return None, {}


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
