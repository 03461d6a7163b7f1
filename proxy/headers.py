"""Which headers cross the proxy.

Everything is forwarded as it came, except hop-by-hop headers (they describe
one connection, not the message), RunGuard's own `X-RunGuard-*`, `X-Run-Id`
and `X-Agent-Name` request headers, and `Host` (the upstream's is used).
"""

from __future__ import annotations

from collections.abc import Iterable

from multidict import CIMultiDict, CIMultiDictProxy

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
OWN_PREFIX = "x-runguard-"


def _dropped_by_connection(headers: CIMultiDictProxy[str] | CIMultiDict[str]) -> set[str]:
    """Headers named in `Connection:` are hop-by-hop too (RFC 9110, 7.6.1)."""
    return {name.strip().lower() for value in headers.getall("Connection", ()) for name in value.split(",")}


def upstream_request_headers(headers: CIMultiDictProxy[str], own: Iterable[str]) -> CIMultiDict[str]:
    """The client's headers as they go upstream."""
    skip = HOP_BY_HOP | _dropped_by_connection(headers) | {name.lower() for name in own} | {"host", "content-length"}
    return CIMultiDict(
        (k, v) for k, v in headers.items() if k.lower() not in skip and not k.lower().startswith(OWN_PREFIX)
    )


def client_response_headers(headers: CIMultiDictProxy[str], *, keep_length: bool) -> CIMultiDict[str]:
    """The upstream's response headers as they go to the client.

    `Content-Length` is kept only when the body is relayed whole (aiohttp
    frames a streamed body itself).
    """
    skip = HOP_BY_HOP | _dropped_by_connection(headers)
    if not keep_length:
        skip = skip | {"content-length"}
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in skip)
