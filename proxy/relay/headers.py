"""Which headers cross the proxy, and reading the ones RunGuard takes text from.

Everything is forwarded as it came, except hop-by-hop headers (they describe
one connection, not the message), RunGuard's own `X-RunGuard-*`, `X-Run-Id`
and `X-Agent-Name` request headers, and `Host` (the upstream's is used).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

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


# Pure functions of what a client sends are memoised (`lru_cache`, 256 entries each): the same client sends
# the same header names in the same order every request, and the same `Connection:` value.


@functools.lru_cache(maxsize=256)
def _names_in(connection: str) -> tuple[str, ...]:
    """The header names a `Connection:` value lists."""
    return tuple(name.strip() for name in connection.split(","))


def _dropped_by_connection(headers: CIMultiDictProxy[str]) -> list[str]:
    """Headers named in `Connection:` are hop-by-hop too (RFC 9110, 7.6.1)."""
    return [name for value in headers.getall("Connection", ()) for name in _names_in(value)]


@functools.lru_cache(maxsize=256)
def _drop_for(joined: str, skip: frozenset[str], own: bool) -> tuple[str, ...]:
    """Of the names `joined` (one a line), those in `skip` (lower-case) and, with `own`, those starting
    `X-RunGuard-`: lower-cased all at once in one `lower()` (a name holds no newline), not name by name."""
    lowered = joined.lower()
    names = lowered.split("\n")
    drop = tuple(skip.intersection(names))
    if own and OWN_PREFIX in lowered:
        drop += tuple(name for name in names if name.startswith(OWN_PREFIX))
    return drop


def _dropped(headers: CIMultiDictProxy[str], skip: frozenset[str], own: bool) -> Sequence[str]:
    """The names of `headers` that do not cross: those in `skip` (lower-case), with `own` those starting
    `X-RunGuard-`, and those `Connection:` names. Lower-casing each of multidict's case-insensitive names
    and testing it cost more than the rest of the copy; what is dropped is memoised per list of names."""
    drop = _drop_for("\n".join(headers.keys()), skip, own)
    return [*drop, *_dropped_by_connection(headers)] if "connection" in drop else drop


def _without(headers: CIMultiDictProxy[str], drop: Iterable[str]) -> CIMultiDict[str]:
    """A copy of `headers` without the `drop` names (any case): copied whole, then cut, which costs
    a third of building it header by header (a request from the OpenAI SDK carries about 18)."""
    out = CIMultiDict(headers)
    for name in drop:
        out.popall(name, None)
    return out


@functools.lru_cache(maxsize=256)
def _skip(own: tuple[str, ...]) -> frozenset[str]:
    """Every lower-case name that does not go upstream, the proxy's `own` headers included."""
    return HOP_BY_HOP.union([name.lower() for name in own], ("host", "content-length"))


def upstream_request_headers(headers: CIMultiDictProxy[str], own: Iterable[str]) -> CIMultiDict[str]:
    """The client's headers as they go upstream."""
    return _without(headers, _dropped(headers, _skip(own if isinstance(own, tuple) else tuple(own)), own=True))


def client_response_headers(headers: CIMultiDictProxy[str], *, keep_length: bool) -> CIMultiDict[str]:
    """The upstream's response headers as they go to the client.

    `Content-Length` is kept only when the body is relayed whole (aiohttp
    frames a streamed body itself).
    """
    return _without(headers, _dropped(headers, HOP_BY_HOP if keep_length else _HOP_AND_LENGTH, own=False))


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
