"""The attributes of a request's spans, in the GenAI semantic conventions' names (and `runguard.*` ones).

Content (message text, tool arguments and results) is only written by the
`*_content` functions, which the tracer calls when the operator opted in.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.util.types import AttributeValue

from runguard.detectors.support import ResponseSeen
from runguard.proxy.core.events import Api, RequestInfo, ResponseInfo
from runguard.proxy.guard import Ticket
from runguard.proxy.observe.telemetry.bounds import bounded
from runguard.proxy.providers import registry
from runguard.proxy.store.records import RequestRecord, TripRecord

ERROR_TYPE = "error.type"
BLOCKED = "runguard.blocked"
_CODE = re.compile(r"[A-Za-z_][\w.]{0,63}")  # an error code (UpstreamTimeout, client_disconnected), not a message


def operation(api: Api) -> str:
    """The API spec's `operation` (`generate_content` for Gemini, `chat` for Chat Completions and
    Responses); `chat` for an API no spec reads (a Realtime session's turns)."""
    spec = registry.api_named(api)
    return spec.operation if spec is not None else "chat"


def provider(ticket: Ticket) -> str:
    """`gen_ai.provider.name`: the conventions' name of the dialect's provider (`gcp.gemini`)."""
    spec = registry.provider_named(ticket.adapter.provider)
    return spec.system if spec is not None else str(ticket.adapter.provider)


def metric_attributes(
    ticket: Ticket, seen: ResponseSeen | None, model: Callable[[str], str] = bounded
) -> dict[str, str]:
    """The low-cardinality attributes the GenAI metrics carry; the model names (client text) as `model` gives
    them (the metrics pass a `BoundedValues`, so their count is bounded too)."""
    request = ticket.request
    found: dict[str, str] = {
        gen_ai.GEN_AI_OPERATION_NAME: operation(request.api),
        gen_ai.GEN_AI_PROVIDER_NAME: provider(ticket),
        gen_ai.GEN_AI_REQUEST_MODEL: model(request.model),
    }
    if seen is not None and seen.response.model:
        found[gen_ai.GEN_AI_RESPONSE_MODEL] = model(seen.response.model)
    return found


def error_type(ticket: Ticket, record: RequestRecord) -> str | None:
    """`error.type`: `runguard.blocked` for a request answered by RunGuard, the failure's code, or the HTTP
    status the client got; None for a success."""
    if ticket.blocked_by:
        return BLOCKED
    status = record.status
    if record.error and _CODE.fullmatch(record.error):
        return record.error
    if status is not None and status >= 400:
        return str(status)
    if record.error:
        return "_OTHER"  # a mid-stream error event: its text is no code
    return None


def chat_attributes(ticket: Ticket, seen: ResponseSeen | None, record: RequestRecord) -> dict[str, AttributeValue]:
    request = ticket.request
    found: dict[str, AttributeValue] = {
        **metric_attributes(ticket, seen),
        gen_ai.GEN_AI_CONVERSATION_ID: ticket.run_id,
        gen_ai.GEN_AI_AGENT_NAME: bounded(request.agent.label),
        gen_ai.GEN_AI_REQUEST_STREAM: request.stream,
        "runguard.api": str(request.api),
        "runguard.request.index": record.index,
        "runguard.key_hash": ticket.key_hash,
        "runguard.overhead_ms": round(record.overhead_ms, 3),
    }
    if record.unpriced:  # its cost is unknown: no cost attribute, never 0
        found["runguard.cost.unpriced"] = True
    else:
        found["runguard.cost.usd"] = record.usd
    if record.status is not None:
        found["http.response.status_code"] = record.status
    response = seen.response if seen is not None else None
    if response is not None:
        _response_attributes(found, response)
    if record.usage_estimated:
        found["runguard.usage.estimated"] = True
    if ticket.blocked_by:
        found["runguard.blocked_by"] = ticket.blocked_by
    if record.handoff_to:
        found["runguard.handoff_to"] = bounded(record.handoff_to)
    return found


def _response_attributes(found: dict[str, AttributeValue], response: ResponseInfo) -> None:
    if response.response_id:
        found[gen_ai.GEN_AI_RESPONSE_ID] = response.response_id
    if response.finish_reason:
        found[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] = (response.finish_reason,)
    usage = response.usage
    if usage is not None:
        found[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] = usage.input_tokens
        found[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.output_tokens
        if usage.cached_tokens:
            found[gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cached_tokens
        if usage.reasoning_tokens:
            found[gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_tokens
    if response.tool_calls:
        found["runguard.tool_calls"] = tuple(bounded(call.name) for call in response.tool_calls)


def trip_event(trip: TripRecord) -> dict[str, AttributeValue]:
    """The attributes of a `runguard.trip` span event (a reason names no content: detectors write it)."""
    return {
        "runguard.detector": trip.detector,
        "runguard.action": trip.action,
        "runguard.reason": trip.reason,
        "runguard.scope": trip.scope,
        "runguard.cost.avoided_usd": trip.usd_avoided_estimate,
    }


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


def input_content(request: RequestInfo) -> dict[str, AttributeValue]:
    """Opt-in: `gen_ai.input.messages`, the request's new tool results in the conventions' message shape (the
    proxy keeps no earlier turns: the history stays with the agent)."""
    if not request.new_results:
        return {}
    parts = [{"type": "tool_call_response", "id": r.call_id, "response": r.content} for r in request.new_results]
    return {gen_ai.GEN_AI_INPUT_MESSAGES: _json([{"role": "tool", "parts": parts}])}


def output_content(response: ResponseInfo) -> dict[str, AttributeValue]:
    """Opt-in: `gen_ai.output.messages`, the response's text and tool calls."""
    parts: list[dict[str, object]] = []
    if response.text:
        parts.append({"type": "text", "content": response.text})
    for call in response.tool_calls:
        parts.append({"type": "tool_call", "id": call.call_id, "name": call.name, "arguments": call.arguments})
    if not parts:
        return {}
    message = {"role": "assistant", "parts": parts, "finish_reason": response.finish_reason or ""}
    return {gen_ai.GEN_AI_OUTPUT_MESSAGES: _json([message])}
