"""What a request leaves in the records: its body and answer as kept, its credentials masked out.

The upstream's words (an error text, a recorded answer) may echo the key the
request carried; whatever RunGuard keeps of them has the request's own
credentials, and anything key-shaped, masked (`keys.redact`), and a recorded
query drops every parameter that may hold a credential (`credentials`).
"""

from __future__ import annotations

import dataclasses

from aiohttp import web
from multidict import CIMultiDict

from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.providers import credentials
from runguard.proxy.providers.paths import canonical
from runguard.proxy.runs import redact
from runguard.proxy.store.records import RecordedBody


def credentials_of(request: web.Request) -> tuple[str, ...]:
    """The request's credentials, to mask in what the upstream says (its query parsed only if it may name one)."""
    query = request.query if credentials.may_name_one(request.query_string) else CIMultiDict[str]()
    return credentials.every_value(request.headers, query)


def recorded(request: web.Request, body: bytes, response: bytes, status: int | None) -> RecordedBody:
    """The request's body and its answer as `store.record_bodies` keeps them."""
    query = "&".join(f"{k}={v}" for k, v in request.query.items() if k.lower() not in credentials.QUERY_NAMES)
    # An upstream error may echo the request's key: the stored answer has it masked (as records do).
    said = redact(response.decode("utf-8", "surrogateescape"), credentials_of(request))
    path = canonical(request.raw_path) or request.path  # as routed
    return RecordedBody(path, query, body, said.encode("utf-8", "surrogateescape"), status)


def masked(info: ResponseInfo, request: web.Request) -> ResponseInfo:
    """`info` with the request's credentials (and anything key-shaped) masked in the upstream's error text."""
    if not info.error:
        return info
    return dataclasses.replace(info, error=redact(info.error, credentials_of(request)))
