"""`export` writes the store's recorded traffic as the JSON-lines file `replay FILE` reads: JSON bodies as
JSON values, streams as text, and read back it gives the exchanges a replay from the store sees."""

from __future__ import annotations

import io
from pathlib import Path

import orjson

from runguard.proxy.guard.offline.replay import from_rows, read_file
from runguard.proxy.store import StoreReader
from runguard.proxy.store.export import FIELDS, export, line
from runguard.proxy.store.records import RecordedBody
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory

CHAT = "/v1/chat/completions"
STREAM = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'


async def _filled(make_sink: SinkFactory, store_url: str) -> StoreReader:
    sink = make_sink(record_bodies=True)
    request = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
    sink.submit(factory.request("run-x", 1, body=RecordedBody(CHAT, "", request, b'{"choices":[]}', 200)))
    sink.submit(factory.request("run-x", 2, streamed=True, body=RecordedBody(CHAT, "", request, STREAM, 200)))
    stopped = RecordedBody(CHAT, "", request, b"", None)
    sink.submit(factory.request("run-x", 3, status=None, blocked_by="spiral", body=stopped))
    failed = RecordedBody("/v1beta/models/gemini-2.0-flash:generateContent", "alt=json", b"{}", b"", None)
    sink.submit(factory.request("run-y", 1, at=factory.T0 + 10, status=None, error="upstream_timeout", body=failed))
    sink.submit(factory.request("run-y", 2, at=factory.T0 + 11))  # no body recorded: not exported
    await sink.close()
    return StoreReader.open(store_url)


async def test_every_recorded_exchange_is_one_line_with_the_documented_fields(
    make_sink: SinkFactory, store_url: str
) -> None:
    reader = await _filled(make_sink, store_url)
    out = io.BytesIO()
    try:
        written, runs = await export(reader.recorded.exchanges(), out)
    finally:
        await reader.close()
    assert (written, runs) == (4, {"run-x", "run-y"})
    lines = [orjson.loads(each) for each in out.getvalue().splitlines()]
    assert all(tuple(each) == FIELDS for each in lines)
    plain, streamed, stopped, failed = lines
    assert plain["request"]["messages"] == [{"role": "user", "content": "hi"}]  # JSON stays JSON
    assert plain["response"] == {"choices": []}
    assert streamed["response"] == STREAM.decode()  # a stream is text
    assert (stopped["answered_locally"], stopped["status"], stopped["response"]) == (True, None, "")
    assert (failed["answered_locally"], failed["error"], failed["query"]) == (False, "upstream_timeout", "alt=json")
    assert [each["index"] for each in lines] == [1, 2, 3, 1]


async def test_the_file_reads_back_to_the_exchanges_a_replay_from_the_store_sees(
    make_sink: SinkFactory, store_url: str, tmp_path: Path
) -> None:
    reader = await _filled(make_sink, store_url)
    path = tmp_path / "traffic.jsonl"
    try:
        with path.open("wb") as out:
            await export(reader.recorded.exchanges(), out)
        from_store = [exchange async for exchange in from_rows(reader.recorded.exchanges())]
    finally:
        await reader.close()
    from_file = read_file(path)
    assert [e.run_id for e in from_file] == ["run-x", "run-x", "run-x", "run-y"]
    for read_back, stored in zip(from_file, from_store, strict=True):
        assert (read_back.run_id, read_back.at, read_back.path, read_back.status) == (
            stored.run_id,
            stored.at,
            stored.path,
            stored.status,
        )
        assert (read_back.answered_locally, read_back.error, read_back.key_hash) == (
            stored.answered_locally,
            stored.error,
            stored.key_hash,
        )
        assert orjson.loads(read_back.request) == orjson.loads(stored.request)
    assert from_file[1].response == STREAM


def test_a_body_that_only_looks_like_json_is_kept_as_text() -> None:
    row = {
        "run_id": "r",
        "at": 1.0,
        "path": CHAT,
        "query": "",
        "status": 200,
        "key_hash": "k",
        "request": b"{not json",
        "response": b"\xff\xfe",
        "blocked_by": None,
        "error": None,
        "request_index": 1,
        "agent": "",
        "model": "m",
    }
    written = orjson.loads(line(row))
    assert written["request"] == "{not json"
    assert written["response"] == "\ufffd\ufffd"
    assert line(row).endswith(b"\n")
