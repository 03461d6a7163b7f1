"""A stream's parser reads it in batches: the same facts as chunk by chunk, at most `PARSE_BATCH` bytes held."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import pytest

from runguard.proxy.providers.base import Adapter
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from runguard.proxy.relay import streams as relay
from runguard.proxy.relay.codec import stream_decoder
from runguard.proxy.relay.streams import ParseBatch, _Ending
from tests.e2e import payloads

STREAMS: list[tuple[Adapter, Callable[[str], list[bytes]]]] = [
    (ChatAdapter(), lambda text: payloads.chat_stream(text, with_usage=True)),
    (ResponsesAdapter(), payloads.responses_stream),
    (GeminiAdapter(), payloads.gemini_stream),
]
TEXT = " ".join(f"word{i}" for i in range(400))


class Recording:
    """A parser that keeps what it was fed, as fed."""

    def __init__(self) -> None:
        self.fed: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        self.fed.append(chunk)

    def close(self) -> object:
        raise AssertionError("ParseBatch never closes the parser")


@pytest.mark.parametrize(("adapter", "stream"), STREAMS, ids=["chat", "responses", "gemini"])
@pytest.mark.parametrize("batch", [1, 100, 64 * 1024])
def test_batches_read_as_the_chunks_do(
    adapter: Adapter, stream: Callable[[str], list[bytes]], batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay, "PARSE_BATCH", batch)
    chunks = stream(TEXT)
    one_by_one = adapter.stream_parser()
    for chunk in chunks:
        one_by_one.feed(chunk)
    batched = adapter.stream_parser()
    parsing = ParseBatch(batched, None)
    for chunk in chunks:
        parsing.add(chunk)
    parsing.flush()
    assert batched.close() == one_by_one.close()
    assert TEXT in batched.close().text


@pytest.mark.parametrize("batch", [50, 64 * 1024])
def test_a_compressed_stream_is_decoded_in_order(batch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relay, "PARSE_BATCH", batch)
    plain = b"".join(payloads.chat_stream(TEXT, with_usage=True))
    packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    packed = packer.compress(plain) + packer.flush()
    parser = ChatAdapter().stream_parser()
    parsing = ParseBatch(parser, stream_decoder("gzip"))
    for start in range(0, len(packed), 37):
        parsing.add(packed[start : start + 37])
    parsing.flush()
    info = parser.close()
    assert info.text == TEXT and info.usage is not None


def test_chunks_are_held_until_a_batch_fills_then_fed_whole_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relay, "PARSE_BATCH", 10)
    parser = Recording()
    parsing = ParseBatch(parser, None)  # type: ignore[arg-type]
    parsing.add(b"abc")
    parsing.add(b"defg")
    assert parser.fed == []
    parsing.add(b"hij")  # 10 bytes held: fed as one
    assert parser.fed == [b"abcdefghij"]
    parsing.add(b"k")
    parsing.flush()
    parsing.flush()  # nothing left: nothing more fed
    assert parser.fed == [b"abcdefghij", b"k"]


async def test_the_end_hook_runs_once_before_the_bytes_that_end_the_stream() -> None:
    """`before_end` runs before the chunk carrying a terminal event is written (even split over two
    chunks), once; a stream with no terminal event (Gemini's) runs it at its end."""
    calls: list[str] = []

    async def hook() -> None:
        calls.append("marked")

    ending = _Ending(hook)
    await ending.before(b'data: {"choices": []}\n\n', False)
    assert calls == []
    await ending.before(b"data: [DO", False)
    assert calls == []
    await ending.before(b"NE]\n\n", False)
    assert calls == ["marked"]
    await ending.before(b"", True)
    assert calls == ["marked"]
    gemini = _Ending(hook)
    await gemini.before(b'data: {"candidates": []}\r\n\r\n', False)
    await gemini.before(b"", True)
    assert calls == ["marked", "marked"]
