"""Sessions are runs: without `X-Run-Id`, the session a client names roots its run before its first message.

codex opens every conversation in one directory with the same `<environment_context>` block, so two
sessions there share their first user message. Each names its session (`session-id`, `thread-id`,
`prompt_cache_key`, `client_metadata`), and so does Claude Code (`X-Claude-Code-Session-Id`, the
`session_id` in `metadata.user_id`). The step limit here is 1: a session's second request is refused,
and a session that inherited another's run would be refused at its first.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.conftest import ProxyFactory
from tests.e2e import node_clients, payloads
from tests.e2e.claude import ClaudeFactory
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

ONE_STEP: dict[str, Any] = {"guard": {"detectors": {"max_requests": {"limit": 1}}}}
ENVIRONMENT = "<environment_context>\n  <cwd>/home/dev/shop</cwd>\n  <shell>bash</shell>\n</environment_context>"


def sse(response: dict[str, Any]) -> Reply:
    return Reply.sse([b"data: " + orjson.dumps(event) + b"\n\n" for event in payloads.responses_events(response)])


def agent_response(body: dict[str, Any]) -> dict[str, Any]:
    """The model's Response to a request `body`: a look-up of the goal first, the answer once it has it."""
    answered = any(item.get("type") == "function_call_output" for item in body["input"])
    return payloads.response_object("Done.") if answered else payloads.response_object(calls=[("c1", "get_goal", "{}")])


def agent_step(received: Received) -> Reply:
    """The model: looks up the goal first, answers once it has it (a codex session of two steps)."""
    body = received.json()
    response = agent_response(body)
    return sse(response) if body.get("stream") else Reply.json(response)


def codex_shaped(session: str, task: str) -> dict[str, Any]:
    """The body and headers of a codex session's first request, as codex 0.171 sends them."""
    body = {
        "model": "gpt-5",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ENVIRONMENT}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": task}]},
        ],
        "store": False,
        "prompt_cache_key": session,
        "extra_headers": {"session-id": session, "thread-id": session},
        "extra_body": {"client_metadata": {"session_id": session}},
    }
    return body


async def test_two_codex_sessions_in_one_directory_are_two_runs_and_a_stopped_one_blocks_no_other(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.script = agent_step
    client = openai.AsyncOpenAI(base_url=await make_proxy(**ONE_STEP) + "/v1", api_key="sk-codex", max_retries=0)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    await client.responses.create(**codex_shaped(first, "Fix the failing test"))
    with pytest.raises(openai.RateLimitError) as refused:
        await client.responses.create(**codex_shaped(first, "Fix the failing test"))
    assert refused.value.code == "runguard_max_requests"
    await client.responses.create(**codex_shaped(second, "Add a changelog entry"))  # not the stopped run
    assert [r.headers["session-id"] for r in upstream.received] == [first, second]
    await eventually(lambda: len(requests_of(sink)) == 3)
    runs = [r.run_id for r in requests_of(sink)]
    assert runs[0] == runs[1] != runs[2]
    await client.close()


async def test_with_x_run_id_two_sessions_are_the_run_it_names(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    upstream.script = agent_step
    client = openai.AsyncOpenAI(
        base_url=await make_proxy(**ONE_STEP) + "/v1",
        api_key="sk-codex",
        max_retries=0,
        default_headers={"X-Run-Id": "release-42"},
    )
    await client.responses.create(**codex_shaped(str(uuid.uuid4()), "Fix the failing test"))
    with pytest.raises(openai.RateLimitError) as refused:
        await client.responses.create(**codex_shaped(str(uuid.uuid4()), "Add a changelog entry"))
    assert refused.value.code == "runguard_max_requests"
    assert len(upstream.received) == 1
    await client.close()


async def test_one_key_naming_another_key_s_session_does_not_reach_its_stopped_run(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    upstream.script = agent_step
    url = await make_proxy(**ONE_STEP) + "/v1"
    victim = openai.AsyncOpenAI(base_url=url, api_key="sk-victim", max_retries=0)
    intruder = openai.AsyncOpenAI(base_url=url, api_key="sk-intruder", max_retries=0)
    session = str(uuid.uuid4())
    await intruder.responses.create(**codex_shaped(session, "Fix the failing test"))  # spends the step
    await victim.responses.create(**codex_shaped(session, "Fix the failing test"))  # its own run: goes upstream
    assert len(upstream.received) == 2
    for client in (victim, intruder):
        await client.close()


def claude_code_user(session: str) -> str:
    return json.dumps({"device_id": "9f" * 32, "account_uuid": "", "session_id": session})


@pytest.mark.parametrize("in_user_id", [True, False], ids=["header-and-user-id", "header-alone"])
async def test_two_claude_code_sessions_opening_alike_are_two_runs(
    make_claude: ClaudeFactory, in_user_id: bool
) -> None:
    claude = await make_claude(**ONE_STEP)
    claude.claude.script = lambda _: Reply.json(payloads_message())
    client = anthropic.AsyncAnthropic(base_url=claude.url, api_key="sk-ant-e2e", max_retries=0)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    messages: Any = [{"role": "user", "content": "<system-reminder>project memory</system-reminder>"}]

    async def ask(session: str) -> Any:
        return await client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            messages=messages,
            metadata={"user_id": claude_code_user(session)} if in_user_id else anthropic.NOT_GIVEN,
            extra_headers={"X-Claude-Code-Session-Id": session},
        )

    await ask(first)
    with pytest.raises(anthropic.RateLimitError):
        await ask(first)
    await ask(second)
    assert len(claude.claude.received) == 2
    assert [t.detector for t in trips_of(claude.sink)] == ["max_requests"]
    await client.close()


def payloads_message() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "On it."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 3},
    }


async def test_the_real_codex_cli_run_twice_in_one_directory_is_two_runs(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink, tmp_path: Path
) -> None:
    """Each `codex exec` is stopped at its second step; the second session's first step still goes upstream."""
    node = node_clients.require_node(node_clients.CODEX)
    upstream.script = agent_step
    env = node_clients.codex_home(tmp_path / "home", await make_proxy(**ONE_STEP))
    work = tmp_path / "shop"
    work.mkdir()
    for task in ("Fix the failing test", "Add a changelog entry"):
        await node_clients.codex_exec(node, env, work, task)
    sessions = [r.headers.get("session-id") for r in upstream.received]
    assert len(sessions) == 2 and sessions[0] != sessions[1] and None not in sessions
    await eventually(lambda: len(trips_of(sink)) == 2, within=3.0)
    runs = {t.run_id for t in trips_of(sink)}
    assert len(runs) == 2 and {t.detector for t in trips_of(sink)} == {"max_requests"}
