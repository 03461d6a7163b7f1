"""Trip evidence with content, in the opt-in record mode (`store.record_bodies`).

Detectors show the calls that formed a pattern by digest only (`detectors.support.base.Evidence`), so a trip
record holds no message content by default. With `store.record_bodies` on (the traffic is recorded
anyway), the calls the tripping request or its response carries get their text too: `args` (the call's
arguments) and `result` (what the tool returned), each abridged. Earlier calls are known by digest only:
the run's state keeps no more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runguard.detectors.support import call_args_digest, paired_results
from runguard.proxy.core.events import RequestInfo, ResponseInfo, ToolCall, ToolResult

ABRIDGED = 500  # characters of a call's arguments, or of its result, kept in a trip's evidence


def _texts(request: RequestInfo, response: ResponseInfo | None) -> dict[tuple[str, str], dict[str, str]]:
    """(tool, args digest) -> the text of the call and of its result, for what this request and response carry."""
    found: dict[tuple[str, str], dict[str, str]] = {}

    def keep(call: ToolCall, result: ToolResult | None) -> None:
        text = {"args": call.arguments[:ABRIDGED]}
        if result is not None:
            text["result"] = result.content[:ABRIDGED]
        found.setdefault((call.name, call_args_digest(call)), text)

    for call, result in paired_results(request):
        if call is not None:
            keep(call, result)
    for call in response.tool_calls if response is not None else ():
        keep(call, None)
    return found


def with_content(evidence: Mapping[str, Any], request: RequestInfo, response: ResponseInfo | None) -> dict[str, Any]:
    """`evidence` with `args` and `result` added to its `calls` and `batch` entries that this request or its
    response carries (matched by tool and arguments digest)."""
    shown = dict(evidence)
    if not any(isinstance(shown.get(key), list) for key in ("calls", "batch")):
        return shown
    texts = _texts(request, response)
    for key in ("calls", "batch"):
        entries = shown.get(key)
        if isinstance(entries, list):
            shown[key] = [
                {**entry, **texts.get((entry.get("tool", ""), entry.get("args_digest", "")), {})}
                if isinstance(entry, dict)
                else entry
                for entry in entries
            ]
    return shown
