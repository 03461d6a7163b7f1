"""What a recorded request said and what its answer said, for the run page and `show` (store.record_bodies).

Both sides are read by the request's API, found by the name its record keeps (`api`): the request by the
API's transcript (`ProviderApi.transcript`: the conversation's new tail, and on a run's first request its
system prompt), the answer by its adapter (plain bodies and streams alike: its text, its tool calls with
their arguments, handoffs). A body that cannot be read shows nothing (fail open: it is only a view).
"""

from __future__ import annotations

import orjson

from runguard.proxy.providers.registry import api_named
from runguard.proxy.providers.transcript import Line

MAX_CHARS = 4000
Entry = Line  # what the pages render: kind, title, text

__all__ = ["MAX_CHARS", "Entry", "request_entries", "response_entries"]


def _clip(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + f"… ({len(text) - MAX_CHARS} more characters)"


def request_entries(api: str, body: bytes, first: bool) -> list[Entry]:
    """The lines of a recorded request of `api` (see the module docstring); [] when it cannot be read."""
    spec = api_named(api)
    if spec is None or spec.transcript is None:
        return []
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(data, dict):
        return []
    try:
        lines = spec.transcript(data, first)
    except Exception:  # a view never fails on a body it cannot read
        return []
    return [Entry(line.kind, line.title, _clip(line.text)) for line in lines]


def response_entries(api: str, body: bytes) -> list[Entry]:
    """The answer's text, tool calls and handoffs, read by the API's adapter."""
    spec = api_named(api)
    if spec is None or not body:
        return []
    adapter = spec.adapter()
    try:
        if body.lstrip().startswith((b"data:", b"event:")):
            parser = adapter.stream_parser()
            parser.feed(body)
            info = parser.close()
        else:
            info = adapter.parse_response(body)
    except Exception:  # a view never fails on a body it cannot read
        return []
    entries = [Entry("assistant", "assistant", _clip(info.text))] if info.text else []
    entries += [Entry("tool call", call.name, _clip(call.arguments)) for call in info.tool_calls]
    entries += [Entry("handoff", handoff.tool, f"to {handoff.target}") for handoff in info.handoffs]
    if info.error:
        entries.append(Entry("error", "error", _clip(info.error)))
    return entries
