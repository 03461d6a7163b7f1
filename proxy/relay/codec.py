"""Decoding compressed bodies for the parsers; the bytes forwarded stay as they are.

The proxy relays `Content-Encoding`d bodies untouched in both directions and
decodes a copy only to read it. Decoding is bounded (a small compressed body
must not expand into gigabytes) and never raises: an undecodable body is
simply not parsed (fail open).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import brotli

Decoder = Callable[[bytes], bytes]


class BodyTooLarge(ValueError):
    """A body (after decoding) is larger than the configured limit."""


def _zlib(wbits: int) -> Decoder:
    inflater = zlib.decompressobj(wbits)
    return inflater.decompress


def _brotli() -> Decoder:
    inflater = brotli.Decompressor()
    return lambda chunk: bytes(inflater.process(chunk))


def stream_decoder(encoding: str | None) -> Decoder | None:
    """An incremental decoder for one body, or None for identity / unknown encodings."""
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip"):
        return _zlib(16 + zlib.MAX_WBITS)
    if name == "deflate":
        return _zlib(32 + zlib.MAX_WBITS)  # zlib or gzip header, auto-detected
    if name == "br":
        return _brotli()
    return None


def decode_body(body: bytes, encoding: str | None, limit: int) -> bytes | None:
    """The decoded body; None if it cannot be decoded. Raises BodyTooLarge past `limit`."""
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        return body
    try:
        if name in ("gzip", "x-gzip", "deflate"):
            wbits = 16 + zlib.MAX_WBITS if name != "deflate" else 32 + zlib.MAX_WBITS
            inflater = zlib.decompressobj(wbits)
            out = inflater.decompress(body, limit + 1)
        elif name == "br":
            out = brotli.decompress(body)
        else:
            return None
    except (zlib.error, brotli.error):
        return None
    if len(out) > limit:
        raise BodyTooLarge(f"decoded body exceeds {limit} bytes")
    return out
