"""Claude on Vertex AI through the real proxy, with the anthropic SDK's AnthropicVertex.

AnthropicVertex sends Messages bodies with `anthropic_version` in the body and no `model` (the model, with
its `@date`, is in the path) to `{base_url}/projects/{p}/locations/{region}/publishers/anthropic/models/{m}:
rawPredict` (`:streamRawPredict` for a stream); its base URL may or may not end in `/v1`. Both reach the
Vertex upstream at `/v1/projects/...`, byte-identical; a loop is stopped with Anthropic's error, which the
SDK raises without retrying; the run shows with provider `vertex`, its model, cost and trip.
"""

from __future__ import annotations

import anthropic
import orjson
import pytest

from tests.e2e.claude import SEARCH_TOOL, soft_error, tool_loop
from tests.e2e.faults import requests_of, trips_of
from tests.e2e.vertex import CLAUDE_MODEL, CLAUDE_REGION, PROJECT, TOKEN, VertexFactory, claude_client
from tests.support.anthropic_upstream import Step, message, message_stream
from tests.support.upstream import Received, Reply

PREDICT = f"/v1/projects/{PROJECT}/locations/{CLAUDE_REGION}/publishers/anthropic/models/{CLAUDE_MODEL}"
HELLO = Step(text="Hello from Vertex", usage=(12, 5))
MESSAGES: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Hello"}]


def _claude(step: Step | None = None) -> object:
    def answer(received: Received) -> Reply:
        model = received.path.rpartition("/")[2].partition(":")[0]
        body = received.json()
        turn = sum(1 for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list))
        chosen = step or Step(calls=[("search", {"query": f"invoice INV-7 attempt {turn}"})])
        if received.path.endswith(":streamRawPredict"):
            return Reply.sse(message_stream(chosen, f"msg_vtx{turn}", model))
        return Reply.json(message(chosen, f"msg_vtx{turn}", model))

    return answer


@pytest.mark.parametrize("suffix", ["", "/v1"])
async def test_a_healthy_claude_on_vertex_message_is_byte_identical(make_vertex: VertexFactory, suffix: str) -> None:
    vertex = await make_vertex()
    vertex.script(_claude(HELLO))  # type: ignore[arg-type]
    sdk = claude_client(vertex.url + suffix)
    raw = await sdk.messages.with_raw_response.create(model=CLAUDE_MODEL, max_tokens=100, messages=MESSAGES)
    assert raw.http_response.content == orjson.dumps(message(HELLO, "msg_vtx0", CLAUDE_MODEL))
    (received,) = vertex.fake.received
    assert received.path == PREDICT + ":rawPredict"
    assert received.headers["Authorization"] == f"Bearer {TOKEN}"
    body = received.json()
    assert "model" not in body and "anthropic_version" in body
    (record,) = requests_of(vertex.sink)
    assert (record.provider, record.api, record.model) == ("vertex", "vertex_claude", CLAUDE_MODEL)
    assert record.usd > 0 and record.input_tokens == 12
    await sdk.close()


async def test_a_claude_on_vertex_stream_is_byte_identical(make_vertex: VertexFactory) -> None:
    vertex = await make_vertex()
    vertex.script(_claude(HELLO))  # type: ignore[arg-type]
    sdk = claude_client(vertex.url)
    async with sdk.messages.with_streaming_response.create(
        model=CLAUDE_MODEL, max_tokens=100, messages=MESSAGES, stream=True
    ) as response:
        got = b"".join([chunk async for chunk in response.http_response.aiter_bytes()])
    assert got == b"".join(message_stream(HELLO, "msg_vtx0", CLAUDE_MODEL))
    assert vertex.fake.received[0].path == PREDICT + ":streamRawPredict"
    (record,) = requests_of(vertex.sink)
    assert record.streamed and record.output_tokens == 5 and record.api == "vertex_claude"
    await sdk.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_claude_on_vertex_loop_is_stopped_without_a_retry(make_vertex: VertexFactory, stream: bool) -> None:
    vertex = await make_vertex()
    vertex.script(_claude())  # type: ignore[arg-type]
    sdk = claude_client(vertex.url, run="claude-vertex-loop")  # the SDK's default two retries
    with pytest.raises(anthropic.RateLimitError) as caught:
        await tool_loop(sdk, soft_error, stream=stream, model=CLAUDE_MODEL)
    assert "non_progress" in str(caught.value.message)
    records = requests_of(vertex.sink)
    assert [r.blocked_by for r in records].count("non_progress") == 1  # one stop, not retried
    assert len(vertex.fake.received) == len(records) - 1
    (trip,) = trips_of(vertex.sink)
    assert trip.run_id == "claude-vertex-loop" and {r.provider for r in records} == {"vertex"}
    assert all(r.model == CLAUDE_MODEL for r in records) and sum(r.usd for r in records) > 0
    assert SEARCH_TOOL["name"] in records[0].tool_calls
    await sdk.close()
