"""Decoding compressed bodies for the parsers; the bytes forwarded stay as they are.

The proxy relays `Content-Encoding`d bodies untouched in both directions and
decodes a copy only to read it. Decoding never raises on a bad body: an
undecodable body is simply not parsed (fail open).

Decoding is bounded: every coding (gzip, deflate, br) is inflated in steps of
at most `STEP` bytes of output, and stops with `BodyTooLarge` as soon as the
output passes the limit, so a small compressed body (a "bomb") never expands
into more than about the limit plus one step. `inflate` decodes a request
body: its first step on the event loop, the rest (a large body) in a thread,
one step at a time, so the other requests on the loop are not held up.
zstd and stacked codings (`gzip, br`) are not decoded: such bodies are
forwarded unread.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable

import brotli

Decoder = Callable[[bytes], bytes]

STEP = 1 << 18  # the most output one decoding step makes (well under a millisecond of work)


class BodyTooLarge(ValueError):
    """A body (after decoding) is larger than the configured limit."""


def _zlib(wbits: int) -> Decoder:
    inflater = zlib.decompressobj(wbits)
    return inflater.decompress


def _brotli() -> Decoder:
    inflater = brotli.Decompressor()
    return lambda chunk: bytes(inflater.process(chunk))


def _wbits(name: str) -> int | None:
    if name in ("gzip", "x-gzip"):
        return 16 + zlib.MAX_WBITS
    if name == "deflate":
        return 32 + zlib.MAX_WBITS  # zlib or gzip header, auto-detected
    return None


def stream_decoder(encoding: str | None) -> Decoder | None:
    """An incremental decoder for one body, or None for identity / unknown encodings."""
    name = (encoding or "").strip().lower()
    wbits = _wbits(name)
    if wbits is not None:
        return _zlib(wbits)
    if name == "br":
        return _brotli()
    return None


class _Zlib:
    def __init__(self, body: bytes, wbits: int) -> None:
        self._inflater = zlib.decompressobj(wbits)
        self._pending = body
        self._fed = False

    def step(self) -> bytes | None:
        """At most `STEP` bytes more of output; None once there is no more."""
        if self._fed and not self._pending and self._inflater.eof:
            return None
        self._fed = True
        out = self._inflater.decompress(self._pending, STEP)
        self._pending = self._inflater.unconsumed_tail
        return out if out or self._pending else None

    def whole(self) -> bool:
        return True  # a truncated zlib body decodes to what it has; the parser then fails on it


class _Brotli:
    def __init__(self, body: bytes) -> None:
        self._inflater = brotli.Decompressor()
        self._pending: bytes | None = body

    def step(self) -> bytes | None:
        if self._pending is None and self._inflater.is_finished():
            return None
        data, self._pending = self._pending or b"", None  # the whole input at once, then only its output
        out = bytes(self._inflater.process(data, output_buffer_limit=STEP))
        return out if out or data else None

    def whole(self) -> bool:
        return bool(self._inflater.is_finished())


class Inflating:
    """One body being decoded step by step, its output bounded by `limit`."""

    def __init__(self, codec: _Zlib | _Brotli, limit: int) -> None:
        self._codec = codec
        self._limit = limit
        self._parts: list[bytes] = []  # joined once at the end: no copy per step
        self._size = 0
        self.done = False

    def run(self, most: int | None = None) -> bool:
        """Decode until done (True) or `most` bytes of output more are made (False). Raises BodyTooLarge
        (and errors of the coding) as soon as the output passes the limit."""
        start = self._size
        while not self.done:
            if most is not None and self._size - start >= most:
                return False
            chunk = self._codec.step()
            if chunk is None:
                self.done = True
                break
            self._parts.append(chunk)
            self._size += len(chunk)
            if self._size > self._limit:
                raise BodyTooLarge(f"decoded body exceeds {self._limit} bytes")
        return True

    def result(self) -> bytes | None:
        return b"".join(self._parts) if self._codec.whole() else None


def _inflating(body: bytes, encoding: str | None, limit: int) -> Inflating | bytes | None:
    """How `body` decodes: itself (identity), an `Inflating`, or None for a coding not decoded here."""
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        return body
    wbits = _wbits(name)
    if wbits is not None:
        return Inflating(_Zlib(body, wbits), limit)
    if name == "br":
        return Inflating(_Brotli(body), limit)
    return None


def decode_body(body: bytes, encoding: str | None, limit: int) -> bytes | None:
    """The decoded body; None if it cannot be decoded. Raises BodyTooLarge past `limit`."""
    inflating = _inflating(body, encoding, limit)
    if not isinstance(inflating, Inflating):
        return inflating
    try:
        inflating.run()
    except (zlib.error, brotli.error):
        return None
    return inflating.result()


async def inflate(body: bytes, encoding: str | None, limit: int, inline: int = 4 * STEP) -> bytes | None:
    """`decode_body` for a request on the event loop: up to `inline` bytes of output decoded in place,
    the rest in a thread (each step lets the loop run). Raises BodyTooLarge past `limit`."""
    inflating = _inflating(body, encoding, limit)
    if not isinstance(inflating, Inflating):
        return inflating
    try:
        if not inflating.run(inline):
            await asyncio.to_thread(inflating.run)
    except (zlib.error, brotli.error):
        return None
    return inflating.result()
