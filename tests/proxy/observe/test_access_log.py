"""Access log: one JSON line per request through the real proxy, with no key and no content."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import openai
import orjson
import pytest

from runguard.detectors.max_requests import MaxRequests
from runguard.proxy.observe.access_log import AccessLog, access_line
from runguard.proxy.store.records import RequestRecord, VerdictRecord
from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.support.processes import start_serve
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

KEY = "sk-test-abc"
PROMPT = "the secret plan is in the attic"
FIELDS = {
    "ts",
    "run_id",
    "key_hash",
    "index",
    "agent",
    "model",
    "provider",
    "api",
    "streamed",
    "status",
    "tokens",
    "usd",
    "upstream_ms",
    "overhead_ms",
    "blocked_by",
    "warnings",
    "error",
}


def access_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The JSON lines the proxy wrote to stdout (written at the latest when it stopped)."""
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


async def run_requests(upstream: FakeUpstream, access_log: bool, count: int, model: str = "gpt-4o-mini") -> None:
    upstream.script = lambda r: Reply.json(payloads.chat_completion("the answer is 42", usage=(20, 4), model=model))
    settings = settings_for(
        upstream.url, log={"access_log": access_log}, guard={"detectors": {"max_requests": {"limit": 2}}}
    )
    running = await start_proxy(settings, detectors=[MaxRequests()])
    sdk = openai.AsyncOpenAI(
        base_url=running.url + "/v1", api_key=KEY, max_retries=0, default_headers={"X-Run-Id": "run-log"}
    )
    try:
        for _ in range(count):
            with contextlib.suppress(openai.RateLimitError):
                await sdk.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}])
    finally:
        await sdk.close()
        await running.stop()


async def test_one_json_line_per_request_on_stdout_without_key_or_content(
    upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_requests(upstream, access_log=True, count=3)
    lines = access_lines(capsys)
    assert len(lines) == 3
    entries = [orjson.loads(line) for line in lines]
    for entry in entries:
        assert set(entry) == FIELDS
        assert entry["run_id"] == "run-log"
        assert entry["key_hash"] and entry["key_hash"] != KEY
        assert entry["provider"] == "openai" and entry["api"] == "chat" and entry["model"] == "gpt-4o-mini"
    first, _, blocked = entries
    assert first["index"] == 1 and first["status"] == 200 and first["streamed"] is False
    assert first["tokens"]["input"] == 20 and first["tokens"]["output"] == 4
    assert first["upstream_ms"] is not None and first["overhead_ms"] >= 0 and first["usd"] > 0
    assert first["blocked_by"] is None and first["error"] is None
    assert blocked["blocked_by"] == "max_requests" and blocked["status"] == 429 and blocked["upstream_ms"] is None
    for line in lines:
        for secret in (KEY, PROMPT, "attic", "the answer is 42"):
            assert secret not in line


async def test_a_model_with_no_price_is_logged_with_a_null_cost_never_zero(
    upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_requests(upstream, access_log=True, count=1, model="acme-coder-9")
    (line,) = access_lines(capsys)
    entry = orjson.loads(line)
    assert entry["model"] == "acme-coder-9" and entry["tokens"]["input"] == 20 and entry["usd"] is None
    assert '"usd":null' in line


async def test_access_log_off_writes_nothing(upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    await run_requests(upstream, access_log=False, count=1)
    assert access_lines(capsys) == []


def _record(index: int) -> RequestRecord:
    return RequestRecord("r", "k_1", index, 1_700_000_000.0, "a", "gpt-4o", "openai", "chat", False, 200)


async def test_lines_wait_at_most_the_interval_then_go_out_together() -> None:
    stream = io.BytesIO()
    log = AccessLog(stream, interval=0.05)
    log.request_done(_record(1))
    log.request_done(_record(2))
    assert stream.getvalue() == b""  # batched: nothing written per request
    await eventually(lambda: len(stream.getvalue().splitlines()) == 2, within=5.0)  # the lines were written
    lines = stream.getvalue().splitlines()
    assert [orjson.loads(line)["index"] for line in lines] == [1, 2]


async def test_a_full_batch_is_written_at_once_and_shutdown_writes_the_rest() -> None:
    stream = io.BytesIO()
    log = AccessLog(stream, interval=60.0, max_pending=3)
    for index in range(1, 5):
        log.request_done(_record(index))
    assert [orjson.loads(line)["index"] for line in stream.getvalue().splitlines()] == [1, 2, 3]
    lifetime = log.lifetime(None)
    await anext(lifetime)
    with contextlib.suppress(StopAsyncIteration):
        await anext(lifetime)
    assert [orjson.loads(line)["index"] for line in stream.getvalue().splitlines()] == [1, 2, 3, 4]


def test_a_closed_stream_loses_lines_without_raising() -> None:
    stream = io.BytesIO()
    stream.close()
    log = AccessLog(stream)
    log.request_done(_record(1))  # no event loop here: written (and lost) at once
    log.flush()


def test_warnings_list_the_warning_detectors_only() -> None:
    record = RequestRecord(
        run_id="r",
        key_hash="k_1",
        index=4,
        at=1_700_000_000.25,
        agent="writer",
        model="gpt-4o",
        provider="openai",
        api="responses",
        streamed=True,
        status=200,
        verdicts=(VerdictRecord("tool_storm", "warn", "9 calls"), VerdictRecord("spiral", "block", "similar")),
    )
    entry = orjson.loads(access_line(record))
    assert entry["warnings"] == ["tool_storm"]
    assert entry["ts"] == "2023-11-14T22:13:20.250000Z"
    assert entry["upstream_ms"] is None


async def test_serve_writes_the_lines_to_stdout_and_its_messages_elsewhere(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = lambda r: Reply.json(payloads.chat_completion("the answer is 42", usage=(20, 4)))
    env = {
        "RUNGUARD_OPENAI_UPSTREAM": upstream.url,
        "RUNGUARD_DATABASE_URL": "",
        "RUNGUARD_HOME": str(tmp_path / "home"),
        "RUNGUARD_KEY_SALT": "test-salt",
    }
    served = await start_serve(env, tmp_path)
    sdk = openai.AsyncOpenAI(
        base_url=served.url + "/v1", api_key=KEY, max_retries=0, default_headers={"X-Run-Id": "run-serve-log"}
    )
    try:
        for _ in range(2):
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": PROMPT}])
    finally:
        await sdk.close()
        assert await served.stop() == 0, served.diagnostics()
    out = [line.decode() for line in served.stdout]
    entries = [orjson.loads(line) for line in out if line.startswith("{")]
    assert [(e["run_id"], e["index"], e["status"]) for e in entries] == [
        ("run-serve-log", 1, 200),
        ("run-serve-log", 2, 200),
    ]
    assert all(line.startswith("{") for line in out), out  # stdout is the JSON lines alone: no banner mixed in
    stderr_only = [line for line in served.output if line not in served.stdout]
    assert not any(line.startswith(b"{") for line in stderr_only)
    assert any(b"listening on" in line for line in stderr_only)
    assert any(b"shutting down" in line for line in stderr_only)
