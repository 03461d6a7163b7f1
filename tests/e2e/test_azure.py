"""Azure OpenAI through the proxy: the `AzureOpenAI` client's paths, key header and deployment names.

Azure serves OpenAI's wire format under `/openai/deployments/{deployment}/...?api-version=...`
(Chat) and `/openai/responses?api-version=...`, keyed by an `api-key` header, and a request names
its deployment, not a model. The client points `azure_endpoint` at the proxy and the proxy's
OpenAI upstream at the Azure resource.
"""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest

from tests.conftest import ProxyFactory
from tests.e2e import agents, payloads
from tests.e2e.faults import eventually, requests_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Reply

API_VERSION = "2024-10-21"


def azure(proxy_url: str, key: str = "azure-key-1", **kwargs: Any) -> openai.AsyncAzureOpenAI:
    return openai.AsyncAzureOpenAI(azure_endpoint=proxy_url, api_key=key, api_version=API_VERSION, **kwargs)


async def test_an_azure_agent_loop_reaches_azure_s_paths_and_is_stopped(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    upstream.script = agents.chat_script(steps=50)
    client = azure(await make_proxy(), default_headers={"X-Run-Id": "azure-loop"})
    with pytest.raises(openai.RateLimitError) as caught:
        await agents.chat_agent(client, agents.soft_error_tool, model="prod-chat")
    assert caught.value.code == "runguard_non_progress"
    assert len(upstream.received) == 3
    for received in upstream.received:
        assert (received.path, received.query) == (
            "/openai/deployments/prod-chat/chat/completions",
            f"api-version={API_VERSION}",
        )
        assert received.headers["api-key"] == "azure-key-1"


async def test_an_azure_stream_and_a_responses_request_are_read(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    # Azure opens a stream with a chunk of prompt filter results: no choices, no id, no model.
    filters = {"choices": [], "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": []}
    stream = [b"data: " + orjson.dumps(filters) + b"\n\n", *payloads.chat_stream("Hello there!", with_usage=True)]

    def script(received: Any) -> Reply:
        return (
            Reply.sse(stream) if received.path.endswith("/chat/completions") else Reply.json(payloads.response_object())
        )

    upstream.script = script
    client = azure(await make_proxy(), default_headers={"X-Run-Id": "azure-read"})
    chunks = await client.chat.completions.create(
        model="prod-chat",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    assert "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices]) == "Hello there!"
    answer = await client.responses.create(model="prod-chat", input="hi")
    assert answer.output_text == "Hi from responses"
    assert [r.path for r in upstream.received] == [
        "/openai/deployments/prod-chat/chat/completions",
        "/openai/responses",
    ]
    await eventually(lambda: len(requests_of(sink)) == 2)
    assert [(r.api, r.streamed, r.input_tokens, r.output_tokens) for r in requests_of(sink)] == [
        ("chat", True, 9, 4),
        ("responses", False, 20, 6),
    ]


async def test_an_azure_deployment_is_priced_as_the_model_its_responses_name(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    """A deployment's name ("prod-chat") is in no price table: at the default prices, 60k + 20k tokens cost $0.35 a
    response. Its responses name gpt-4o-mini: $0.021 a response, so a $0.05 budget stops the 4th request."""
    script = agents.chat_script(steps=50, usage=(60_000, 20_000))
    upstream.script = lambda received: Reply.json(
        {**orjson.loads(script(received).body), "model": "gpt-4o-mini-2024-07-18"}
    )
    client = azure(
        await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.05}}}), default_headers={"X-Run-Id": "a"}
    )
    with pytest.raises(openai.RateLimitError) as caught:
        await agents.chat_agent(client, agents.progressing_tool, model="prod-chat")
    assert caught.value.code == "runguard_budget"
    assert len(upstream.received) == 3


async def test_azure_keys_are_told_apart_by_their_api_key_header(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    proxy = await make_proxy()
    for key in ("azure-key-1", "azure-key-2"):
        await azure(proxy, key).chat.completions.create(model="prod-chat", messages=[{"role": "user", "content": key}])
    await eventually(lambda: len(requests_of(sink)) == 2)
    first, second = (r.key_hash for r in requests_of(sink))
    assert first != second and "anonymous" not in first + second


@pytest.mark.parametrize("suffix", ["", "/openai"])
async def test_an_azure_upstream_given_with_or_without_its_openai_path_serves_both_apis(
    upstream: FakeUpstream, make_proxy: ProxyFactory, suffix: str
) -> None:
    """Azure's v1 API is reached with the plain OpenAI client at `.../openai/v1`: with the upstream given as the
    resource's `/openai` URL, its `/v1/...` requests and the AzureOpenAI client's classic paths both arrive."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    proxy = await make_proxy(upstreams={"openai": upstream.url + suffix})
    said: Any = [{"role": "user", "content": "hi"}]
    await azure(proxy).chat.completions.create(model="prod-chat", messages=said)
    if suffix:
        v1 = openai.AsyncOpenAI(base_url=proxy + "/v1", api_key="azure-key-1")
        await v1.chat.completions.create(model="gpt-4o-mini", messages=said)
    assert [r.path for r in upstream.received] == [
        "/openai/deployments/prod-chat/chat/completions",
        *(["/openai/v1/chat/completions"] if suffix else []),
    ]
