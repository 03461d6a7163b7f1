from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib

import brotli
import pytest

from runguard.proxy.relay import codec
from runguard.proxy.relay.codec import BodyTooLarge, decode_body, inflate, stream_decoder

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


def _brotli_bomb(size: int) -> bytes:
    """`size` bytes of zeros, brotli-compressed: a few hundred bytes per hundred MB."""
    compressor = brotli.Compressor(quality=1)
    block = b"\0" * (1 << 22)
    parts = [compressor.process(block) for _ in range(size // len(block))]
    return b"".join([*parts, compressor.finish()])


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_every_coding_stops_at_the_limit(encoding: str) -> None:
    """A body that inflates past the limit is refused once its output passes it, whatever the coding; one
    that inflates to exactly the limit decodes (the steps do not lose or double a byte at their seams)."""
    exact = bytes(range(256)) * (codec.STEP // 256 * 3 + 7)  # several steps, not a whole number of them
    packed = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress}[encoding]
    assert decode_body(packed(exact), encoding, len(exact)) == exact
    with pytest.raises(BodyTooLarge):
        decode_body(packed(exact), encoding, len(exact) - 1)


def test_a_brotli_bomb_is_refused_without_inflating_it_whole() -> None:
    """200 MB of zeros in a few KB of brotli: refused after about the limit of output, not all of it (the
    memory the decode took is measured with tracemalloc: a whole inflate would take 200 MB)."""
    bomb = _brotli_bomb(200 << 20)
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLarge):
            decode_body(bomb, "br", 4 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (4 << 20) + 4 * codec.STEP + (1 << 20)


def test_truncated_or_garbage_brotli_is_not_parsed() -> None:
    whole = brotli.compress(BODY)
    assert decode_body(whole[: len(whole) // 2], "br", 1 << 20) is None
    assert decode_body(b"not brotli at all", "br", 1 << 20) is None
    assert decode_body(gzip.compress(BODY), "gzip, br", 1 << 20) is None  # stacked codings: not decoded


async def test_inflate_decodes_a_large_body_off_the_event_loop() -> None:
    """The first steps run in place; the rest in a thread, so the loop keeps serving: a task that counts
    the loop's turns gets turns while a large body inflates (inline, it would get none)."""
    large = bytes(range(256)) * (16 * codec.STEP // 256)
    packed = brotli.compress(large, quality=1)
    turns = 0
    stop = asyncio.Event()

    async def count() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count())
    assert await inflate(packed, "br", len(large)) == large
    stop.set()
    await counter
    assert turns > 1
    assert await inflate(BODY, None, 10) == BODY  # identity: the body itself, no limit (it was read bounded)
    assert await inflate(b"x", "zstd", 1 << 20) is None
    with pytest.raises(BodyTooLarge):
        await inflate(packed, "br", len(large) - 1)
