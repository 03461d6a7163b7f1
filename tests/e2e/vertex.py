"""Vertex AI for the end-to-end tests: the real proxy with its Vertex upstream on a fake, and the SDKs on it.

The fake plays Vertex AI: Gemini models answer `generateContent` (and `:streamGenerateContent`, SSE or one
JSON array), Claude models `:rawPredict` / `:streamRawPredict`, and it refuses (401) any OAuth token that is
not one of `TOKENS` for the project its path names, as Vertex AI does, so a test can prove that a client
with no valid token for a project cannot act as that project.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from anthropic import AsyncAnthropicVertex
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

PROJECT = "acme-agents"
LOCATION = "us-central1"
CLAUDE_REGION = "us-east5"
GEMINI_MODEL = "gemini-2.5-flash"
CLAUDE_MODEL = "claude-haiku-4-5@20251001"
TOKEN = "ya29.a0-acme-token-one"
TOKEN_2 = "ya29.a0-acme-token-two"  # the same service account's token an hour later
EXPRESS_KEY = "AIza-express-mode-key-0001"
_PATH_PROJECT = re.compile(r"/projects/([^/]+)/")


@dataclass
class Vertex:
    """A proxy whose Vertex AI upstream is `fake`; `url` is its base URL (`http://HOST:PORT`)."""

    url: str
    fake: FakeUpstream
    sink: ListSink
    tokens: dict[str, str] = field(default_factory=dict)  # token -> the project it is valid for

    def script(self, answer: Callable[[Received], Reply]) -> None:
        """Answer with `answer`, after Vertex AI's own check: a token not valid for the path's project gets 401."""

        def checked(received: Received) -> Reply:
            token = received.headers.get("Authorization", "").removeprefix("Bearer ")
            named = _PATH_PROJECT.search(received.path)
            if named is not None and self.tokens.get(token) != named[1]:
                error = {
                    "code": 401,
                    "message": "Request had invalid authentication credentials.",
                    "status": "UNAUTHENTICATED",
                }
                return Reply.json({"error": error}, status=401)
            return answer(received)

        self.fake.script = checked


VertexFactory = Callable[..., Any]


@pytest.fixture
async def make_vertex(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[VertexFactory]:
    """make_vertex(**sections) -> a `Vertex`: the real proxy with `upstreams.others.vertex` on `upstream`
    (what `RUNGUARD_VERTEX_UPSTREAM` sets); every proxy made is stopped after the test."""
    running = []

    async def make(**sections: Any) -> Vertex:
        upstreams = {"others": {"vertex": upstream.url}, **sections.pop("upstreams", {})}
        proxy = await start_proxy(settings_for(upstream.url, upstreams=upstreams, **sections), sink=sink)
        running.append(proxy)
        return Vertex(proxy.url, upstream, sink, {TOKEN: PROJECT, TOKEN_2: PROJECT})

    yield make
    for proxy in running:
        await proxy.stop()


def gemini_client(url: str, token: str = TOKEN, run: str | None = None, location: str = LOCATION) -> genai.Client:
    """google-genai in Vertex AI mode on the proxy, with a static OAuth token (no refresh, no ADC)."""
    headers = {"X-Run-Id": run} if run else None
    return genai.Client(
        vertexai=True,
        project=PROJECT,
        location=location,
        credentials=Credentials(token=token),  # type: ignore[no-untyped-call]
        http_options=types.HttpOptions(base_url=url, headers=headers),
    )


def express_client(url: str) -> genai.Client:
    """google-genai in Vertex AI express mode: an API key, no project."""
    return genai.Client(vertexai=True, api_key=EXPRESS_KEY, http_options=types.HttpOptions(base_url=url))


def claude_client(base_url: str, token: str = TOKEN, run: str | None = None, **kwargs: Any) -> AsyncAnthropicVertex:
    """The anthropic SDK's AnthropicVertex on the proxy (its default retries), with a static access token."""
    headers = {"X-Run-Id": run} if run else None
    return AsyncAnthropicVertex(
        region=CLAUDE_REGION,
        project_id=PROJECT,
        access_token=token,
        base_url=base_url,
        default_headers=headers,
        **kwargs,
    )
