"""Which headers cross the proxy, and reading the ones RunGuard takes text from.

Everything is forwarded as it came, except hop-by-hop headers (they describe
one connection, not the message), RunGuard's own `X-RunGuard-*`, `X-Run-Id`
and `X-Agent-Name` request headers, and `Host` (the upstream's is used).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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
_HOP_AND_LENGTH = HOP_BY_HOP | {"content-length"}


def _dropped_by_connection(headers: CIMultiDictProxy[str]) -> list[str]:
    """Headers named in `Connection:` are hop-by-hop too (RFC 9110, 7.6.1)."""
    return [name.strip() for value in headers.getall("Connection", ()) for name in value.split(",")]


def _without(headers: CIMultiDictProxy[str], drop: list[str]) -> CIMultiDict[str]:
    """A copy of `headers` without the `drop` names (any case): copied whole, then cut, which costs
    a third of building it header by header (a request from the OpenAI SDK carries about 18)."""
    out = CIMultiDict(headers)
    for name in drop:
        out.popall(name, None)
    return out


def upstream_request_headers(headers: CIMultiDictProxy[str], own: Iterable[str]) -> CIMultiDict[str]:
    """The client's headers as they go upstream."""
    skip = HOP_BY_HOP.union([name.lower() for name in own], ("host", "content-length"))
    drop = [name for name in headers if (low := name.lower()) in skip or low.startswith(OWN_PREFIX)]
    return _without(headers, drop + _dropped_by_connection(headers))


def client_response_headers(headers: CIMultiDictProxy[str], *, keep_length: bool) -> CIMultiDict[str]:
    """The upstream's response headers as they go to the client.

    `Content-Length` is kept only when the body is relayed whole (aiohttp
    frames a streamed body itself).
    """
    skip = HOP_BY_HOP if keep_length else _HOP_AND_LENGTH
    drop = [name for name in headers if name.lower() in skip]
    return _without(headers, drop + _dropped_by_connection(headers))


def header_text(value: str | None) -> str | None:
    """A header value as text that can be encoded: bytes that were not UTF-8 as `\\xff` escapes.

    aiohttp keeps such bytes as lone surrogates (surrogateescape). Passed on as they are, they break
    every encoder downstream (the access log, the record store, Redis keys), so a run id or agent
    name sent with them would stall the store; escaped, they still name one run.
    """
    if value is None or value.isascii():
        return value
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def is_upgrade(method: str, headers: Mapping[str, str]) -> bool:
    """A WebSocket handshake (RFC 6455 4.1: a GET asking to upgrade to `websocket`)."""
    return method == "GET" and headers.get("Upgrade", "").lower() == "websocket"
