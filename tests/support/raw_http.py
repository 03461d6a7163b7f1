"""HTTP/1.1 over a bare socket: request targets, bodies and timing that no client library sends."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson


@dataclass(frozen=True)
class RawReply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def head(method: str, target: str, host: str, headers: dict[str, str] | None = None, length: int | None = 0) -> bytes:
    """A request head exactly as given: `target` is sent as it is (no normalising, no quoting)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def request(
    url: str, method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> RawReply:
    """One request on a connection of its own, closed after the answer; the answer read to its end."""
    host, port = address(url)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(head(method, target, f"{host}:{port}", {**(headers or {}), "Connection": "close"}, len(body)))
        writer.write(body)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    top, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode("latin-1").split("\r\n")
    fields = dict(line.split(":", 1) for line in header_lines)
    named = {name.strip().lower(): value.strip() for name, value in fields.items()}
    if named.get("transfer-encoding") == "chunked":
        rest = _unchunked(rest)
    return RawReply(int(status_line.split()[1]), named, rest)


def _unchunked(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)
