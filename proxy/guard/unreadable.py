"""Model requests whose body the proxy cannot read, on a route it guards.

A body that is not JSON, that holds a lone surrogate (`"\\ud83d"`), that nests
deeper than the parser goes (1,024 levels), or whose `Content-Encoding` is
unknown, cannot be parsed; the provider may still read it. Such a request is
not waved through: it is judged by what needs no body, then forwarded
untouched (`guard.unreadable: forward`, the default: the proxy fails open on
what it cannot parse) or answered with a provider-native 400
(`guard.unreadable: refuse`). Either way it is counted
(`runguard_unreadable_requests_total{provider,action}`) and recorded with its
parse error.

Its run: the one `X-Run-Id` names; without the header, its API key's
anonymous run (the run of the conversations whose root cannot be told, shared
by every unreadable request of that key; see `roots`). It counts toward that
run and key like any request, and only the checks that need no content judge
it (`COUNTING`): budgets, caps, requests in flight, identical bodies sent again,
and the breakers, so an open run, key or key-and-model breaker refuses it. The
model, for the key-and-model breaker and the price, is the path's (Gemini) or
the body's `"model"` field if it can be found.
"""

from __future__ import annotations

import dataclasses
import re

from runguard.proxy.core.events import Api, RequestInfo
from runguard.proxy.guard.lineup.engine import Lineup
from runguard.proxy.providers.common.conversation import failed_request

# The detectors that judge a request by counts alone: what an unreadable body can be judged by.
COUNTING = frozenset(
    {"budget", "max_requests", "max_tokens", "timeout", "over_spawn", "retry_cascade", "duplicate_request"}
)
_MODEL = re.compile(rb'"model"\s*:\s*"([A-Za-z0-9._:/@+-]{1,256})"')
_ERROR_CHARS = 160  # of the parse error, in the record (the store keeps 256 of its error text)


def request_info(api: Api, problem: str, body: bytes, *, model: str | None, stream: bool) -> RequestInfo:
    """What is known of a request whose body cannot be read: its API, its model (`model`, the path's, else the
    body's `"model"` field if one is spelled plainly), and the streaming the path asks for."""
    if model is None:
        found = _MODEL.search(body)
        model = found.group(1).decode() if found else ""
    return dataclasses.replace(failed_request(api, problem), model=model, stream=stream)


def counting(lineup: Lineup) -> Lineup:
    """`lineup` less the detectors that read a request's content (none can judge an unreadable one)."""
    return Lineup.of(armed for armed in lineup.armed if armed.name in COUNTING)


def record_error(problem: str, error: str | None) -> str:
    """A record's error for an unreadable request: its parse error, then what else went wrong."""
    said = f"unreadable request: {problem[:_ERROR_CHARS]}"
    return f"{said}; {error}" if error else said
