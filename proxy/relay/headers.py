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


# Memos of pure functions of what a client sends, bounded (past the bound, computed each time): the same client
# sends the same header names in the same order every request, and the same `Connection:` value.
_MAX_CACHED = 256
_connection_names: dict[str, list[str]] = {}  # a `Connection:` value -> the header names it lists
_skips: dict[tuple[str, ...], frozenset[str]] = {}  # own header names -> every lower-case name dropped
_drops: dict[tuple[str, frozenset[str]], list[str]] = {}  # (header names, skip) -> the names to drop


def _names_in(connection: str) -> list[str]:
    names = _connection_names.get(connection)
    if names is None:
        names = [name.strip() for name in connection.split(",")]
        if len(_connection_names) < _MAX_CACHED:
            _connection_names[connection] = names
    return names


def _dropped_by_connection(headers: CIMultiDictProxy[str]) -> list[str]:
    """Headers named in `Connection:` are hop-by-hop too (RFC 9110, 7.6.1)."""
    return [name for value in headers.getall("Connection", ()) for name in _names_in(value)]


def _dropped(headers: CIMultiDictProxy[str], skip: frozenset[str], own: bool) -> list[str]:
    """The names of `headers` that do not cross: those in `skip` (lower-case), with `own` those starting
    `X-RunGuard-`, and those `Connection:` names.

    The names are lower-cased all joined in one `lower()` (a name holds no newline), and what is dropped
    is remembered per list of names: lower-casing each of multidict's case-insensitive names and testing
    it cost more than the rest of the copy.
    """
    joined = "\n".join(headers.keys())
    key = (joined, skip)
    drop = _drops.get(key)
    if drop is None:
        lowered = joined.lower()
        names = lowered.split("\n")
        drop = list(skip.intersection(names))
        if own and OWN_PREFIX in lowered:
            drop += [name for name in names if name.startswith(OWN_PREFIX)]
        if len(_drops) < _MAX_CACHED:
            _drops[key] = drop
    return drop + _dropped_by_connection(headers) if "connection" in drop else drop


def _without(headers: CIMultiDictProxy[str], drop: list[str]) -> CIMultiDict[str]:
    """A copy of `headers` without the `drop` names (any case): copied whole, then cut, which costs
    a third of building it header by header (a request from the OpenAI SDK carries about 18)."""
    out = CIMultiDict(headers)
    for name in drop:
        out.popall(name, None)
    return out


def _skip(own: Iterable[str]) -> frozenset[str]:
    key = own if isinstance(own, tuple) else tuple(own)
    skip = _skips.get(key)
    if skip is None:
        skip = HOP_BY_HOP.union([name.lower() for name in key], ("host", "content-length"))
        if len(_skips) < _MAX_CACHED:
            _skips[key] = skip
    return skip


def upstream_request_headers(headers: CIMultiDictProxy[str], own: Iterable[str]) -> CIMultiDict[str]:
    """The client's headers as they go upstream."""
    return _without(headers, _dropped(headers, _skip(own), own=True))


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
