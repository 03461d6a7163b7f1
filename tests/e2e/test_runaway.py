"""Runaway agents are stopped through the real proxy, with the SDKs' own exceptions; healthy ones pass.

Each test drives an agent loop over a real SDK against the proxy, which talks
to a scripted fake upstream, and counts how many calls reached the upstream
before the stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import openai
import orjson
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tests.conftest import ProxyFactory
from tests.e2e import agents, payloads
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply


def counting_client(proxy_url: str, sent: list[httpx.Request], run_id: str, **kwargs: Any) -> openai.AsyncOpenAI:
    async def count(request: httpx.Request) -> None:
        sent.append(request)

    return openai.AsyncOpenAI(
        base_url=proxy_url + "/v1",
        api_key="sk-test-runaway",
        default_headers={"X-Run-Id": run_id},
        http_client=httpx.AsyncClient(event_hooks={"request": [count]}),
        **kwargs,
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_soft_error_loop_trips_non_progress_at_the_third_identical_result(
    upstream: FakeUpstream, make_proxy: ProxyFactory, stream: bool
) -> None:
    upstream.script = _streaming(agents.chat_script(steps=50)) if stream else agents.chat_script(steps=50)
    sent: list[httpx.Request] = []
    client = counting_client(await make_proxy(), sent, f"loop-{stream}")  # default max_retries=2
    with pytest.raises(openai.RateLimitError) as caught:
        await agents.chat_agent(client, agents.soft_error_tool, stream=stream) if not stream else await _stream_agent(
            client
        )
    assert caught.value.code == "runguard_non_progress"
    assert "non_progress" in caught.value.message and "3 times" in caught.value.message
    assert caught.value.response.headers["x-runguard-trip"] == "non_progress"
    assert len(upstream.received) == 3  # results 1, 2, 3 went out; the 4th request carried the 3rd identical one
    assert len(sent) == 4  # and the SDK did not retry the 429 (x-should-retry: false)


async def _stream_agent(client: openai.AsyncOpenAI, tool: agents.Tool = agents.soft_error_tool) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Extract the invoice total."}]
    for _ in range(12):
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)  # type: ignore[arg-type]
        calls: dict[int, dict[str, str]] = {}
        async for chunk in stream:
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                slot = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = delta.id or slot["id"]
                if delta.function:
                    slot["name"] = delta.function.name or slot["name"]
                    slot["arguments"] += delta.function.arguments or ""
        if not calls:
            return "done"
        messages.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls.values()
                ],
            }
        )
        messages += [
            {"role": "tool", "tool_call_id": c["id"], "content": tool(c["name"], orjson.loads(c["arguments"]))}
            for c in calls.values()
        ]
    raise AssertionError("not stopped")


def _streaming(script: Callable[..., Reply]) -> Callable[..., Reply]:
    """The same model behaviour, answered as Chat Completions SSE."""
    import orjson

    def stream(received: Any) -> Reply:
        completion = orjson.loads(script(received).body)
        message = completion["choices"][0]["message"]
        base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini"}
        deltas: list[dict[str, Any]] = []
        for i, call in enumerate(message.get("tool_calls") or []):
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            deltas.append({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
        if message.get("content"):
            deltas.append({"content": message["content"]})
        chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        chunks.append(
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": completion["choices"][0]["finish_reason"]}]}
        )
        return Reply.sse([b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"])

    return stream


async def test_a_loop_whose_tool_result_changes_finishes_untouched(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.script = agents.chat_script(steps=8)
    client = counting_client(await make_proxy(), [], "healthy-run")
    assert await agents.chat_agent(client, agents.progressing_tool) == "Done."
    assert len(upstream.received) == 9
    assert not [r for r in sink.records if getattr(r, "action", None) == "block"]


async def test_stop_response_ends_the_loop_with_a_normal_completion(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    upstream.script = agents.chat_script(steps=50)
    proxy = await make_proxy(guard={"detectors": {"non_progress": {"response": "stop"}}})
    answer = await agents.chat_agent(counting_client(proxy, [], "stop-run"), agents.soft_error_tool)
    assert "non_progress" in answer and "stop-run" in answer
    assert len(upstream.received) == 3


async def test_gemini_loop_trips_with_resource_exhausted(upstream: FakeUpstream, make_proxy: ProxyFactory) -> None:
    upstream.script = agents.gemini_script(steps=50)
    proxy = await make_proxy()
    client = genai.Client(
        api_key="test-key", http_options=types.HttpOptions(base_url=proxy, headers={"X-Run-Id": "g1"})
    )
    with pytest.raises(genai_errors.ClientError) as caught:
        await agents.gemini_agent(client, agents.soft_error_tool)
    assert caught.value.code == 429
    assert caught.value.status == "RESOURCE_EXHAUSTED"
    assert "non_progress" in (caught.value.message or "")
    assert len(upstream.received) == 3


async def test_gemini_stop_response_is_a_normal_answer(upstream: FakeUpstream, make_proxy: ProxyFactory) -> None:
    upstream.script = agents.gemini_script(steps=50)
    proxy = await make_proxy(guard={"detectors": {"non_progress": {"response": "stop"}}})
    client = genai.Client(
        api_key="test-key", http_options=types.HttpOptions(base_url=proxy, headers={"X-Run-Id": "g2"})
    )
    assert "non_progress" in await agents.gemini_agent(client, agents.soft_error_tool)


@pytest.mark.parametrize("query", ["", "?$alt=json%3Benum-encoding%3Dint"], ids=["no-alt", "alt-json"])
async def test_gemini_stop_on_a_json_array_stream_is_a_json_array(
    upstream: FakeUpstream, make_proxy: ProxyFactory, query: str
) -> None:
    # Without alt=sse, :streamGenerateContent streams one JSON array (google-api-core's REST transport,
    # under the older google-generativeai SDK, reads it so); the stop must come in the same framing.
    answer = agents.gemini_script(steps=50)

    def as_array(received: Received) -> Reply:
        item = answer(received).body
        return Reply(200, b"", {"Content-Type": "application/json; charset=UTF-8"}, chunks=[b"[", item, b"]"])

    upstream.script = as_array
    proxy = await make_proxy(guard={"detectors": {"non_progress": {"response": "stop"}}})
    url = f"{proxy}/v1beta/models/gemini-2.5-flash:streamGenerateContent{query}"
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Extract the invoice total."}]}]
    headers = {"x-goog-api-key": "test-key", "X-Run-Id": "g-array"}
    async with httpx.AsyncClient() as http:
        for _ in range(6):
            reply = await http.post(url, json={"contents": contents}, headers=headers)
            assert reply.status_code == 200
            chunks = orjson.loads(reply.content)
            assert isinstance(chunks, list)
            parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
            calls = [p["functionCall"] for p in parts if "functionCall" in p]
            if not calls:
                break
            contents.append({"role": "model", "parts": parts})
            responses = [
                {
                    "functionResponse": {
                        "name": c["name"],
                        "response": {"result": agents.soft_error_tool(c["name"], c["args"])},
                    }
                }
                for c in calls
            ]
            contents.append({"role": "user", "parts": responses})
    assert reply.headers["x-runguard-trip"] == "non_progress"
    assert reply.headers["content-type"].startswith("application/json")
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert "non_progress" in "".join(p.get("text", "") for p in parts)
    assert len(upstream.received) == 3


async def test_retry_cascade_opens_per_key_and_model_and_recovers_through_one_probe(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    failing = True
    upstream.script = lambda _: (
        Reply.json({"error": {"message": "overloaded"}}, status=503)
        if failing
        else Reply(200, orjson.dumps(payloads.chat_completion("recovered")), delay=0.3)  # the probe is in flight
    )
    proxy = await make_proxy(guard={"breaker": {"cooldown_seconds": 0.5}})
    client = counting_client(proxy, [], "cascade", max_retries=0)
    ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(**ask)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(**ask)  # type: ignore[arg-type]
    assert caught.value.code == "runguard_retry_cascade"
    assert len(upstream.received) == 2  # answered locally while open: the quota is not burned
    other_run = counting_client(proxy, [], "another-run-same-key", max_retries=0)
    with pytest.raises(openai.RateLimitError):
        await other_run.chat.completions.create(**ask)  # type: ignore[arg-type]
    failing = False
    await asyncio.sleep(0.6)
    # Five different callers at once (distinct bodies: this is not one request re-sent).
    asks = [{**ask, "messages": [{"role": "user", "content": f"caller {i}"}]} for i in range(5)]
    probes = await asyncio.gather(*(client.chat.completions.create(**a) for a in asks), return_exceptions=True)  # type: ignore[arg-type]
    assert sum(1 for p in probes if not isinstance(p, Exception)) == 1  # exactly one half-open probe
    assert len(upstream.received) == 3
    done = await client.chat.completions.create(**ask)  # type: ignore[arg-type]
    assert done.choices[0].message.content == "recovered"


async def test_over_spawn_caps_requests_in_flight_for_one_run(upstream: FakeUpstream, make_proxy: ProxyFactory) -> None:
    upstream.script = lambda _: Reply(200, payloads_json(), delay=0.5)
    client = counting_client(await make_proxy(), [], "spawn", max_retries=0)
    asks = [{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"branch {i}"}]} for i in range(30)]
    results = await asyncio.gather(*(client.chat.completions.create(**ask) for ask in asks), return_exceptions=True)  # type: ignore[arg-type]
    blocked = [r for r in results if isinstance(r, openai.RateLimitError)]
    assert upstream.max_in_flight <= 20
    assert len(blocked) >= 10
    assert all(b.code == "runguard_over_spawn" for b in blocked)


async def test_client_retries_after_timeouts_are_stopped_at_the_fourth_identical_send(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    """An SDK whose timeout is shorter than the model's answer gives up and sends the same body again, up to
    its `max_retries`: the 4th identical send is answered locally, with a 429 the SDK does not retry."""
    upstream.script = lambda _: Reply(200, payloads_json(), delay=2.0)
    sent: list[httpx.Request] = []
    # A second, not less: each send must reach the upstream before the SDK gives up on it, also when
    # the suite's one event loop pauses for a full garbage collection.
    client = counting_client(await make_proxy(), sent, "impatient", max_retries=6, timeout=1.0)
    question: Any = [{"role": "user", "content": "Summarise the quarter."}]
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="gpt-4o-mini", messages=question)
    assert caught.value.code == "runguard_duplicate_request"
    assert len(sent) == 4 and len(upstream.received) == 3


def payloads_json() -> bytes:
    return orjson.dumps(payloads.chat_completion("branch done"))


async def test_run_budget_stops_the_request_after_the_spend_reaches_it(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    # gpt-4o-mini: 60k input + 20k output tokens = $0.021 per response; the third request finds $0.042 spent.
    upstream.script = agents.chat_script(steps=50, usage=(60_000, 20_000))
    client = counting_client(await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.04}}}), [], "budget-run")
    with pytest.raises(openai.RateLimitError) as caught:
        await agents.chat_agent(client, agents.progressing_tool)
    assert caught.value.code == "runguard_budget"
    assert len(upstream.received) == 2


@pytest.mark.parametrize(("prompt", "reached"), [(150_000, 4), (250_000, 2)])
async def test_a_long_gemini_pro_prompt_spends_at_its_long_context_rates(
    upstream: FakeUpstream, make_proxy: ProxyFactory, prompt: int, reached: int
) -> None:
    """gemini-2.5-pro charges a request whose prompt is over 200k tokens about twice as much, its output too:
    150k + 10k tokens cost $0.2875 a response (the 5th request finds $1.15 spent), 250k + 10k $0.775 (the 3rd
    finds $1.55). At the short rates a 250k prompt's run was let spend twice its budget."""
    upstream.script = agents.gemini_script(steps=50, usage=(prompt, 10_000), model="gemini-2.5-pro")
    proxy = await make_proxy(guard={"detectors": {"budget": {"run_usd": 1.0}}})
    client = genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=proxy, headers={"X-Run-Id": "g"}))
    with pytest.raises(genai_errors.ClientError) as caught:
        await agents.gemini_agent(client, agents.progressing_tool, model="gemini-2.5-pro")
    assert caught.value.code == 429 and "budget" in (caught.value.message or "")
    assert len(upstream.received) == reached


@pytest.mark.parametrize(("tier", "reached"), [("default", 4), ("priority", 2), ("flex", 8)])
async def test_the_service_tier_a_response_names_scales_its_spend(
    upstream: FakeUpstream, make_proxy: ProxyFactory, tier: str, reached: int
) -> None:
    """gpt-4o-mini, 60k + 20k tokens: $0.021 a response at the standard price, twice that at priority (the
    3rd request finds $0.084 spent against a $0.08 budget), half at flex (the 9th finds $0.084)."""
    script = agents.chat_script(steps=50, usage=(60_000, 20_000))
    upstream.script = lambda received: Reply.json({**orjson.loads(script(received).body), "service_tier": tier})
    client = counting_client(await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.08}}}), [], f"tier-{tier}")
    with pytest.raises(openai.RateLimitError) as caught:
        await agents.chat_agent(client, agents.progressing_tool, service_tier=tier)
    assert caught.value.code == "runguard_budget"
    assert len(upstream.received) == reached


async def test_a_voice_conversation_s_audio_tokens_spend_at_their_own_rates(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    """gpt-4o-audio-preview hears 8k of a turn's 10k input tokens and speaks 1.5k of its 2k output tokens:
    $0.45 a turn at the audio rates (16 and 8 times the text rates), where the text rates counted $0.045.
    The 4th turn finds $1.35 spent against a $1 budget."""
    usage = {
        "prompt_tokens": 10_000,
        "completion_tokens": 2_000,
        "total_tokens": 12_000,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 8_000},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 1_500},
    }
    answer = {**payloads.chat_completion("Sure."), "model": "gpt-4o-audio-preview-2025-06-03", "usage": usage}
    upstream.script = lambda _: Reply.json(answer)
    client = counting_client(await make_proxy(guard={"detectors": {"budget": {"run_usd": 1.0}}}), [], "voice")

    async def talk() -> None:
        for turn in range(6):
            heard: Any = {
                "type": "input_audio",
                "input_audio": {"data": f"UklGRiQAAABXQVZF{turn:04d}", "format": "wav"},
            }
            await client.chat.completions.create(
                model="gpt-4o-audio-preview",
                modalities=["text", "audio"],
                audio={"voice": "alloy", "format": "wav"},
                messages=[{"role": "user", "content": [heard]}],
            )

    with pytest.raises(openai.RateLimitError) as caught:
        await talk()
    assert caught.value.code == "runguard_budget"
    assert len(upstream.received) == 3


async def test_a_gemini_voice_conversation_s_cached_audio_spends_at_its_cached_rate(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """gemini-2.5-flash hears 95k of a turn's 100k input tokens, 88k of them from the cache: $0.033 a turn at
    its cached audio rate ($0.25 per 1M), $0.098 when every heard token cost the audio rate ($1.00). Six turns
    under a $0.20 budget: none is stopped (at the audio rate, the 4th was)."""
    usage = {
        "promptTokenCount": 100_000,
        "candidatesTokenCount": 1_000,
        "totalTokenCount": 101_000,
        "cachedContentTokenCount": 90_000,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 5_000}, {"modality": "AUDIO", "tokenCount": 95_000}],
        "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 2_000}, {"modality": "AUDIO", "tokenCount": 88_000}],
    }
    upstream.script = lambda _: Reply.json({**payloads.gemini_response("Sure."), "usageMetadata": usage})
    proxy = await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.20}}})
    client = genai.Client(api_key="g-voice", http_options=types.HttpOptions(base_url=proxy, headers={"X-Run-Id": "v"}))
    heard = types.Part.from_bytes(data=b"RIFF$\x00\x00\x00WAVE", mime_type="audio/wav")
    for turn in range(6):
        said = types.Part(text=f"turn {turn}")
        await client.aio.models.generate_content(model="gemini-2.5-flash", contents=[heard, said])
    usd = (3_000 * 0.30 + 2_000 * 0.075 + 7_000 * 1.00 + 88_000 * 0.25 + 1_000 * 2.50) / 1e6
    await eventually(lambda: len(requests_of(sink)) == 6)
    assert [(r.blocked_by, r.usd) for r in requests_of(sink)] == [(None, pytest.approx(usd))] * 6


async def test_a_fine_tuned_model_is_sized_by_its_base_and_priced_at_its_own_rates(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """A support agent on a fine-tuned gpt-4.1-mini with 300k tokens of context: 29% of its base's 1M-token
    window, so `context_window` lets it be (sized at the 128k default, its 2nd request was stopped), and
    each response costs the fine-tuned rates ($0.80 / $3.20 per 1M: $0.2403, where the default's were $0.75)."""
    model = "ft:gpt-4.1-mini-2025-04-14:acme:support:AbC123"
    upstream.script = lambda _: Reply.json(payloads.chat_completion("Done.", usage=(300_000, 100), model=model))
    client = counting_client(await make_proxy(), [], "tuned")
    for turn in range(3):
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": f"ticket {turn}"}])
    await eventually(lambda: len(requests_of(sink)) == 3)
    usd = (300_000 * 0.80 + 100 * 3.20) / 1e6
    assert [(r.blocked_by, r.usd) for r in requests_of(sink)] == [(None, pytest.approx(usd))] * 3
    assert not [r for r in sink.records if getattr(r, "detector", None) == "context_window"]


async def test_hosted_web_searches_count_toward_the_run_budget(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    """A research loop whose model searches the web 50 times an answer: $0.50 a response in search fees, while
    its tokens cost under $0.001. Counted by tokens alone, its budget never saw the spend."""
    upstream.script = lambda _: Reply.json(payloads.researched(50))
    client = counting_client(await make_proxy(guard={"detectors": {"budget": {"run_usd": 1.0}}}), [], "research")

    async def research() -> None:
        for n in range(5):
            await client.responses.create(
                model="o3-deep-research", input=f"Survey the market, angle {n}.", tools=[{"type": "web_search_preview"}]
            )

    with pytest.raises(openai.RateLimitError) as caught:
        await research()
    assert caught.value.code == "runguard_budget"
    assert len(upstream.received) == 2


async def test_per_run_header_tightens_but_never_loosens(upstream: FakeUpstream, make_proxy: ProxyFactory) -> None:
    upstream.script = agents.chat_script(steps=50)
    proxy = await make_proxy()
    client = counting_client(proxy, [], "tight-run", default_query=None)
    client = client.with_options(default_headers={"X-Run-Id": "tight-run", "X-RunGuard-Max-Requests": "2"})
    with pytest.raises(openai.RateLimitError) as caught:
        await agents.chat_agent(client, agents.progressing_tool)
    assert caught.value.code == "runguard_max_requests"
    assert len(upstream.received) == 2
    loose = counting_client(proxy, [], "loose-run").with_options(
        default_headers={"X-Run-Id": "loose-run", "X-RunGuard-Budget-Usd": "1000000"}
    )
    upstream.script = agents.chat_script(steps=3)
    assert await agents.chat_agent(loose, agents.progressing_tool) == "Done."


async def test_a_run_capped_by_its_header_avoided_nothing_past_its_cap(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """Capped by `X-RunGuard-Max-Requests: 2`, a gpt-4o run is stopped at its 3rd request: past its own cap it
    would never have gone, so it avoided nothing (it was shown as 32 times its spend, projected to the default cap)."""
    upstream.script = agents.chat_script(steps=50)
    client = counting_client(await make_proxy(), [], "capped-run", default_query=None)
    client = client.with_options(default_headers={"X-Run-Id": "capped-run", "X-RunGuard-Max-Requests": "2"})
    with pytest.raises(openai.RateLimitError):
        await agents.chat_agent(client, agents.progressing_tool, model="gpt-4o")
    await eventually(lambda: any(t.detector == "max_requests" for t in trips_of(sink)))
    stop = next(t for t in trips_of(sink) if t.detector == "max_requests")
    assert stop.usd_so_far > 0 and stop.request_index == 3
    assert stop.usd_avoided_estimate == 0.0


async def test_parallel_over_call_is_replaced_before_the_tools_run(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    calls = [(f"c{i}", "lookup", f'{{"id": {i}}}') for i in range(17)]  # over the cap of 16
    upstream.script = lambda _: Reply.json(payloads.chat_completion(tool_calls=calls))
    client = counting_client(await make_proxy(), [], "parallel")
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
    assert caught.value.code == "runguard_parallel_calls"
    assert len(upstream.received) == 1


def warnings_client(proxy_url: str, run_id: str, warnings: list[str]) -> openai.AsyncOpenAI:
    """An SDK client of run `run_id` that appends each answer's x-runguard-warning ("" for none) to `warnings`."""

    async def keep(response: httpx.Response) -> None:
        warnings.append(response.headers.get("x-runguard-warning", ""))

    return openai.AsyncOpenAI(
        base_url=proxy_url + "/v1",
        api_key="sk-test-warnings",
        default_headers={"X-Run-Id": run_id},
        http_client=httpx.AsyncClient(event_hooks={"response": [keep]}),
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_warning_found_after_a_response_is_shown_on_the_runs_next_answer(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink, stream: bool
) -> None:
    """`consecutive_same_tool` warns (its default) once the run calls one tool 3 times in a row: a
    finding made after the response went out, so the run's next answer carries it."""
    upstream.script = _streaming(agents.chat_script(steps=5)) if stream else agents.chat_script(steps=5)
    warnings: list[str] = []
    client = warnings_client(await make_proxy(), f"carried-{stream}", warnings)
    if stream:
        assert await _stream_agent(client, agents.progressing_tool) == "done"
    else:
        assert await agents.chat_agent(client, agents.progressing_tool) == "Done."
    trips = [r for r in sink.records if getattr(r, "detector", None) == "consecutive_same_tool"]
    assert trips and all(t.action == "warn" for t in trips)
    first = trips[0].request_index  # the response of this request made the finding
    assert len(warnings) == 6 and first < 6
    assert "consecutive_same_tool" not in "".join(warnings[:first])
    assert warnings[first].startswith("consecutive_same_tool (previous response): ")
    assert len([w for w in warnings if "consecutive_same_tool" in w]) == len(trips)  # each shown once


async def test_shadow_mode_blocks_nothing_and_says_so(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.script = agents.chat_script(steps=6)
    warnings: list[str] = []
    client = warnings_client(await make_proxy(guard={"shadow": True}), "shadow-run", warnings)
    assert await agents.chat_agent(client, agents.soft_error_tool) == "Done."
    assert len(upstream.received) == 7
    assert any("non_progress" in w for w in warnings)
    assert {t.detector for t in sink.records if getattr(t, "action", None) == "warn"} >= {"non_progress"}
    assert not [t for t in sink.records if getattr(t, "action", None) == "block"]
