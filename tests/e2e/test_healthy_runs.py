"""Healthy runs pass the default detectors: real SDKs, the real proxy, a scripted model.

Each test plays a run a team actually has (a paginated listing, polling a job,
a long plan, a research agent, a parallel batch, a coding agent's test loop,
a retried 500, structured output) through the openai SDK (Chat Completions
and Responses) and google-genai, streamed and not, and checks that the run
reaches its answer with every request forwarded, and which warnings the
default configuration records on the way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from google import genai
from google.genai import types

from tests.e2e import healthy
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream

APIS = ["chat", "chat-stream", "responses", "responses-stream", "gemini", "gemini-stream"]


@pytest.fixture
async def proxy(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[str]:
    running = await start_proxy(settings_for(upstream.url), sink=sink)
    yield running.url
    await running.stop()


async def run(
    api: str, proxy: str, upstream: FakeUpstream, plan: healthy.Plan, tools: healthy.Tools, run_id: str
) -> str:
    """The plan played by the model of `api` and run by an agent loop over its SDK, to the answer."""
    kind, _, streamed = api.partition("-")
    names = healthy.tool_specs(plan)
    task = "Do the task."
    if kind == "gemini":
        upstream.script = healthy.gemini_model(plan)
        client = genai.Client(
            api_key="test-key", http_options=types.HttpOptions(base_url=proxy, headers={"X-Run-Id": run_id})
        )
        return await healthy.gemini_agent(client, tools, names, task, stream=bool(streamed))
    openai_client = openai.AsyncOpenAI(
        base_url=proxy + "/v1", api_key="sk-test-healthy", default_headers={"X-Run-Id": run_id}
    )
    if kind == "chat":
        upstream.script = healthy.chat_model(plan)
        return await healthy.chat_agent(openai_client, tools, names, task, stream=bool(streamed))
    upstream.script = healthy.responses_model(plan)
    return await healthy.responses_agent(openai_client, tools, names, task, stream=bool(streamed))


def answers(table: dict[str, Any]) -> healthy.Tools:
    """Tools that look their answer up by tool name and canonical arguments."""

    def tools(name: str, args: dict[str, Any]) -> str:
        return str(table[f"{name} {json.dumps(args, sort_keys=True)}"])

    return tools


@pytest.mark.parametrize("api", APIS)
async def test_paginated_listing(api: str, proxy: str, upstream: FakeUpstream, sink: ListSink) -> None:
    plan = [[("list_issues", {"repo": "acme/api", "state": "open", "page": n})] for n in range(1, 7)]

    def tools(name: str, args: dict[str, Any]) -> str:
        page = args["page"]
        return json.dumps({"issues": [{"number": page * 100 + i, "title": f"issue {page}.{i}"} for i in range(3)]})

    assert await run(api, proxy, upstream, plan, tools, f"pages-{api}") == healthy.ANSWER
    assert len(upstream.received) == len(plan) + 1
    assert healthy.blocks(sink) == set()
    print(api, healthy.warnings(sink))


@pytest.mark.parametrize(
    ("page_key", "step"), [("page", 1), ("startAt", 50), ("page_number", 1), ("pageNumber", 1), ("start_index", 25)]
)
async def test_paginated_listing_key_styles(
    page_key: str, step: int, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    # Jira: {"jql", "startAt", "maxResults"}; others page with page_number / pageNumber / start_index.
    plan = [
        [
            (
                "search_issues",
                {"jql": "project = API AND status = Open ORDER BY created DESC", page_key: n * step, "maxResults": 50},
            )
        ]
        for n in range(6)
    ]

    def tools(name: str, args: dict[str, Any]) -> str:
        first = args[page_key]
        return json.dumps({"issues": [{"key": f"API-{first + i}"} for i in range(3)], "total": 300})

    assert await run("chat", proxy, upstream, plan, tools, f"pagekeys-{page_key}") == healthy.ANSWER
    assert len(upstream.received) == len(plan) + 1
    assert healthy.blocks(sink) == set()


@pytest.mark.parametrize("api", APIS)
async def test_polling_a_job_until_done(api: str, proxy: str, upstream: FakeUpstream, sink: ListSink) -> None:
    states = [("queued", 0), ("queued", 0), ("running", 20), ("running", 55), ("running", 90), ("succeeded", 100)]
    plan = [[("get_job_status", {"job_id": "job_42"})] for _ in states]
    polls = iter(states)

    def tools(name: str, args: dict[str, Any]) -> str:
        status, progress = next(polls)
        return json.dumps({"job_id": args["job_id"], "status": status, "progress": progress})

    assert await run(api, proxy, upstream, plan, tools, f"poll-{api}") == healthy.ANSWER
    assert len(upstream.received) == len(plan) + 1
    assert healthy.blocks(sink) == set()
    print(api, healthy.warnings(sink))


# A coding agent's plan: look around (small answers), then read, edit and test (larger ones).
SIZES = [
    300,
    500,
    400,
    600,
    350,
    6000,
    14000,
    9000,
    22000,
    4000,
    12000,
    16000,
    8000,
    18000,
    5000,
    11000,
    20000,
    7000,
    13000,
    9000,
    3000,
    800,
]


@pytest.mark.parametrize("api", APIS)
async def test_a_long_plan_of_distinct_steps(api: str, proxy: str, upstream: FakeUpstream, sink: ListSink) -> None:
    # Sibling files of one package: their paths share every directory, not the file.
    files = ["users", "orders", "auth", "billing", "search", "admin", "export", "webhooks"]
    plan = [[("list_dir", {"path": "services/api/src/handlers"})], [("grep", {"pattern": "def handle_", "path": "."})]]
    for i in range(len(SIZES) - 2):
        target = f"services/api/src/handlers/{files[i % len(files)]}.py"
        step = [("read_file", {"path": target}), ("edit_file", {"path": target, "old": "x = 1", "new": f"x = {i}"})]
        plan.append([step[(i // len(files)) % 2] if i < 2 * len(files) else ("run_tests", {"path": "tests/"})])
    sizes = iter(SIZES)

    def tools(name: str, args: dict[str, Any]) -> str:
        return f"{args['path']}\n" + "x = 1\n" * (next(sizes) // 6)

    assert await run(api, proxy, upstream, plan, tools, f"plan-{api}") == healthy.ANSWER
    assert len(upstream.received) == len(plan) + 1
    assert healthy.blocks(sink) == set()
    print(api, healthy.warnings(sink))


FACETS = [
    "revenue",
    "deliveries",
    "gross margin",
    "operating income",
    "free cash flow",
    "capex guidance",
    "energy storage deployments",
]


@pytest.mark.parametrize(
    "extra", [{}, {"max_results": 5}, {"search_depth": "advanced", "topic": "finance", "time_range": "year"}]
)
@pytest.mark.parametrize("api", ["chat", "gemini"])
async def test_a_research_agent_searching_facets_of_one_subject(
    api: str, extra: dict[str, Any], proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    plan = [[("web_search", {"query": f"tesla q3 2024 {facet}", **extra})] for facet in FACETS]

    def tools(name: str, args: dict[str, Any]) -> str:
        return json.dumps({"results": [{"title": args["query"], "url": f"https://example.com/{len(args['query'])}"}]})

    assert await run(api, proxy, upstream, plan, tools, f"research-{api}-{len(extra)}") == healthy.ANSWER
    assert len(upstream.received) == len(plan) + 1
    assert healthy.blocks(sink) == set()


TICKERS = ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", ["cities", "quotes"])
async def test_one_parallel_batch_of_five_different_lookups(
    api: str, shape: str, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    if shape == "cities":
        batch = [("get_weather", {"city": c, "units": "metric"}) for c in ("Paris", "London", "Tokyo", "Lima", "Oslo")]
    else:
        batch = [
            (
                "get_quote",
                {"symbol": t, "exchange": "NASDAQ", "currency": "USD", "fields": ["price", "volume", "market_cap"]},
            )
            for t in TICKERS
        ]
    plan = [batch]

    def tools(name: str, args: dict[str, Any]) -> str:
        return json.dumps({"for": args.get("city") or args.get("symbol"), "value": len(str(args))})

    assert await run(api, proxy, upstream, plan, tools, f"batch-{api}-{shape}") == healthy.ANSWER
    assert len(upstream.received) == 2
    assert healthy.blocks(sink) == set()
