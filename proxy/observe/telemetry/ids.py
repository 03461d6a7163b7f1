"""Which trace a request's spans join: the agent's own (W3C `traceparent`), else its run's.

A run without a `traceparent` is one trace whose id is derived from its
tenant and its run id, so every replica that serves one of its requests puts
its spans in the same trace without sharing anything, and two tenants that
send the same `X-Run-Id` (two runs: `runs/tenants`) get two traces. `RunTraceIds` is the tracer provider's
id generator: it hands out that derived id for the root span being started,
random ids otherwise (span ids are always random).
"""

from __future__ import annotations

from collections.abc import Mapping

import xxhash
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import get_current_span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from runguard.proxy.runs import state_id

_PROPAGATOR = TraceContextTextMapPropagator()  # stateless: it only parses and writes headers


def run_trace_id(tenant: str, run_id: str) -> int:
    """The 128-bit trace id of a tenant's run's trace: stable across processes and replicas, never zero."""
    return int(xxhash.xxh3_128_hexdigest(f"runguard.run:{state_id(tenant, run_id)}".encode()), 16) or 1


def agent_context(traceparent: str | None, tracestate: str | None) -> Context | None:
    """The agent's span a request carries (`traceparent`, with its `tracestate`), as a parent context;
    None when there is none or it does not parse (then the run's own trace is used)."""
    if not traceparent:
        return None
    carrier: Mapping[str, str] = (
        {"traceparent": traceparent, "tracestate": tracestate} if tracestate else {"traceparent": traceparent}
    )
    context = _PROPAGATOR.extract(carrier)
    return context if get_current_span(context).get_span_context().is_valid else None


class RunTraceIds(RandomIdGenerator):
    """Random ids, except the trace id of a root span started `for_run` (the event loop starts one span at a
    time, so the id chosen just before `start_span` is the one it asks for)."""

    def __init__(self) -> None:
        self.chosen: int | None = None

    def generate_trace_id(self) -> int:
        chosen = self.chosen
        return chosen if chosen is not None else super().generate_trace_id()

    def is_trace_id_random(self) -> bool:
        return self.chosen is None
