"""A request's and a response's shape: which detectors' hooks can do anything for them.

Most requests of a run are alike in what they carry: tools declared or not, tool
results sent back or not, the last assistant turn's calls or none. A detector
says in its class what its hooks need (`Detector.reads_results`, `reads_calls`,
`needs_tools`); the engine's `Lineup` lists each phase's hooks once per shape,
so a request runs only the hooks that can plan or find something for it.

A request's shape is three bits:

- `RESULTS`: it sends tool results back (`RequestInfo.new_results`), or user text that may replay them
  (`replayed.may_replay`: an agent that calls tools natively and keeps its history as text);
- `CALLS`: its conversation's last assistant turn called tools (`prior_calls`);
- `TOOLS`: its response may call a tool (`may_call_tools`).

A response's shape is whether it calls tools (`ResponseInfo.tool_calls`). The
response hooks are chosen by the response itself, so a provider that answered
with calls a request did not allow still has them judged.
"""

from __future__ import annotations

from typing import Any

from runguard.detectors.support import Detector
from runguard.detectors.support.replayed import may_replay
from runguard.proxy.core.events import RequestInfo

RESULTS = 1
CALLS = 2
TOOLS = 4
EVERY = RESULTS | CALLS | TOOLS
SHAPES = tuple(range(EVERY + 1))  # every request shape, as an index


def may_call_tools(request: RequestInfo) -> bool:
    """Whether the model may answer the request with a tool call.

    Every provider calls only the tools a request declares (wire-formats.md:
    Chat's and Responses' `tools`, Gemini's `functionDeclarations` and built-in
    tools, Anthropic's `tools`); a request that declares none, carries no call
    and no result, takes no tools from elsewhere (`RequestInfo.tools_elsewhere`),
    continues no stored response and is no socket session's turn (whose tools
    the session set) gets an answer without calls. An unreadable request is
    counted as one that may.
    """
    return bool(
        request.tool_names
        or request.prior_calls
        or request.new_results
        or request.tools_elsewhere
        or request.previous_response_id is not None
        or request.session_turn
        or request.parse_error is not None
    )


def request_shape(request: RequestInfo) -> int:
    """The request's shape bits (see the module docstring)."""
    shape = TOOLS if may_call_tools(request) else 0
    if request.new_results or may_replay(request):
        shape |= RESULTS
    if request.prior_calls:
        shape |= CALLS
    return shape


def requests_fit(detector: Detector[Any], shape: int) -> bool:
    """Whether the detector's request hooks can plan or find anything for a request of `shape`."""
    if detector.reads_results and not shape & RESULTS:
        return False
    if detector.reads_calls and not shape & CALLS:
        return False
    return not (detector.needs_tools and not shape & TOOLS)


def responses_fit(detector: Detector[Any], calls: bool) -> bool:
    """Whether the detector's response hooks can plan or find anything for a response with (or without) calls."""
    return calls or not detector.needs_tools
