"""A key whose daily budget is spent cannot spend on the endpoints RunGuard forwards without reading.

The attack that once worked, against the real `runguard-proxy serve`: a key stopped by its daily budget
was refused on chat completions, but its legacy completions, embeddings, images, audio, batches, Gemini
`batchGenerateContent` and Anthropic message batches were forwarded (they are only counted), so the key
went on spending. Now every request of a stopped key that may cost money is refused in the provider's
format, and nothing reaches the provider; what is free (listing models, counting tokens) still works.
The clients are the real SDKs (openai, anthropic) and plain HTTP for Gemini's batch call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.e2e import payloads
from tests.e2e.trust import serving
from tests.support import anthropic_upstream
from tests.support.upstream import FakeUpstream, Received, Reply

pytestmark = pytest.mark.slow

OPENAI_KEY = "sk-spent-openai-1111"
GEMINI_KEY = "AIza-spent-gemini-2222"
CLAUDE_KEY = "sk-ant-spent-claude-3333"
BUDGET = {"detectors": {"budget": {"key_daily_usd": 0.000001}}}  # one answer spends it
GEMINI = "/v1beta/models/gemini-2.5-flash"


def _answers(request: Received) -> Reply:
    path = request.path
    if path.endswith("/chat/completions"):
        return Reply.json(payloads.chat_completion("ok"))
    if path.endswith(":generateContent"):
        return Reply.json(payloads.gemini_response())
    if path.endswith("/messages/count_tokens"):
        return Reply.json({"input_tokens": 12})
    if path.endswith("/v1/messages"):
        return Reply.json(anthropic_upstream.message(anthropic_upstream.Step(text="ok")))
    if path.endswith("/embeddings"):
        vector = {"object": "embedding", "index": 0, "embedding": [0.5]}
        return Reply.json({"object": "list", "data": [vector], "model": "m", "usage": {"prompt_tokens": 1}})
    return Reply.json({"object": "list", "data": []})


async def _spend_every_key(url: str) -> None:
    chat = openai.AsyncOpenAI(base_url=url + "/v1", api_key=OPENAI_KEY, max_retries=0)
    await chat.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    async with httpx.AsyncClient(base_url=url, headers={"x-goog-api-key": GEMINI_KEY}) as http:
        contents = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        assert (await http.post(GEMINI + ":generateContent", json=contents)).status_code == 200
    claude = anthropic.AsyncAnthropic(base_url=url, api_key=CLAUDE_KEY, max_retries=0)
    await claude.messages.create(model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}])


async def test_a_spent_key_cannot_spend_on_forwarded_endpoints_and_free_ones_still_work(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = _answers
    async with serving(tmp_path, upstream.url, guard=BUDGET, upstreams={"anthropic": upstream.url}) as served:
        url = served.url
        await _spend_every_key(url)
        spent_at = len(upstream.received)
        sdk = openai.AsyncOpenAI(base_url=url + "/v1", api_key=OPENAI_KEY, max_retries=0)
        claude = anthropic.AsyncAnthropic(base_url=url, api_key=CLAUDE_KEY, max_retries=0)
        batch = {"custom_id": "a", "params": {"model": "claude-haiku-4-5", "max_tokens": 5, "messages": []}}
        costly: list[Callable[[], Awaitable[Any]]] = [
            lambda: sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]),
            lambda: sdk.completions.create(model="gpt-3.5-turbo-instruct", prompt="x"),
            lambda: sdk.embeddings.create(model="text-embedding-3-small", input="x"),
            lambda: sdk.images.generate(model="dall-e-3", prompt="x"),
            lambda: sdk.audio.speech.create(model="tts-1", voice="alloy", input="x"),
            lambda: sdk.batches.create(input_file_id="f", endpoint="/v1/chat/completions", completion_window="24h"),
            lambda: claude.messages.batches.create(requests=[batch]),  # type: ignore[list-item]
        ]
        for call in costly:
            with pytest.raises((openai.RateLimitError, anthropic.RateLimitError)) as caught:
                await call()
            assert "daily budget" in str(caught.value)
        async with httpx.AsyncClient(base_url=url, headers={"x-goog-api-key": GEMINI_KEY}) as http:
            body = {"batch": {"input_config": {"requests": {"requests": []}}}}
            refused = await http.post(GEMINI + ":batchGenerateContent", json=body)
            assert refused.status_code == 429
            assert refused.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
            assert refused.headers["x-runguard-trip"] == "budget"
            assert len(upstream.received) == spent_at  # nothing costly reached the provider
            # Free requests of the same keys still go through.
            assert (await sdk.models.list()).data == []
            assert (await claude.messages.count_tokens(model="claude-haiku-4-5", messages=[])).input_tokens == 12
            assert (await http.post(GEMINI + ":countTokens", json={"contents": []})).status_code == 200
        # Another key is not stopped by this one's budget.
        other = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-other-key-4444", max_retries=0)
        await other.embeddings.create(model="text-embedding-3-small", input="x")
    assert [r.path for r in upstream.received[spent_at:]] == [
        "/v1/models",
        "/v1/messages/count_tokens",
        GEMINI + ":countTokens",
        "/v1/embeddings",
    ]
