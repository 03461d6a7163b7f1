from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from runguard.proxy.relay.codec import BodyTooLarge, decode_body, stream_decoder

BODY = b'{"model": "gpt-4o", "messages": []}' * 50


@pytest.mark.parametrize(
    ("encoding", "compressed"),
    [("gzip", gzip.compress(BODY)), ("deflate", zlib.compress(BODY)), ("br", brotli.compress(BODY)), ("", BODY)],
)
def test_decode_whole_and_incremental(encoding: str, compressed: bytes) -> None:
    assert decode_body(compressed, encoding, 1 << 20) == BODY
    decoder = stream_decoder(encoding)
    if decoder is None:
        return
    out = b"".join(decoder(compressed[i : i + 7]) for i in range(0, len(compressed), 7))
    assert out == BODY


def test_bomb_is_refused_and_garbage_is_not_parsed() -> None:
    bomb = gzip.compress(b"\0" * 10_000_000)
    with pytest.raises(BodyTooLarge):
        decode_body(bomb, "gzip", 1_000_000)
    assert decode_body(b"not gzip", "gzip", 1000) is None
    assert decode_body(b"x", "compress", 1000) is None
