"""Access log: one JSON line per request through the real proxy, with no key and no content."""

from __future__ import annotations

import contextlib
import logging

import openai
import orjson
import pytest

from runguard.detectors.max_requests import MaxRequests
from runguard.proxy.access_log import access_line
from runguard.proxy.records import RequestRecord, VerdictRecord
from tests.e2e import payloads
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


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "runguard.access"]


async def run_requests(upstream: FakeUpstream, access_log: bool, count: int) -> None:
    upstream.script = lambda r: Reply.json(payloads.chat_completion("the answer is 42", usage=(20, 4)))
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
                await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": PROMPT}])
    finally:
        await sdk.close()
        await running.stop()


async def test_one_json_line_per_request_without_key_or_content(
    upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="runguard.access")
    await run_requests(upstream, access_log=True, count=3)
    lines = access_lines(caplog)
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


async def test_access_log_off_writes_nothing(upstream: FakeUpstream, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="runguard.access")
    await run_requests(upstream, access_log=False, count=1)
    assert access_lines(caplog) == []


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
