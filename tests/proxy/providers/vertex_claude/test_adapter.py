from __future__ import annotations

import orjson

from runguard.proxy.providers.answers import StopNotice
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.vertex_claude.adapter import VertexClaudeAdapter

MODEL = "claude-sonnet-4-5@20250929"
BODY = {
    "anthropic_version": "vertex-2023-10-16",
    "max_tokens": 256,
    "system": "You find invoices.",
    "messages": [{"role": "user", "content": "Find INV-7."}],
    "tools": [{"name": "search", "input_schema": {"type": "object"}}],
}


def test_the_model_comes_from_the_path() -> None:
    adapter = VertexClaudeAdapter()
    info = adapter.parse_request(orjson.dumps(BODY), RequestContext(path_model=MODEL))
    assert (info.api, info.model, info.stream, info.tool_names) == ("vertex_claude", MODEL, False, ("search",))
    assert adapter.provider == "anthropic"  # whose format its answers are in


def test_a_body_s_own_model_and_stream_are_kept_and_bad_bodies_fail_open() -> None:
    adapter = VertexClaudeAdapter()
    info = adapter.parse_request(orjson.dumps({**BODY, "model": "x", "stream": True}), RequestContext(path_model=MODEL))
    assert info.model == "x" and info.stream
    broken = adapter.parse_request(b"{not json", RequestContext(path_model=MODEL))
    assert broken.parse_error and broken.model != MODEL


def test_its_stop_is_an_anthropic_message_naming_the_path_s_model() -> None:
    adapter = VertexClaudeAdapter()
    info = adapter.parse_request(orjson.dumps(BODY), RequestContext(path_model=MODEL))
    answer = adapter.stop_response(StopNotice("non_progress", "run-1", "the same result three times"), info)
    assert answer is not None and answer.status == 200
    body = orjson.loads(answer.body)
    assert body["type"] == "message" and body["model"] == MODEL and "non_progress" in body["content"][0]["text"]
    error = adapter.error_response(StopNotice("budget", "run-1", "over budget"), stream=False)
    assert error.status == 429 and error.headers["x-should-retry"] == "false"
