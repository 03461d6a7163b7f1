"""A stop lands in every client: it ends within 2 s of its run's first refusal, shows RunGuard's reason, and no
retry of it reaches the proxy.

The real clients of `tests/e2e/node/` (the Vercel AI SDK with its OpenAI, Google and Anthropic providers, OpenAI's
Codex CLI, Claude Code), run as a user runs them against the real proxy, a fake upstream behind it on loopback.
Each is refused either at its first request (`context_window` set to trip on any history) or mid-run (a step
limit), and answered as its family needs (`guard.client_answers`, docs/stopping.md).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runguard.proxy.store.records import Record, RequestRecord
from tests.e2e import node_clients, payloads
from tests.e2e.test_sessions import agent_response, agent_step
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

AI_SDK = node_clients.NODE_DIR / "ai_sdk_agent.mjs"
BLOATED: dict[str, Any] = {"guard": {"detectors": {"context_window": {"warn_ratio": 1e-7, "stop_ratio": 1e-6}}}}
STEPS: dict[str, Any] = {"guard": {"detectors": {"max_requests": {"limit": 2}}}}
WITHIN = 2.0  # seconds from the run's first refusal to the client's end


class TimedSink(ListSink):
    """Records, and when the first refusal was recorded (its answer has gone out by then)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused_at: float | None = None

    def submit(self, record: Record) -> None:
        if isinstance(record, RequestRecord) and record.blocked_by and self.refused_at is None:
            self.refused_at = time.monotonic()
        super().submit(record)

    def refusals(self) -> list[RequestRecord]:
        return [r for r in self.records if isinstance(r, RequestRecord) and r.blocked_by]


async def _proxy(upstream: FakeUpstream, sink: TimedSink, **sections: Any) -> Any:
    return await start_proxy(settings_for(upstream.url, upstreams={"anthropic": upstream.url}, **sections), sink=sink)


def _ended_in_time(sink: TimedSink, ended: float) -> float:
    assert sink.refused_at is not None, "nothing was refused"
    took = ended - sink.refused_at
    assert took < WITHIN, f"the client went on for {took:.2f} s after its first refusal"
    return took


async def _ai_sdk(provider: str, mode: str, url: str, tmp_path: Path) -> dict[str, Any]:
    node = node_clients.require_node(AI_SDK, node_clients.MODULES / "ai")
    env = node_clients.offline_env(tmp_path / "home")
    ran = await node_clients.run([node, str(AI_SDK), provider, mode, url], env=env, cwd=node_clients.NODE_DIR)
    assert ran.code == 0, ran.err
    result: dict[str, Any] = json.loads(ran.out.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("mode", ["generate", "stream"])
@pytest.mark.parametrize("provider", ["openai", "openai-chat", "google", "anthropic"])
async def test_the_ai_sdk_refused_at_its_first_request_raises_the_reason_at_once(
    upstream: FakeUpstream, tmp_path: Path, provider: str, mode: str
) -> None:
    sink = TimedSink()
    proxy = await _proxy(upstream, sink, **BLOATED)
    try:
        result = await _ai_sdk(provider, mode, proxy.url, tmp_path)
        ended = time.monotonic()
    finally:
        await proxy.stop()
    assert not result["ok"] and "RunGuard stopped run" in result["error"] and "context_window" in result["error"]
    assert "RetryError" not in result["error"]
    _ended_in_time(sink, ended)
    assert len(sink.refusals()) == 1 and upstream.received == []  # no retry reached the proxy


def _step(received: Received) -> Reply:
    """Each provider's model: searches again at every step, a new query each time."""
    body, turn = received.json(), len(received.body)
    query = {"query": f"flights lisbon berlin page {turn}"}
    if "contents" in body:
        return Reply.json(payloads.gemini_response(calls=[("search", query)]))
    if received.path.endswith("/messages"):
        use = {"type": "tool_use", "id": f"toolu_{turn}", "name": "search", "input": query}
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
        usage = {"input_tokens": 20, "output_tokens": 6}
        return Reply.json(
            {**message, "content": [use], "stop_reason": "tool_use", "stop_sequence": None, "usage": usage}
        )
    if "input" in body:
        return Reply.json(payloads.response_object(calls=[(f"c{turn}", "search", json.dumps(query))]))
    return Reply.json(payloads.chat_completion(tool_calls=[(f"c{turn}", "search", json.dumps(query))]))


@pytest.mark.parametrize("provider", ["openai", "openai-chat", "google", "anthropic"])
async def test_the_ai_sdk_stopped_mid_run_ends_at_once_with_the_reason(
    upstream: FakeUpstream, tmp_path: Path, provider: str
) -> None:
    upstream.script = _step
    sink = TimedSink()
    proxy = await _proxy(upstream, sink, **STEPS)
    try:
        result = await _ai_sdk(provider, "generate", proxy.url, tmp_path)
        ended = time.monotonic()
    finally:
        await proxy.stop()
    assert not result["ok"] and "max_requests" in result["error"] and "RunGuard stopped run" in result["error"]
    _ended_in_time(sink, ended)
    assert len(upstream.received) == 2 and len(sink.refusals()) == 1


async def _codex_stopped_mid_run(upstream: FakeUpstream, tmp_path: Path, websockets: bool) -> TimedSink:
    """`codex exec` on a proxy whose run limit stops its second request: it ends at once, having printed the
    reason and how to reset (a `Reset with` line); the run's records, to check what reached the upstream."""
    node = node_clients.require_node(node_clients.CODEX)
    sink = TimedSink()
    proxy = await _proxy(upstream, sink, guard={"detectors": {"max_requests": {"limit": 1}}})
    try:
        env = node_clients.codex_home(tmp_path / "home", proxy.url, websockets=websockets)
        ran = await node_clients.codex_exec(node, env, tmp_path, "Fix the failing test")
        ended = time.monotonic()
    finally:
        await proxy.stop()
    assert ran.code != 0
    assert "RunGuard stopped run" in ran.printed and "max_requests" in ran.printed
    assert "Reset with" in ran.printed  # how to get going again reaches the person too
    _ended_in_time(sink, ended)
    return sink


async def test_codex_stopped_mid_run_ends_at_once_and_prints_the_reason(upstream: FakeUpstream, tmp_path: Path) -> None:
    upstream.script = agent_step
    sink = await _codex_stopped_mid_run(upstream, tmp_path, websockets=False)
    assert len(upstream.received) == 1 and len(sink.refusals()) == 1


def _socket_step(message: str | bytes) -> list[str]:
    """`agent_step` over a Responses WebSocket: each `response.create` answered by its response's events."""
    return [json.dumps(event) for event in payloads.responses_events(agent_response(json.loads(message)))]


async def test_codex_over_its_responses_websocket_stopped_mid_run_prints_the_reason(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    """The same stop with the Codex CLI on a Responses WebSocket: its handshake names it (`originator`), so its
    socket gets the answer it prints (a 400) rather than the 429 it reports only as a retry limit."""
    upstream.socket_script = _socket_step
    sink = await _codex_stopped_mid_run(upstream, tmp_path, websockets=True)
    assert len(upstream.handshakes) == 1 and len(upstream.socket_received) == 1 and not upstream.received
    assert [r.status for r in sink.refusals()] == [400]


async def test_claude_code_refused_at_its_first_request_prints_the_reason(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    node_clients.require_node(node_clients.CLAUDE)
    sink = TimedSink()
    proxy = await _proxy(upstream, sink, **BLOATED)
    try:
        ran = await node_clients.claude_print(proxy.url, tmp_path, "Fix the failing test")
        ended = time.monotonic()
    finally:
        await proxy.stop()
    assert ran.code != 0
    assert "RunGuard stopped run" in ran.printed and "context_window" in ran.printed
    _ended_in_time(sink, ended)
    assert len(sink.refusals()) == 1


def _in_daemon(agent: Callable[[str], Any], url: str) -> asyncio.Future[Any]:
    """Run a framework's blocking call in a daemon thread: one still sleeping in its backoff when the test has
    failed does not hold the test process."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            result = agent(url)
        except BaseException as exc:  # handed to the test, which asserts on it
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, daemon=True).start()
    return done


def _langchain_gemini(url: str) -> Any:
    from langchain_google_genai import ChatGoogleGenerativeAI

    model = ChatGoogleGenerativeAI(model="gemini-2.5-flash", google_api_key="test-key", base_url=url)
    return model.invoke("Find the cheapest flight from Lisbon to Berlin in May.")


def _smolagents(url: str) -> Any:
    from smolagents import CodeAgent, OpenAIServerModel

    model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=url + "/v1", api_key="sk-smol-e2e")
    return CodeAgent(tools=[], model=model, max_steps=3).run("Find the cheapest flight from Lisbon to Berlin in May.")


@pytest.mark.parametrize(
    "agent",
    [_langchain_gemini, _smolagents],
    ids=["langchain-gemini", "smolagents-code-agent"],
)
async def test_python_frameworks_that_retry_a_429_on_their_own_raise_the_reason_at_once(
    upstream: FakeUpstream, agent: Any
) -> None:
    """LangChain's Gemini chat model retried a 429 for 34 s; smolagents waited 60 s before its retry."""
    sink = TimedSink()
    proxy = await _proxy(upstream, sink, **BLOATED)
    try:
        # Each framework wraps the SDK's error its own way: what counts is the message the person reads.
        with pytest.raises(Exception) as raised:
            await asyncio.wait_for(_in_daemon(agent, proxy.url), 10)
        ended = time.monotonic()
    finally:
        await proxy.stop()
    assert "RunGuard stopped run" in str(raised.value) and "context_window" in str(raised.value)
    _ended_in_time(sink, ended)
    assert len(sink.refusals()) == 1 and upstream.received == []
