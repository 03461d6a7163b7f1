"""Claude agents through the real proxy: loops stopped with a 429 the SDK does not retry, stop answers,
budgets that count cached tokens at their rates, the SDK's tool runner, and pydantic-ai on Claude.

Each test counts what reached the fake Anthropic upstream and what the client sent (retries included).
"""

from __future__ import annotations

import itertools
from typing import Any

import anthropic
import pytest
from anthropic import beta_async_tool
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

from tests.e2e.claude import (
    KEY,
    MODEL,
    ClaudeFactory,
    Sent,
    client,
    progressing,
    soft_error,
    tool_loop,
)
from tests.e2e.faults import eventually, requests_of
from tests.support.anthropic_upstream import Cache, Step, claude

SAME = Step(calls=[("search", {"query": "INV-7 total"})])


def rephrasing(n: int) -> Step:
    return Step(calls=[("search", {"query": f"invoice INV-7 total attempt {n}"})])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_soft_error_loop_trips_non_progress_with_a_429_the_sdk_does_not_retry(
    make_claude: ClaudeFactory, stream: bool
) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude(rephrasing)
    sent = Sent()
    sdk = client(proxy.url, run=f"np-{stream}", sent=sent)  # the SDK's default: 2 retries of a 429
    with pytest.raises(anthropic.RateLimitError) as caught:
        await tool_loop(sdk, soft_error, stream=stream)
    error = caught.value
    assert error.response.headers["x-runguard-trip"] == "non_progress"
    assert error.response.headers["x-should-retry"] == "false"
    body = error.body
    assert isinstance(body, dict) and body["error"]["type"] == "rate_limit_error"
    assert "non_progress" in body["error"]["message"] and "3 times" in body["error"]["message"]
    assert len(proxy.claude.received) == 3  # the 4th request carried the 3rd identical result
    assert len(sent.requests) == 4  # and the 429 was not retried
    assert not proxy.openai.received


async def test_the_same_failing_call_over_and_over_trips_repeat_call(make_claude: ClaudeFactory) -> None:
    """The same call getting the same answer, other work between (so `non_progress`, off here, is not what
    stops it): `repeat_call` at the 4th identical call and answer."""
    proxy = await make_claude(guard={"detectors": {"non_progress": {"action": "off"}}})
    pages = itertools.count()
    proxy.claude.script = claude(lambda n: SAME if n % 2 == 0 else Step(calls=[("search", {"query": f"p{n}"})]))
    sent = Sent()
    sdk = client(proxy.url, run="repeat", sent=sent)
    with pytest.raises(anthropic.RateLimitError) as caught:
        await tool_loop(
            sdk, lambda name, args: "not found" if args["query"] == "INV-7 total" else f"page {next(pages)}"
        )
    assert caught.value.response.headers["x-runguard-trip"] == "repeat_call"
    assert len(proxy.claude.received) == 7 and len(sent.requests) == 8


NOVELTY_RESULTS = [
    "Invoice INV-7 from Acme GmbH, issued 2026-03-02, total due EUR 1,250.50, payment terms 30 days net, "
    "contact billing@acme.example for questions about this invoice or its line items",
]


async def test_rephrased_searches_with_stale_results_trip_a_novelty_style_detector(make_claude: ClaudeFactory) -> None:
    """New words every turn, the same findings back: `novelty` stops it at the 4th stale result."""
    proxy = await make_claude()
    proxy.claude.script = claude(rephrasing)
    sent = Sent()
    sdk = client(proxy.url, run="novelty", sent=sent)
    with pytest.raises(anthropic.RateLimitError) as caught:
        await tool_loop(sdk, lambda name, args: f"{NOVELTY_RESULTS[0]} (query: {args['query']})", steps=30)
    assert caught.value.response.headers["x-runguard-trip"] == "novelty"
    assert len(proxy.claude.received) == 4 and len(sent.requests) == 5


async def test_a_healthy_loop_whose_results_change_finishes(make_claude: ClaudeFactory) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([rephrasing(0), rephrasing(1), rephrasing(2)], then=Step(text="The total is 1,250.50"))
    sdk = client(proxy.url, run="healthy")
    answer = await tool_loop(sdk, lambda name, args: f'{{"hits": ["doc-{args["query"][-1]}"], "page": "{args}"}}')
    assert answer == "The total is 1,250.50"
    assert len(proxy.claude.received) == 4


@pytest.mark.parametrize("stream", [False, True])
async def test_a_stop_answer_ends_the_loop_with_a_final_message(make_claude: ClaudeFactory, stream: bool) -> None:
    proxy = await make_claude(guard={"detectors": {"non_progress": {"response": "stop"}}})
    proxy.claude.script = claude(rephrasing)
    sdk = client(proxy.url, run=f"stop-{stream}")
    answer = await tool_loop(sdk, soft_error, stream=stream)
    assert "non_progress" in answer and "runguard-proxy" not in answer
    assert len(proxy.claude.received) == 3


CACHED = Step(calls=[("search", {"query": "x"})], usage=(1000, 2000), cache=Cache(read=100_000, write_1h=50_000))


async def test_a_budget_counts_cached_tokens_at_their_rates(make_claude: ClaudeFactory) -> None:
    """claude-haiku-4-5 per response: 1k input $0.001, 100k cache reads $0.01, 50k 1-hour writes $0.10, 2k output
    $0.01: $0.121. A $0.30 budget lets 3 responses through and stops the 4th request ($0.363 spent). Counted as
    plain input (151k at $1) the same responses cost $0.161, and a 4th would have gone out."""
    proxy = await make_claude(guard={"detectors": {"budget": {"run_usd": 0.30}}})
    proxy.claude.script = claude(
        lambda n: Step(calls=[("search", {"query": f"q{n}"})], usage=CACHED.usage, cache=CACHED.cache)
    )
    with pytest.raises(anthropic.RateLimitError) as caught:
        await tool_loop(client(proxy.url, run="budget", max_retries=0), progressing)
    assert caught.value.response.headers["x-runguard-trip"] == "budget"
    assert len(proxy.claude.received) == 3
    await eventually(lambda: len([r for r in requests_of(proxy.sink) if r.run_id == "budget"]) == 4)
    records = [r for r in requests_of(proxy.sink) if r.run_id == "budget" and r.blocked_by is None]
    assert [record.usd for record in records] == pytest.approx([0.121] * 3)
    assert {(record.input_tokens, record.cached_tokens, record.provider, record.api) for record in records} == {
        (151_000, 100_000, "anthropic", "messages")
    }


async def test_web_searches_are_billed_per_call(make_claude: ClaudeFactory) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([Step(text="Found.", usage=(0, 0), searches=4)])
    await client(proxy.url, run="searches").messages.create(
        model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "q"}]
    )
    await eventually(lambda: len(requests_of(proxy.sink)) == 1)
    assert requests_of(proxy.sink)[0].usd == pytest.approx(0.04)  # USD 10 per 1k searches


async def test_the_sdk_tool_runner_is_stopped_without_retries(make_claude: ClaudeFactory) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude(rephrasing)
    sent = Sent()
    sdk = client(proxy.url, run="runner", sent=sent)

    @beta_async_tool
    async def search(query: str) -> str:
        """Search the invoice archive."""
        return soft_error("search", {"query": query})

    runner = sdk.beta.messages.tool_runner(
        model=MODEL, max_tokens=512, tools=[search], messages=[{"role": "user", "content": "Total of INV-7?"}]
    )
    with pytest.raises(anthropic.RateLimitError):
        await runner.until_done()
    assert len(proxy.claude.received) == 3 and len(sent.requests) == 4


def pydantic_agent(url: str, run: str, output_type: Any = str) -> Agent[None, Any]:
    provider = AnthropicProvider(
        anthropic_client=anthropic.AsyncAnthropic(base_url=url, api_key=KEY, default_headers={"X-Run-Id": run})
    )
    agent: Agent[None, Any] = Agent(AnthropicModel(MODEL, provider=provider), output_type=output_type)

    @agent.tool_plain
    def search(query: str) -> str:
        """Search the invoice archive."""
        return soft_error("search", {"query": query})

    return agent


async def test_pydantic_ai_on_claude_healthy_run_passes(make_claude: ClaudeFactory) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([rephrasing(0)], then=Step(text="The total is EUR 1,250.50."))
    result = await pydantic_agent(proxy.url, "pai-ok").run("Total of INV-7?")
    assert result.output == "The total is EUR 1,250.50."
    assert len(proxy.claude.received) == 2 and not proxy.openai.received


async def test_pydantic_ai_on_claude_tool_loop_is_stopped(make_claude: ClaudeFactory) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude(rephrasing)
    with pytest.raises(ModelHTTPError) as caught:
        await pydantic_agent(proxy.url, "pai-loop").run("Total of INV-7?")
    assert caught.value.status_code == 429 and "non_progress" in str(caught.value.body)
    assert len(proxy.claude.received) == 3


class Total(BaseModel):
    message: str
    total: float


async def test_pydantic_ai_output_tool_gets_a_stop_it_can_parse(make_claude: ClaudeFactory) -> None:
    """An agent with an output type forces its output tool: the stop is a call of it, valid for its schema."""
    proxy = await make_claude(guard={"detectors": {"non_progress": {"response": "stop"}}})
    proxy.claude.script = claude(rephrasing)
    result = await pydantic_agent(proxy.url, "pai-stop", output_type=Total).run("Total of INV-7?")
    assert isinstance(result.output, Total) and "non_progress" in result.output.message
    assert len(proxy.claude.received) == 3


WORDS = ("please", "today", "quickly", "again", "really", "now", "anyway", "honestly", "still", "maybe", "ok", "so")
OFF = {"action": "off"}


def flights(n: int) -> Step:
    """A rephrasing of one search each turn (`spiral`'s pattern)."""
    return Step(calls=[("search", {"query": f"cheapest flight from lisbon to berlin in may {WORDS[n % len(WORDS)]}"})])


def toggling(n: int) -> Step:
    """Two actions in turn: search the archive, then list the folder, and again."""
    return Step(calls=[("search", {"query": "INV-7"})] if n % 2 == 0 else [("list_folder", {"path": "/invoices"})])


FRESH = itertools.count()


def fresh(name: str, args: dict[str, Any]) -> str:
    """A result that is new every time: different words, not only a different number."""
    return f"result {next(FRESH)}: " + " ".join(f"{word}{next(FRESH)}" for word in ("alpha", "beta", "gamma"))


LOOPS = [
    # (detector, plan, tool, detectors switched off so that the one under test is what trips, upstream calls)
    ("spiral", flights, fresh, {"novelty": OFF}, 3),
    ("stagnation", lambda n: SAME, lambda name, args: "not found", {"non_progress": OFF, "repeat_call": OFF}, 4),
    ("oscillation", toggling, lambda name, args: f"{name}: nothing", {"non_progress": OFF}, 6),
]


@pytest.mark.parametrize(("detector", "plan", "tool", "off", "reached"), LOOPS, ids=[row[0] for row in LOOPS])
async def test_every_loop_detector_trips_on_a_claude_tool_loop(
    make_claude: ClaudeFactory, detector: str, plan: Any, tool: Any, off: dict[str, Any], reached: int
) -> None:
    proxy = await make_claude(guard={"detectors": off})
    proxy.claude.script = claude(plan)
    sent = Sent()
    with pytest.raises(anthropic.RateLimitError) as caught:
        await tool_loop(client(proxy.url, run=f"loop-{detector}", sent=sent), tool)
    assert caught.value.response.headers["x-runguard-trip"] == detector
    assert len(proxy.claude.received) == reached and len(sent.requests) == reached + 1


async def test_a_count_heuristic_warns_in_a_header_and_lets_the_run_go_on(make_claude: ClaudeFactory) -> None:
    """`consecutive_same_tool` defaults to warn: the answer carries `x-runguard-warning`, nothing is blocked."""
    proxy = await make_claude()
    proxy.claude.script = claude([rephrasing(0), rephrasing(1), rephrasing(2), rephrasing(3)], then=Step(text="ok"))
    sdk = client(proxy.url, run="warned")
    assert await tool_loop(sdk, lambda name, args: f"hits for {args['query']}: {args['query'][::-1]}") == "ok"
    await eventually(lambda: len(requests_of(proxy.sink)) == 5)
    warned = [r for r in requests_of(proxy.sink) if any(v.action == "warn" for v in r.verdicts)]
    assert warned and all(r.blocked_by is None for r in requests_of(proxy.sink))


TRIAGE, BILLING = "You are triage. Hand billing questions to billing.", "You are billing. Hand other questions back."


async def hand_back_and_forth(sdk: anthropic.AsyncAnthropic) -> None:
    """Triage and billing on Claude, each handing the conversation to whom the model names."""
    agents = {"triage": (TRIAGE, "transfer_to_billing"), "billing": (BILLING, "transfer_to_triage")}
    speaking, messages = "triage", [{"role": "user", "content": "My invoice is wrong."}]
    schema = {"type": "object", "properties": {}}
    for _ in range(10):
        system, transfer = agents[speaking]
        tools: Any = [{"name": transfer, "input_schema": schema}]
        message = await sdk.messages.create(model=MODEL, max_tokens=64, system=system, messages=messages, tools=tools)  # type: ignore[arg-type]
        call = message.content[0]
        assert call.type == "tool_use"
        speaking = call.name.removeprefix("transfer_to_")
        messages.append({"role": "assistant", "content": [call.model_dump()]})
        ack = {"type": "tool_result", "tool_use_id": call.id, "content": f'{{"assistant": "{speaking}"}}'}
        messages.append({"role": "user", "content": [ack]})


async def test_a_claude_handoff_ping_pong_trips_handoff_cycle(make_claude: ClaudeFactory) -> None:
    """Two Claude agents hand the same question back and forth (openai-agents' `transfer_to_<agent>` tools,
    its `{"assistant": name}` acknowledgement): the second billing -> triage hand-over is stopped."""
    proxy = await make_claude()

    def plan(n: int) -> Step:
        return Step(calls=[("transfer_to_billing" if n % 2 == 0 else "transfer_to_triage", {})])

    proxy.claude.script = claude(plan)
    with pytest.raises(anthropic.RateLimitError) as caught:
        await hand_back_and_forth(client(proxy.url, run="ping-pong"))
    assert caught.value.response.headers["x-runguard-trip"] == "handoff_cycle"
    assert len(proxy.claude.received) == 4
    records = requests_of(proxy.sink)
    assert [r.handoff_to for r in records] == ["billing", "triage", "billing", "triage", None]


def noted(body: dict[str, Any]) -> str | None:
    """The nudge's note, where the Messages API carries it: the last block of the last user message."""
    last = body["messages"][-1]["content"]
    block = last[-1] if isinstance(last, list) and last else {}
    text = block.get("text") if block.get("type") == "text" else None
    return text if isinstance(text, str) and text.startswith("[RunGuard]") else None


@pytest.mark.parametrize("ignores_note", [False, True])
async def test_a_nudge_reaches_claude_after_the_tool_results_then_a_second_finding_blocks(
    make_claude: ClaudeFactory, ignores_note: bool
) -> None:
    proxy = await make_claude(guard={"detectors": {"non_progress": {"action": "nudge"}}})
    plan = claude(rephrasing)

    def model(received: Any) -> Any:
        if noted(received.json()) is not None and not ignores_note:
            return claude([Step(text="Changed course: the archive is down.")])(received)
        return plan(received)

    proxy.claude.script = model
    sdk = client(proxy.url, run=f"nudge-{ignores_note}")
    if not ignores_note:
        assert await tool_loop(sdk, soft_error) == "Changed course: the archive is down."
    else:
        with pytest.raises(anthropic.RateLimitError) as caught:
            await tool_loop(sdk, soft_error)
        assert caught.value.response.headers["x-runguard-trip"] == "non_progress"
    assert len(proxy.claude.received) == 4  # the 4th request carried the 3rd identical result, and the note
    fourth = proxy.claude.received[3].json()
    note = noted(fourth)
    assert note is not None and "non_progress" in note
    assert fourth["messages"][-1]["content"][0]["type"] == "tool_result"  # the results first, the note after
    assert all(noted(received.json()) is None for received in proxy.claude.received[:3])
