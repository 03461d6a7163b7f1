"""Webhook alerts: real POSTs to a local receiver; retries, timeouts, a bounded queue, never on the request path."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from aiohttp import web

from runguard.config.settings import AlertSettings
from runguard.detectors.max_requests import MaxRequests
from runguard.detectors.retry_cascade import RetryCascade
from runguard.proxy.observe.alerts import Alerts, alert_payload, alert_text
from runguard.proxy.serve.server import Running, start
from runguard.proxy.store.records import TripRecord
from tests.e2e import payloads
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

SECRET_PATH = "/hooks/T000/B000/s3cr3t"


class Receiver:
    """A webhook on loopback: answers `statuses` in turn (then 200), or hangs."""

    def __init__(self, statuses: tuple[int, ...] = (), hang: bool = False) -> None:
        self.statuses = list(statuses)
        self.hang = hang
        self.bodies: list[dict[str, Any]] = []
        self._running: Running | None = None

    @property
    def url(self) -> str:
        assert self._running is not None
        return self._running.url + SECRET_PATH

    async def _handle(self, request: web.Request) -> web.Response:
        self.bodies.append(orjson.loads(await request.read()))
        if self.hang:
            await asyncio.sleep(3600)
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post(SECRET_PATH, self._handle)
        self._running = await start(app, "127.0.0.1", 0, grace=0.1)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._running is not None
        await self._running.stop()


def trip(action: str = "block", run_id: str = "run-alert") -> TripRecord:
    return TripRecord(
        run_id, "k_9f", "spiral", action, "3 near-identical searches", "run", 6, 1.0, 0.12, 900, 1.5, {"tool": "search"}
    )


@contextlib.asynccontextmanager
async def running(alerts: Alerts) -> AsyncIterator[None]:
    async with contextlib.asynccontextmanager(alerts.lifetime)(web.Application()):
        yield


async def until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def until_failure_counted(proxy_url: str) -> None:
    """Until the proxy's metrics count one failed webhook delivery (the attempt timed out)."""
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            async with session.get(proxy_url + "/runguard/metrics") as response:
                if 'runguard_alerts_total{outcome="failed"} 1.0' in await response.text():
                    return
            await asyncio.sleep(0.02)
    raise AssertionError("the timed-out delivery was not counted")


async def test_failed_deliveries_are_retried_until_one_succeeds() -> None:
    outcomes: list[str] = []
    async with Receiver(statuses=(500, 503)) as receiver:
        alerts = Alerts(AlertSettings(webhooks=(receiver.url,), retries=3), outcome=outcomes.append, backoff=0.01)
        async with running(alerts):
            alerts.tripped(trip())
            await until(lambda: outcomes == ["delivered"])
    assert len(receiver.bodies) == 3
    body = receiver.bodies[-1]
    assert body["detector"] == "spiral" and body["run_id"] == "run-alert" and body["evidence"] == {"tool": "search"}
    assert "runguard-proxy reset run-alert" in body["text"] and "spiral" in body["text"]


async def test_client_errors_are_not_retried_and_the_url_secret_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcomes: list[str] = []
    async with Receiver(statuses=(404, 404, 404)) as receiver:
        alerts = Alerts(AlertSettings(webhooks=(receiver.url,), retries=3), outcome=outcomes.append, backoff=0.01)
        async with running(alerts):
            alerts.tripped(trip())
            await until(lambda: outcomes == ["failed"])
    assert len(receiver.bodies) == 1
    warnings = [r.getMessage() for r in caplog.records if r.name == "runguard.alerts"]
    assert warnings and "HTTP 404" in warnings[0]
    assert all("s3cr3t" not in w for w in warnings)


async def test_warn_trips_are_not_sent() -> None:
    outcomes: list[str] = []
    async with Receiver() as receiver:
        alerts = Alerts(AlertSettings(webhooks=(receiver.url,)), outcome=outcomes.append)
        async with running(alerts):
            alerts.tripped(trip("warn"))
            alerts.tripped(trip("block"))
            await until(lambda: outcomes == ["delivered"])
    assert [b["action"] for b in receiver.bodies] == ["block"]


async def test_a_dead_webhook_fills_a_bounded_queue_then_alerts_are_dropped() -> None:
    outcomes: list[str] = []
    async with Receiver(hang=True) as receiver:
        alerts = Alerts(
            AlertSettings(webhooks=(receiver.url,), timeout=0.2, retries=0),
            outcome=outcomes.append,
            queue_size=2,
            workers=1,
        )
        started = time.perf_counter()
        async with running(alerts):
            for i in range(10):
                alerts.tripped(trip(run_id=f"run-{i}"))
            assert outcomes.count("dropped") == 8
        assert time.perf_counter() - started < 2.0  # shutdown waits one attempt window, not forever


async def test_through_the_proxy_a_hanging_webhook_never_delays_the_request(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion())
    async with Receiver(hang=True) as receiver:
        settings = settings_for(
            upstream.url,
            alerts={"webhooks": [receiver.url], "timeout": 0.5, "retries": 0},
            guard={"detectors": {"max_requests": {"limit": 1}}},
        )
        proxy = await start_proxy(settings, detectors=[MaxRequests()])
        sdk = openai.AsyncOpenAI(
            base_url=proxy.url + "/v1", api_key="sk-test-abc", max_retries=0, default_headers={"X-Run-Id": "r-h"}
        )
        try:
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
            began = time.perf_counter()
            with pytest.raises(openai.RateLimitError):
                await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
            assert time.perf_counter() - began < 0.4  # answered while the webhook hangs
            await until(lambda: len(receiver.bodies) == 1)
            assert receiver.bodies[0]["detector"] == "max_requests" and receiver.bodies[0]["run_id"] == "r-h"
            assert "sk-test-abc" not in orjson.dumps(receiver.bodies[0]).decode()
            await until_failure_counted(proxy.url)
        finally:
            await sdk.close()
            stopping = time.perf_counter()
            await proxy.stop()
            assert time.perf_counter() - stopping < 3.0


async def test_a_key_model_trip_names_the_reset_that_reopens_it(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.json({"error": {"message": "boom", "type": "server_error"}}, status=500)
    async with Receiver() as receiver:
        settings = settings_for(upstream.url, alerts={"webhooks": [receiver.url]})
        proxy = await start_proxy(settings, detectors=[RetryCascade()])
        sdk = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-test-abc", max_retries=0)
        try:
            for _ in range(2):  # two upstream failures open the key+model breaker
                with pytest.raises(openai.InternalServerError):
                    await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
            await until(lambda: len(receiver.bodies) == 1)
        finally:
            await sdk.close()
            await proxy.stop()
    alert = receiver.bodies[0]
    assert alert["detector"] == "retry_cascade" and alert["scope"] == "key_model"
    assert f"runguard-proxy reset --key {alert['key_hash']} --model gpt-4o-mini" in alert["text"]


EVIL_RUN = "<!channel> URGENT <https://evil.example/login|click to reset>"


def test_slack_text_escapes_every_client_and_model_chosen_string() -> None:
    record = TripRecord(
        "run-<@U0ADMIN>", "k_9f", "repeat_call", "block", "tool <!here> & <http://x|y> called 4 times", "run",
        6, 1.0, 0.12, 900, 1.5, {"tool": "<!here>"},
    )  # fmt: skip
    text = alert_text(record)
    assert "<" not in text and ">" not in text
    assert "run-&lt;@U0ADMIN&gt;" in text and "tool &lt;!here&gt; &amp; &lt;http://x|y&gt;" in text
    assert orjson.loads(alert_payload(record))["run_id"] == "run-<@U0ADMIN>"  # the raw fields stay as sent


async def test_through_the_proxy_a_run_id_cannot_ping_the_channel_or_disguise_a_link(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion())
    async with Receiver() as receiver:
        settings = settings_for(
            upstream.url, alerts={"webhooks": [receiver.url]}, guard={"detectors": {"max_requests": {"limit": 1}}}
        )
        proxy = await start_proxy(settings, detectors=[MaxRequests()])
        sdk = openai.AsyncOpenAI(
            base_url=proxy.url + "/v1", api_key="sk-test-abc", max_retries=0, default_headers={"X-Run-Id": EVIL_RUN}
        )
        try:
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
            with pytest.raises(openai.RateLimitError):
                await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
            await until(lambda: len(receiver.bodies) == 1)
        finally:
            await sdk.close()
            await proxy.stop()
    text = receiver.bodies[0]["text"]
    assert "<" not in text and ">" not in text  # Slack reads <!channel> and <url|label> only between < and >
    assert "&lt;!channel&gt; URGENT &lt;https://evil.example/login|click to reset&gt;" in text
    assert receiver.bodies[0]["run_id"] == EVIL_RUN


async def test_through_the_proxy_a_run_on_a_model_with_no_price_is_alerted_unpriced_never_at_zero(
    upstream: FakeUpstream,
) -> None:
    upstream.script = lambda r: Reply.json(payloads.chat_completion(usage=(100_000, 1000), model=r.json()["model"]))
    async with Receiver() as receiver:
        settings = settings_for(
            upstream.url, alerts={"webhooks": [receiver.url]}, guard={"detectors": {"max_requests": {"limit": 1}}}
        )
        proxy = await start_proxy(settings, detectors=[MaxRequests()])
        sdk = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-test-abc", max_retries=0)
        try:
            for model, run_id in (("acme-coder-9", "r-unpriced"), ("gpt-4o-mini", "r-priced")):
                headers = {"X-Run-Id": run_id}
                ask: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "go"}]}
                await sdk.chat.completions.create(**ask, extra_headers=headers)
                with pytest.raises(openai.RateLimitError):
                    await sdk.chat.completions.create(**ask, extra_headers=headers)
            await until(lambda: len(receiver.bodies) == 2)
        finally:
            await sdk.close()
            await proxy.stop()
    alerts = {body["run_id"]: body for body in receiver.bodies}
    unpriced, priced = alerts["r-unpriced"], alerts["r-priced"]
    assert unpriced["unpriced"] is True and "Spent: unpriced" in unpriced["text"] and "$0.0000" not in unpriced["text"]
    assert priced["unpriced"] is False and "Spent $0.0156," in priced["text"]
