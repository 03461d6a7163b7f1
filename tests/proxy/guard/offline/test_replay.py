"""Replaying recorded traffic offline: a looping run is stopped where the live proxy would have stopped
it and what came after counts as avoided; healthy runs, shadow mode, unanswered and failed exchanges and
unreadable ones are reported as they were; the JSON-lines file is read in arrival order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.offline.replay import Exchange, ReplayReport, read_file, replay
from tests.e2e import payloads
from tests.support.guards import guard_settings

T0 = 1_800_000_000.0


CHAT = "/v1/chat/completions"


SYSTEM = {"role": "system", "content": "You extract data."}


def _looping(run_id: str, turns: int, start: float = T0) -> list[Exchange]:
    """An agent calling parse_document with new arguments and always getting the same error back."""
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Total?"}]
    exchanges = []
    for turn in range(turns):
        call = (f"call_{turn}", "parse_document", orjson.dumps({"document": "a.pdf", "n": turn}).decode())
        response = payloads.chat_completion(tool_calls=[call], usage=(1000, 50))
        request = {"model": "gpt-4o-mini", "messages": list(messages)}
        exchanges.append(Exchange(run_id, start + turn, CHAT, orjson.dumps(request), orjson.dumps(response)))
        messages.append(response["choices"][0]["message"])
        messages.append({"role": "tool", "tool_call_id": call[0], "content": '{"status": "error", "data": null}'})
    return exchanges


def _healthy(run_id: str) -> list[Exchange]:
    request = {"model": "gpt-4o-mini", "messages": [SYSTEM, {"role": "user", "content": "Hello"}]}
    answer = orjson.dumps(payloads.chat_completion("Hi!"))
    return [Exchange(run_id, T0 + 0.5, CHAT, orjson.dumps(request), answer)]


async def _replay(exchanges: list[Exchange], **sections: Any) -> ReplayReport:
    return await replay(exchanges, Settings.model_validate(sections), default_detectors())


async def test_a_looping_run_stops_where_the_proxy_would_have_and_the_rest_is_avoided() -> None:
    report = await _replay([*_looping("loop", 8), *_healthy("fine")])
    loop, fine = report.runs["loop"], report.runs["fine"]
    assert loop.detector == "non_progress" and loop.reason
    assert loop.stopped_at is not None and loop.stopped_at < 8
    assert loop.requests + loop.avoided_requests == 8
    assert loop.avoided_usd > 0 and loop.usd > 0
    assert (fine.requests, fine.stopped_at, fine.avoided_requests) == (1, None, 0)
    assert [trip.detector for trip in report.trips if trip.action == "block"][:1] == ["non_progress"]
    assert report.as_json()["runs"][0]["run_id"] == "loop"


async def test_in_shadow_mode_nothing_is_stopped_and_the_trips_are_warnings() -> None:
    report = await _replay(_looping("loop", 8), guard={"shadow": True})
    loop = report.runs["loop"]
    assert (loop.requests, loop.stopped_at, loop.avoided_requests) == (8, None, 0)
    assert report.trips and {trip.action for trip in report.trips} == {"warn"}


async def test_exchanges_no_adapter_reads_are_skipped_not_counted() -> None:
    unknown = Exchange("other", T0, "/v1/embeddings", b'{"input": "x"}', b"{}")
    broken = Exchange("other", T0 + 1, CHAT, b"{not json", b"{}")
    report = await _replay([unknown, broken])
    assert (report.skipped, report.runs) == (2, {})


async def test_anthropic_traffic_recorded_on_the_proxy_root_is_read_as_anthropic() -> None:
    """A Claude Code or anthropic-SDK client pointed at the proxy root sends `/v1/messages`, routed live by its
    `anthropic-version` header; the record keeps no headers, and its exchanges are read all the same."""
    ask = {"role": "user", "content": "Fix the test."}
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q"}}
    usage = {"input_tokens": 3, "cache_read_input_tokens": 20_000, "output_tokens": 9}
    answer = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929"}
    answer |= {"content": [use], "stop_reason": "tool_use", "usage": usage}
    request = {"model": "claude-sonnet-4-5-20250929", "max_tokens": 1024, "messages": [ask]}
    body, said = orjson.dumps(request), orjson.dumps(answer)
    report = await _replay([Exchange("cc", T0, "/v1/messages", body, said), *_healthy("fine")])
    assert report.skipped == 0 and report.runs["cc"].requests == 1 and report.runs["cc"].usd > 0


async def test_answered_locally_and_failed_exchanges_are_fed_as_they_were() -> None:
    (asked,) = _healthy("run")
    stopped_live = Exchange("run", T0 + 1, CHAT, asked.request, b"", status=None, answered_locally=True)
    failed = Exchange("run", T0 + 2, CHAT, asked.request, b"", status=None, error="upstream_timeout")
    report = await _replay([asked, stopped_live, failed])
    run = report.runs["run"]
    assert (run.requests, run.unanswered, run.stopped_at) == (3, 1, None)


async def test_an_async_source_replays_as_a_list_does_and_progress_is_reported() -> None:
    exchanges = _looping("loop", 8)

    async def rows() -> Any:
        for exchange in exchanges:
            yield exchange

    fed: list[int] = []
    report = await replay(rows(), Settings(), default_detectors(), fed=lambda: fed.append(1))
    assert len(fed) == 8
    assert report.as_json() == (await _replay(exchanges)).as_json()


def test_a_file_is_read_in_arrival_order_one_run_at_a_time(tmp_path: Path) -> None:
    lines = [
        {"run_id": "b", "at": T0 + 2, "path": CHAT, "request": {"model": "m"}, "response": "data: [DONE]\n\n"},
        {"run_id": "a", "at": T0 + 1, "path": CHAT, "request": {"model": "m"}, "status": None, "error": "reset"},
        {"run_id": "a", "at": T0, "path": CHAT, "request": "{}", "key_hash": "k_1", "answered_locally": True},
    ]
    path = tmp_path / "traffic.jsonl"
    path.write_bytes(b"\n\n".join(orjson.dumps(each) for each in lines) + b"\n")
    read: list[int] = []
    everything = read_file(path, read=read.append)
    assert [(e.run_id, e.at) for e in everything] == [("a", T0), ("a", T0 + 1), ("b", T0 + 2)]
    assert sum(read) == path.stat().st_size
    first, failed, streamed = everything
    assert (first.key_hash, first.answered_locally, first.request, first.response) == ("k_1", True, b"{}", b"")
    assert (failed.status, failed.error, failed.key_hash) == (None, "reset", "replay")
    assert (streamed.status, streamed.response) == (200, b"data: [DONE]\n\n")
    assert orjson.loads(streamed.request) == {"model": "m"}
    assert [e.run_id for e in read_file(path, run_id="b")] == ["b"]


@pytest.mark.parametrize("bad", [b"{not json", b'{"at": 1, "path": "/v1/chat/completions", "request": {}}', b"[1]"])
def test_a_line_that_is_no_exchange_is_refused_naming_it(tmp_path: Path, bad: bytes) -> None:
    path = tmp_path / "traffic.jsonl"
    good = orjson.dumps({"run_id": "a", "at": T0, "path": CHAT, "request": {}})
    path.write_bytes(good + b"\n" + bad + b"\n")
    with pytest.raises(ValueError, match=f"{path.name}:2: not a recorded exchange"):
        read_file(path)


ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "find the invoice"}]}


def line(run_id: str, at: float, **more: Any) -> bytes:
    item = {
        "run_id": run_id,
        "at": at,
        "path": "/v1/chat/completions",
        "request": ASK,
        "response": payloads.chat_completion("Still looking.", usage=(1000, 100)),
        **more,
    }
    return orjson.dumps(item) + b"\n"


def test_a_file_s_exchanges_come_in_arrival_order_of_one_run_when_asked(tmp_path: Path) -> None:
    recorded = tmp_path / "runs.jsonl"
    recorded.write_bytes(line("a", 30.0) + b"\n" + line("b", 10.0) + line("a", 20.0, status=None, error="timeout"))
    read: list[int] = []
    every = read_file(recorded, read=read.append)
    assert [(e.run_id, e.at) for e in every] == [("b", 10.0), ("a", 20.0), ("a", 30.0)]
    assert sum(read) == recorded.stat().st_size
    (failed, _) = read_file(recorded, "a")
    assert (failed.status, failed.error, failed.answered_locally) == (None, "timeout", False)


def test_a_line_that_is_no_exchange_is_named(tmp_path: Path) -> None:
    recorded = tmp_path / "bad.jsonl"
    recorded.write_bytes(line("a", 1.0) + b'{"run_id": "a"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a recorded exchange"):
        read_file(recorded)


async def test_a_run_past_its_cap_is_stopped_where_it_would_have_been_and_the_rest_counted_as_avoided(
    tmp_path: Path,
) -> None:
    recorded = tmp_path / "runs.jsonl"
    recorded.write_bytes(b"".join(line("looping", 100.0 + i) for i in range(5)) + line("short", 50.0))
    settings = guard_settings(guard={"detectors": {"max_requests": {"limit": 3}}})
    fed: list[int] = []
    report = await replay(read_file(recorded), settings, default_detectors(), lambda: fed.append(1))
    assert len(fed) == 6 and report.skipped == 0
    looping, short = report.runs["looping"], report.runs["short"]
    assert (looping.stopped_at, looping.detector) == (4, "max_requests")
    # The stopped request and the one after it never go upstream: their recorded cost is avoided.
    assert (looping.requests, looping.avoided_requests) == (3, 2)
    assert looping.avoided_usd == pytest.approx(looping.usd * 2 / 3)
    assert short.stopped_at is None and short.requests == 1 and short.usd > 0
    assert next(t.detector for t in report.trips if t.run_id == "looping") == "max_requests"
    assert report.as_json()["runs"][0]["run_id"] in ("looping", "short")
