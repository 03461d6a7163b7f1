"""Gemini on Vertex AI through the real proxy: google-genai (`vertexai=True`) and Google ADK on Vertex.

A healthy exchange is byte-identical both ways and reaches the Vertex AI upstream at the path the SDK
sent; a loop is stopped with an error the SDK raises without retrying; the run shows with provider
`vertex`, its cost and its trip. A project's runs are the project's across token refreshes, and a client
whose token Vertex AI refuses for a project can neither count against nor stop that project's runs.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import errors as genai_errors
from google.genai import types
from google.oauth2.credentials import Credentials

from runguard.proxy.runs.accounts import ACCOUNT_PREFIX
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.store.records import RequestRecord
from tests.e2e import payloads
from tests.e2e.agents import gemini_agent, gemini_script, soft_error_tool
from tests.e2e.faults import requests_of, trips_of
from tests.e2e.vertex import (
    GEMINI_MODEL,
    LOCATION,
    PROJECT,
    TOKEN,
    TOKEN_2,
    VertexFactory,
    express_client,
    gemini_client,
)
from tests.support.upstream import Received, Reply

ANSWER = payloads.gemini_response("Vertex says hi", model=GEMINI_MODEL)
SCOPED = f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/{GEMINI_MODEL}"


def _answer(received: Received) -> Reply:
    if received.path.endswith(":countTokens"):
        return Reply.json({"totalTokens": 3})
    if received.path.endswith(":streamGenerateContent") and "alt=sse" in received.query:
        return Reply.sse(payloads.gemini_stream("Vertex streams"))
    if received.path.endswith(":streamGenerateContent"):
        return Reply(200, b"[" + orjson.dumps(ANSWER) + b"]", {"Content-Type": "application/json"})
    return Reply.json(ANSWER)


def _records(sink: Any) -> list[RequestRecord]:
    return requests_of(sink)


async def test_a_healthy_vertex_exchange_is_byte_identical_and_recorded_as_vertex(make_vertex: VertexFactory) -> None:
    vertex = await make_vertex()
    vertex.script(_answer)
    client = gemini_client(vertex.url)
    response = await client.aio.models.generate_content(model=GEMINI_MODEL, contents="hello")
    assert response.text == "Vertex says hi"
    counted = await client.aio.models.count_tokens(model=GEMINI_MODEL, contents="hello")
    assert counted.total_tokens == 3
    generate, count = vertex.fake.received
    assert generate.path == SCOPED + ":generateContent" and count.path == SCOPED + ":countTokens"
    assert generate.headers["Authorization"] == f"Bearer {TOKEN}"
    async with httpx.AsyncClient() as raw:  # the bytes, both ways
        body = generate.body
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        answer = await raw.post(vertex.url + SCOPED + ":generateContent", content=body, headers=headers)
    assert answer.content == orjson.dumps(ANSWER) and vertex.fake.received[-1].body == body
    (record, _) = _records(vertex.sink)
    assert (record.provider, record.api, record.model) == ("vertex", "vertex_gemini", GEMINI_MODEL)
    assert record.usd > 0 and record.input_tokens == 7 and record.status == 200


@pytest.mark.parametrize("sse", [True, False])
async def test_vertex_streams_pass_byte_identical(make_vertex: VertexFactory, sse: bool) -> None:
    """google-genai streams with `alt=sse`; a REST client without it gets one JSON array: both read and relayed."""
    vertex = await make_vertex()
    vertex.script(_answer)
    if sse:
        client = gemini_client(vertex.url)  # held: a client collected mid-stream closes its session
        stream = await client.aio.models.generate_content_stream(model=GEMINI_MODEL, contents="hello")
        chunks = [chunk.text async for chunk in stream]
        assert "".join(t or "" for t in chunks) == "Vertex streams"
        sent = vertex.fake.received[0]
        assert sent.query == "alt=sse"
        async with httpx.AsyncClient() as raw:  # the same request, its bytes both ways
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            answer = await raw.post(vertex.url + sent.path + "?alt=sse", content=sent.body, headers=headers)
        assert answer.content == b"".join(payloads.gemini_stream("Vertex streams"))
        assert vertex.fake.received[1].body == sent.body
    else:
        async with httpx.AsyncClient() as raw:
            body = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "hello"}]}]})
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            answer = await raw.post(vertex.url + SCOPED + ":streamGenerateContent", content=body, headers=headers)
        assert answer.content == b"[" + orjson.dumps(ANSWER) + b"]"
    record = _records(vertex.sink)[0]
    assert record.streamed and record.provider == "vertex" and record.output_tokens > 0


async def test_express_mode_sends_its_key_to_vertex_only(make_vertex: VertexFactory) -> None:
    vertex = await make_vertex()
    vertex.script(_answer)
    client = express_client(vertex.url)
    response = await client.aio.models.generate_content(model=GEMINI_MODEL, contents="hi")
    assert response.text == "Vertex says hi"
    (received,) = vertex.fake.received
    assert received.path == f"/v1beta1/publishers/google/models/{GEMINI_MODEL}:generateContent"
    assert received.headers["x-goog-api-key"].startswith("AIza") and "Authorization" not in received.headers


async def test_a_vertex_loop_is_stopped_without_a_retry(make_vertex: VertexFactory) -> None:
    vertex = await make_vertex()
    vertex.script(gemini_script(50, model=GEMINI_MODEL))
    with pytest.raises(genai_errors.ClientError) as caught:
        await gemini_agent(gemini_client(vertex.url, run="vertex-loop"), soft_error_tool, max_steps=20)
    assert caught.value.code == 429 and "non_progress" in str(caught.value.message)
    records = _records(vertex.sink)
    stopped = [r for r in records if r.blocked_by]
    assert len(stopped) == 1 and len(vertex.fake.received) == len(records) - 1  # one stop, no retry of it
    (trip,) = trips_of(vertex.sink)
    assert trip.detector == "non_progress" and trip.run_id == "vertex-loop"
    assert {r.provider for r in records} == {"vertex"} and sum(r.usd for r in records) > 0


async def test_adk_on_vertex_is_stopped(make_vertex: VertexFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "TRUE")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", LOCATION)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    vertex = await make_vertex()

    def loop(received: Received) -> Reply:
        body = received.json()
        assert "Your internal name is" in orjson.dumps(body.get("systemInstruction")).decode()  # ADK on the wire
        turn = sum(1 for c in body["contents"] for p in c["parts"] if "functionResponse" in p)
        return Reply.json(payloads.gemini_response(calls=[("parse_document", {"attempt": turn})], model=GEMINI_MODEL))

    vertex.script(loop)

    def parse_document(attempt: int) -> dict[str, Any]:
        """Parse a document."""
        return {"status": "partial_parse_error", "data": None}

    # With a base URL of its own, google-genai takes the project and location only from its arguments (not the
    # environment): ADK passes them on through `client_kwargs`, as docs/clients.md says.
    credentials = Credentials(token=TOKEN)  # type: ignore[no-untyped-call]
    where = {"project": PROJECT, "location": LOCATION, "credentials": credentials}
    model = Gemini(model=GEMINI_MODEL, base_url=vertex.url, client_kwargs=where)
    agent = LlmAgent(name="extractor", model=model, instruction="Extract the total.", tools=[parse_document])
    runner = Runner(agent=agent, app_name="vertex-e2e", session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="vertex-e2e", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text="Extract the invoice total.")])
    with pytest.raises(genai_errors.ClientError) as caught:
        async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            pass
    assert caught.value.code == 429 and "non_progress" in str(caught.value.message)
    assert all(r.path.startswith(f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/") for r in vertex.fake.received)
    assert {r.provider for r in _records(vertex.sink)} == {"vertex"}


async def _loop_until_stopped(url: str, token: str, run: str) -> None:
    with pytest.raises(genai_errors.ClientError):
        await gemini_agent(gemini_client(url, token=token, run=run), soft_error_tool, max_steps=20)


async def test_a_project_s_stopped_run_stays_stopped_across_a_token_refresh(make_vertex: VertexFactory) -> None:
    """The run is the project's, not the token's: once the new token is proven (its first success), the
    run it continues is the one stopped under the old token."""
    vertex = await make_vertex()
    vertex.script(gemini_script(50, model=GEMINI_MODEL))
    first = gemini_client(vertex.url, run="warm-up")
    await first.aio.models.generate_content(model=GEMINI_MODEL, contents="a token's first success proves it")
    await _loop_until_stopped(vertex.url, TOKEN, "refreshed")
    refreshed = gemini_client(vertex.url, token=TOKEN_2, run="other-run")
    await refreshed.aio.models.generate_content(model=GEMINI_MODEL, contents="prove the new token")
    continued = gemini_client(vertex.url, token=TOKEN_2, run="refreshed")
    with pytest.raises(genai_errors.ClientError) as caught:
        await continued.aio.models.generate_content(model=GEMINI_MODEL, contents="go on")
    assert caught.value.code == 429 and "non_progress" in str(caught.value.message)
    records = _records(vertex.sink)
    assert len({r.key_hash for r in records if r.run_id == "refreshed"}) == 1  # one identity across tokens


async def test_a_token_vertex_refuses_cannot_act_as_the_project(make_vertex: VertexFactory) -> None:
    """An attacker names the victim's project and run id with a token Vertex AI refuses (401): its requests
    are never the project's, so the loop it sends stops nothing of the victim's, and counts nothing there."""
    vertex = await make_vertex()
    vertex.script(gemini_script(50, model=GEMINI_MODEL))
    victim = gemini_client(vertex.url, run="victim")
    await victim.aio.models.generate_content(model=GEMINI_MODEL, contents="hi")
    attacker = gemini_client(vertex.url, token="ya29.stolen-nothing", run="victim")
    for _ in range(6):
        with pytest.raises(genai_errors.ClientError):  # Vertex's 401, relayed; then the attacker's own stop
            await gemini_agent(attacker, soft_error_tool, max_steps=1)
    answer = await victim.aio.models.generate_content(model=GEMINI_MODEL, contents="still mine")
    assert answer.function_calls  # the victim's run goes on
    victims = {r.key_hash for r in _records(vertex.sink) if r.status == 200}
    attackers = {r.key_hash for r in _records(vertex.sink) if r.status != 200}
    assert victims.isdisjoint(attackers)
    assert all(trip.key_hash in attackers for trip in trips_of(vertex.sink))  # it stopped only itself


@pytest.mark.parametrize("location", ["evil.example.com", "us-central1.evil", "US"])
async def test_a_location_that_is_no_region_goes_nowhere(make_vertex: VertexFactory, location: str) -> None:
    """The regional host is built from the path's location: anything but a plain region name is refused."""
    vertex = await make_vertex()
    vertex.script(_answer)
    client = gemini_client(vertex.url, location=location)
    with pytest.raises(genai_errors.ClientError) as caught:
        await client.aio.models.generate_content(model=GEMINI_MODEL, contents="hello")
    assert caught.value.code == 404 and vertex.fake.received == []


async def test_an_allowlist_names_the_project_not_its_tokens(make_vertex: VertexFactory) -> None:
    """Tokens rotate, so `runs.key_allowlist` names a project by the hash of `account:<project>`: every token of
    that project passes (Vertex AI still judges the token), and a key the list does not name is refused."""
    project_hash = KeyHasher(b"test-salt").hash(ACCOUNT_PREFIX + PROJECT)
    vertex = await make_vertex(runs={"key_allowlist": [project_hash]})
    vertex.script(_answer)
    for token in (TOKEN, TOKEN_2):
        client = gemini_client(vertex.url, token=token)
        assert (await client.aio.models.generate_content(model=GEMINI_MODEL, contents="hi")).text == "Vertex says hi"
    express = express_client(vertex.url)  # an API key the list does not name
    with pytest.raises(genai_errors.ClientError) as caught:
        await express.aio.models.generate_content(model=GEMINI_MODEL, contents="hi")
    assert caught.value.code == 403 and len(vertex.fake.received) == 2
