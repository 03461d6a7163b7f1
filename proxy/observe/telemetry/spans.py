"""GenAI spans of a finished request: `chat {model}` / `generate_content {model}`, `execute_tool {tool}`,
`invoke_agent {agent}`.

Called by the guard when a request's record is made (`Guard._emit`), once
per model request, answered upstream or by RunGuard. The spans are built
with their real start and end times and ended at once; export happens on the
batch processor's thread (`export`).

Where they go (`ids`): a request carrying W3C `traceparent` puts its spans
under the agent's span; otherwise they go in its run's trace, under the
`invoke_agent` span of the agent speaking (named, or `agent-<fingerprint>`):
a turn lasts while the same agent makes the run's requests.

Tool spans are rebuilt from the wire: the call is seen in a response, its
result in the run's next request, so the span of a call runs from the end
of that response to the arrival of the request with its result, and is made
when the result arrives.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from opentelemetry.context import Context
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context
from opentelemetry.util.types import AttributeValue

from runguard.detectors.support import ResponseSeen
from runguard.proxy.guard import Ticket
from runguard.proxy.observe.telemetry import attributes
from runguard.proxy.observe.telemetry.bounds import BoundedValues, bounded
from runguard.proxy.observe.telemetry.ids import RunTraceIds, agent_context, run_trace_id
from runguard.proxy.observe.telemetry.meters import GenAiMeters
from runguard.proxy.observe.telemetry.turns import AgentTurns, Call, PendingCalls
from runguard.proxy.runs import state_id
from runguard.proxy.store.records import RequestRecord


class GenAiTracer:
    def __init__(
        self,
        tracer: Tracer | None,
        ids: RunTraceIds,
        meters: GenAiMeters | None,
        *,
        capture_content: bool,
        turn_idle: float,
        servers: Mapping[str, tuple[str, int]] | None = None,
    ) -> None:
        # upstream (a provider or a compatible service) -> its host and port (`server.address`, `.port`)
        self._servers = servers or {}
        self._tracer = tracer
        self._ids = ids
        self._meters = meters
        self._content = capture_content
        self.turns = AgentTurns(int(turn_idle * 1e9))
        self._calls = PendingCalls()
        # Client-chosen names in metric attributes and span names: printable, short, and few (`bounds`).
        self._models = BoundedValues()
        self._agents = BoundedValues()
        self._tools = BoundedValues()

    def _start(self, name: str, parent: Context | None, ticket: Ticket, kind: SpanKind, at: int) -> Span:
        """A span under `parent`, or a root of the trace of the ticket's run (in its tenant)."""
        assert self._tracer is not None
        if parent is not None:
            return self._tracer.start_span(name, parent, kind, start_time=at)
        self._ids.chosen = run_trace_id(ticket.tenant, ticket.run_id)
        try:
            return self._tracer.start_span(name, None, kind, start_time=at)
        finally:
            self._ids.chosen = None

    def request_done(self, ticket: Ticket, seen: ResponseSeen | None, record: RequestRecord) -> None:
        """The request's spans and metrics (it ended just now)."""
        end = time.time_ns()
        start = end - int((time.perf_counter() - ticket.started) * 1e9)
        error = attributes.error_type(ticket, record)
        if self._meters is not None:
            usage = seen.response.usage if seen is not None else None
            self._meters.record(
                attributes.metric_attributes(ticket, seen, self._models),
                usage.input_tokens if usage and not usage.estimated else 0,
                usage.output_tokens if usage and not usage.estimated else 0,
                (end - start) / 1e9,
                error,
            )
        if self._tracer is None:
            return
        parent = agent_context(ticket.traceparent, ticket.tracestate)
        turn = None
        agent = ticket.request.agent
        if parent is None:
            # `steady`: the agent's name learned from a handoff to it later does not start a turn of its own.
            turn = self.turns.current(_run(ticket), agent.steady, lambda: self._turn_span(ticket, start), start)
            parent = set_span_in_context(turn.span)
        self._tool_spans(ticket, parent, start)
        span = self._chat_span(ticket, seen, record, parent, start, error)
        span.end(end_time=end)
        if turn is not None:
            turn.last_end = end
            turn.blocked = turn.blocked or ticket.blocked_by is not None
        if seen is not None:
            for call in seen.response.tool_calls:
                key = call.call_id or call.name
                # Arguments are kept only when they will be shown (content opt-in): calls wait in memory.
                arguments = call.arguments if self._content else ""
                self._calls.add(_run(ticket), key, Call(bounded(call.name), arguments, end, bounded(agent.label)))

    def _turn_span(self, ticket: Ticket, at: int) -> Span:
        label = ticket.request.agent.label
        span = self._start(f"invoke_agent {self._agents(label)}", None, ticket, SpanKind.INTERNAL, at)
        span.set_attributes(
            {
                gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent",
                gen_ai.GEN_AI_PROVIDER_NAME: attributes.provider(ticket),
                gen_ai.GEN_AI_AGENT_NAME: bounded(label),
                gen_ai.GEN_AI_CONVERSATION_ID: ticket.run_id,
                gen_ai.GEN_AI_REQUEST_MODEL: bounded(ticket.request.model),
            }
        )
        return span

    def _chat_span(
        self,
        ticket: Ticket,
        seen: ResponseSeen | None,
        record: RequestRecord,
        parent: Context | None,
        start: int,
        error: str | None,
    ) -> Span:
        request = ticket.request
        name = f"{attributes.operation(request.api)} {self._models(request.model)}"
        span = self._start(name, parent, ticket, SpanKind.CLIENT, start)
        found = attributes.chat_attributes(ticket, seen, record)
        server = self._servers.get(str(ticket.provider))  # the upstream sent to, not the dialect spoken
        if server is not None:
            found["server.address"], found["server.port"] = server
        if error is not None:
            found[attributes.ERROR_TYPE] = error
        if self._content:
            found.update(attributes.input_content(request))
            if seen is not None:
                found.update(attributes.output_content(seen.response))
        span.set_attributes(found)
        for trip in ticket.trips:
            span.add_event("runguard.trip", attributes.trip_event(trip))
        if ticket.blocked_by:
            reason = next((t.reason for t in ticket.trips if t.detector == ticket.blocked_by), "breaker open")
            span.set_status(Status(StatusCode.ERROR, f"blocked by {ticket.blocked_by}: {reason}"))
        elif error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        return span

    def _tool_spans(self, ticket: Ticket, parent: Context | None, arrived: int) -> None:
        """An `execute_tool` span per tool result the request carries, from its call's response to now."""
        request = ticket.request
        for result in request.new_results:
            key = result.call_id or result.name
            call = self._calls.take(_run(ticket), key) if key else None
            name = result.name or (call.name if call else "unknown")
            started = call.ended if call is not None and call.ended <= arrived else arrived
            span = self._start(f"execute_tool {self._tools(name)}", parent, ticket, SpanKind.INTERNAL, started)
            found: dict[str, AttributeValue] = {
                gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
                gen_ai.GEN_AI_TOOL_NAME: bounded(name),
                gen_ai.GEN_AI_TOOL_TYPE: "function",
                gen_ai.GEN_AI_CONVERSATION_ID: ticket.run_id,
                gen_ai.GEN_AI_AGENT_NAME: bounded(call.agent if call is not None else request.agent.label),
            }
            if result.call_id:
                found[gen_ai.GEN_AI_TOOL_CALL_ID] = result.call_id
            if call is None:
                found["runguard.tool.call_seen"] = False  # timed at the result: its call was not seen here
            if self._content:
                arguments = call.arguments if call is not None else _arguments(ticket, result.call_id, name)
                if arguments is not None:
                    found[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS] = arguments
                found[gen_ai.GEN_AI_TOOL_CALL_RESULT] = result.content
            span.set_attributes(found)
            span.end(end_time=arrived)


def _run(ticket: Ticket) -> str:
    """The key of the ticket's run among every tenant's (two tenants may send the same `X-Run-Id`)."""
    return state_id(ticket.tenant, ticket.run_id)


def _arguments(ticket: Ticket, call_id: str | None, name: str) -> str | None:
    """A call's arguments from the request's own copy of the last assistant turn."""
    for call in ticket.request.prior_calls:
        if (call_id and call.call_id == call_id) or (not call_id and call.name == name):
            return call.arguments
    return None
