"""Named OpenAI-compatible upstreams through the real proxy: two at once, with the openai SDK and openai-agents.

`alpha` (priced by its own table) and `beta` (no table) sit behind one proxy beside OpenAI's upstream.
Each is reached at `/<name>/v1`, guarded exactly like OpenAI, and gets only its own requests and keys.
A model with no price shows as unpriced, never as $0: its spend adds nothing, while step caps still hold.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool

from runguard.config.settings import Settings
from tests.e2e import payloads
from tests.e2e.agents import chat_agent, chat_script, soft_error_tool
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

ALPHA_MODEL, BETA_MODEL = "llama-3.1-8b-instant", "qwen2.5-coder:7b"
KEY_A, KEY_B = "gsk-alpha-key-0001", "beta-local-key-0002"


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeUpstream, FakeUpstream]]:
    alpha, beta = await FakeUpstream().start(), await FakeUpstream().start()
    yield alpha, beta
    await alpha.stop()
    await beta.stop()


def _settings(openai_url: str, alpha: FakeUpstream, beta: FakeUpstream) -> Settings:
    compatible = {
        "alpha": {"url": alpha.url + "/v1", "prices": {ALPHA_MODEL: {"input": 0.05, "output": 0.08}}},
        "beta": {"url": beta.url},
    }
    return settings_for(openai_url, upstreams={"compatible": compatible})


@pytest.fixture
async def proxy(
    upstream: FakeUpstream, fakes: tuple[FakeUpstream, FakeUpstream], sink: ListSink
) -> AsyncIterator[tuple[str, Settings]]:
    settings = _settings(upstream.url, *fakes)
    running = await start_proxy(settings, sink=sink)
    yield running.url, settings
    await running.stop()


def _client(url: str, name: str, key: str, run: str | None = None) -> openai.AsyncOpenAI:
    headers = {"X-Run-Id": run} if run else None
    return openai.AsyncOpenAI(base_url=f"{url}/{name}/v1", api_key=key, default_headers=headers)


def _answer(model: str) -> Any:
    def script(received: Received) -> Reply:
        if received.path == "/v1/responses":
            return Reply.json(payloads.response_object("responses from " + model))
        return Reply.json(payloads.chat_completion("hi from " + model, model=model, usage=(1000, 500)))

    return script


async def test_each_upstream_gets_only_its_own_requests_and_keys(
    upstream: FakeUpstream, fakes: tuple[FakeUpstream, FakeUpstream], proxy: tuple[str, Settings], sink: ListSink
) -> None:
    alpha, beta = fakes
    url, _ = proxy
    alpha.script, beta.script = _answer(ALPHA_MODEL), _answer(BETA_MODEL)
    to_alpha = _client(url, "alpha", KEY_A)
    raw = await to_alpha.chat.completions.with_raw_response.create(
        model=ALPHA_MODEL,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-goog-api-key": "AIza-stray-key"},
    )
    assert raw.http_response.content == orjson.dumps(
        payloads.chat_completion("hi from " + ALPHA_MODEL, model=ALPHA_MODEL, usage=(1000, 500))
    )
    to_beta = _client(url, "beta", KEY_B)
    answer = await to_beta.chat.completions.create(model=BETA_MODEL, messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "hi from " + BETA_MODEL
    said = await to_beta.responses.create(model=BETA_MODEL, input="hi")  # Responses, where the service has it
    assert said.output_text == "responses from " + BETA_MODEL
    await to_alpha.models.list()  # any other path under the prefix: forwarded to that upstream only
    (a_chat, a_models), (b_chat, b_responses) = alpha.received, beta.received
    assert (a_chat.path, a_models.path) == ("/v1/chat/completions", "/v1/models")
    assert (b_chat.path, b_responses.path) == ("/v1/chat/completions", "/v1/responses")
    assert a_chat.headers["Authorization"] == f"Bearer {KEY_A}" and "x-goog-api-key" not in a_chat.headers
    assert b_chat.headers["Authorization"] == f"Bearer {KEY_B}"
    assert KEY_A not in json.dumps([r.headers for r in beta.received]) and upstream.received == []
    chat_a, chat_b, responses_b = requests_of(sink)
    assert (chat_a.provider, chat_a.api, chat_b.provider) == ("alpha", "chat", "beta")
    assert (responses_b.provider, responses_b.api) == ("beta", "responses")
    assert chat_a.key_hash != chat_b.key_hash
    await to_alpha.close()
    await to_beta.close()


async def test_a_model_without_a_price_is_unpriced_never_zero_and_its_caps_hold(
    fakes: tuple[FakeUpstream, FakeUpstream], proxy: tuple[str, Settings], sink: ListSink
) -> None:
    alpha, beta = fakes
    url, _ = proxy
    alpha.script, beta.script = _answer(ALPHA_MODEL), _answer(BETA_MODEL)
    first = _client(url, "alpha", KEY_A, "priced")
    priced = await first.chat.completions.create(model=ALPHA_MODEL, messages=[{"role": "user", "content": "hi"}])
    assert priced.usage is not None
    await first.close()
    capped = _client(url, "beta", KEY_B, "unpriced")
    tight = {"X-RunGuard-Max-Requests": "2", "X-RunGuard-Budget-Usd": "0.0000001"}
    for _ in range(2):  # a budget cannot stop on a price it does not know; the step cap does
        await capped.chat.completions.create(
            model=BETA_MODEL, messages=[{"role": "user", "content": "again"}], extra_headers=tight
        )
    with pytest.raises(openai.RateLimitError) as caught:
        await capped.chat.completions.create(
            model=BETA_MODEL, messages=[{"role": "user", "content": "again"}], extra_headers=tight
        )
    assert "max_requests" in str(caught.value.message)
    records = requests_of(sink)
    alpha_record = next(r for r in records if r.provider == "alpha")
    assert alpha_record.usd == pytest.approx((1000 * 0.05 + 500 * 0.08) / 1e6) and not alpha_record.unpriced
    beta_records = [r for r in records if r.provider == "beta"]
    answered = [r for r in beta_records if r.blocked_by is None]  # the one stopped here used nothing: no cost
    assert answered and all(r.usd == 0 and r.unpriced for r in answered)
    assert len(beta.received) == 2
    await capped.close()


async def test_a_loop_on_a_compatible_upstream_is_stopped_without_a_retry(
    fakes: tuple[FakeUpstream, FakeUpstream], proxy: tuple[str, Settings], sink: ListSink
) -> None:
    _, beta = fakes
    url, _ = proxy
    beta.script = chat_script(50)
    client = _client(url, "beta", KEY_B, "compat-loop")  # the SDK's default two retries
    with pytest.raises(openai.RateLimitError) as caught:
        await chat_agent(client, soft_error_tool, max_steps=20, model=BETA_MODEL)
    assert caught.value.code == "runguard_non_progress"
    assert len(beta.received) == len(requests_of(sink)) - 1  # the stop was not retried
    (trip,) = [trip for trip in trips_of(sink) if trip.detector == "non_progress"]
    assert trip.run_id == "compat-loop" and {r.provider for r in requests_of(sink)} == {"beta"}
    await client.close()


@function_tool
def parse_document(document: str, attempt: int) -> str:
    """Parse a document."""
    return json.dumps({"status": "partial_parse_error", "data": None})


async def test_openai_agents_on_a_compatible_upstream_is_stopped(
    fakes: tuple[FakeUpstream, FakeUpstream], proxy: tuple[str, Settings], sink: ListSink
) -> None:
    alpha, beta = fakes
    url, _ = proxy

    def loop(received: Received) -> Reply:
        turn = sum(1 for m in received.json()["messages"] if m["role"] == "tool")
        args = json.dumps({"document": "invoice.pdf", "attempt": turn})
        return Reply.json(
            payloads.chat_completion(tool_calls=[(f"call_{turn}", "parse_document", args)], model=ALPHA_MODEL)
        )

    alpha.script = loop
    client = _client(url, "alpha", KEY_A, "agents-compat")
    agent = Agent(
        name="Extractor",
        instructions="You extract invoice totals. Use parse_document.",
        tools=[parse_document],
        model=OpenAIChatCompletionsModel(model=ALPHA_MODEL, openai_client=client),
    )
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(agent, "Extract the invoice total.", max_turns=20)
    assert caught.value.code == "runguard_non_progress" and beta.received == []
    assert {r.provider for r in requests_of(sink)} == {"alpha"} and sum(r.usd for r in requests_of(sink)) > 0
    await client.close()


@pytest.mark.parametrize(
    "path", ["/alpha/v1beta/models/gemini-2.5-flash:generateContent", "/alpha", "/gamma/v1/chat/completions"]
)
async def test_paths_under_a_prefix_that_are_not_openai_s_go_nowhere(
    upstream: FakeUpstream, fakes: tuple[FakeUpstream, FakeUpstream], proxy: tuple[str, Settings], path: str
) -> None:
    url, _ = proxy
    async with httpx.AsyncClient() as raw:
        answer = await raw.post(url + path, json={"model": "m"}, headers={"Authorization": f"Bearer {KEY_A}"})
    assert answer.status_code == 404
    assert fakes[0].received == fakes[1].received == upstream.received == []


async def test_a_request_stopped_or_unreadable_is_the_service_s_priced_by_its_table(
    fakes: tuple[FakeUpstream, FakeUpstream], proxy: tuple[str, Settings], sink: ListSink
) -> None:
    """What the proxy records before anything comes back (a stop at admission) and what it records of a body
    it cannot read are the compatible service's too: named by it and priced by its table, not OpenAI's (which
    does not know its model, so its spend would count as unpriced and add nothing to a budget)."""
    alpha, _ = fakes
    url, _ = proxy
    alpha.script = _answer(ALPHA_MODEL)
    client = _client(url, "alpha", KEY_A, "alpha-capped")
    capped = {"X-RunGuard-Max-Requests": "1"}
    await client.chat.completions.create(
        model=ALPHA_MODEL, messages=[{"role": "user", "content": "hi"}], extra_headers=capped
    )
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(
            model=ALPHA_MODEL, messages=[{"role": "user", "content": "again"}], extra_headers=capped
        )
    await client.close()
    # A lone surrogate: no JSON parser reads it, the service may; forwarded (guard.unreadable: forward).
    lone = b'{"model": "' + ALPHA_MODEL.encode() + b'", "messages": [{"role": "user", "content": "\\ud83d"}]}'
    async with httpx.AsyncClient() as http:
        sent = await http.post(
            f"{url}/alpha/v1/chat/completions",
            content=lone,
            headers={"Authorization": f"Bearer {KEY_A}", "Content-Type": "application/json", "X-Run-Id": "alpha-lone"},
        )
    assert sent.status_code == 200 and len(alpha.received) == 2
    await eventually(lambda: len(requests_of(sink)) == 3 and len(trips_of(sink)) >= 1)
    (trip,) = [t for t in trips_of(sink) if t.run_id == "alpha-capped"]
    assert trip.detector == "max_requests" and not trip.unpriced
    assert trip.usd_so_far == pytest.approx((1000 * 0.05 + 500 * 0.08) / 1e6)
    (unreadable,) = [r for r in requests_of(sink) if r.run_id == "alpha-lone"]
    assert (unreadable.provider, unreadable.unpriced) == ("alpha", False)
    assert (unreadable.error or "").startswith("unreadable request:")
    assert unreadable.usd == pytest.approx((1000 * 0.05 + 500 * 0.08) / 1e6)
