"""Healthy runs pass the default detectors: real SDKs, the real proxy, a scripted model.

Each test plays a run a team actually has (a paginated listing, polling a job,
a long plan, a research agent, a parallel batch, a coding agent's test loop,
a retried 500, structured output) through the openai SDK (Chat Completions
and Responses) and google-genai, streamed and not, and checks that the run
reaches its answer with every request forwarded, and which warnings the
default configuration records on the way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest
from google import genai
from google.genai import types
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, ValidationError

from tests.e2e import healthy
from tests.e2e.faults import eventually, requests_of
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply, Script

APIS = ["chat", "chat-stream", "responses", "responses-stream", "gemini", "gemini-stream"]


@pytest.fixture
async def proxy(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[str]:
    running = await start_proxy(settings_for(upstream.url), sink=sink)
    yield running.url
    await running.stop()


async def runs_clean(
    api: str, proxy: str, upstream: FakeUpstream, sink: ListSink, plan: healthy.Plan, tools: healthy.Tools, run_id: str
) -> None:
    """`healthy.play` reaches its answer with every request forwarded and nothing stopped."""
    assert await healthy.play(api, proxy, upstream, plan, tools, run_id) == healthy.ANSWER
    assert len(upstream.received) == len(plan) + 1
    assert healthy.blocks(sink) == set()


def openai_response_format(model: type[BaseModel]) -> Any:
    """The `response_format` openai-python sends for a pydantic model (as `parse()` does)."""
    schema = to_strict_json_schema(model)
    return {"type": "json_schema", "json_schema": {"name": model.__name__, "schema": schema, "strict": True}}


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

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"pages-{api}")
    assert healthy.warnings(sink) <= {"consecutive_same_tool", "tool_storm"}


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

    await runs_clean("chat", proxy, upstream, sink, plan, tools, f"pagekeys-{page_key}")


@pytest.mark.parametrize("api", APIS)
async def test_polling_a_job_until_done(api: str, proxy: str, upstream: FakeUpstream, sink: ListSink) -> None:
    states = [("queued", 0), ("queued", 0), ("running", 20), ("running", 55), ("running", 90), ("succeeded", 100)]
    plan = [[("get_job_status", {"job_id": "job_42"})] for _ in states]
    polls = iter(states)

    def tools(name: str, args: dict[str, Any]) -> str:
        status, progress = next(polls)
        return json.dumps({"job_id": args["job_id"], "status": status, "progress": progress})

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"poll-{api}")
    assert healthy.warnings(sink) <= {"consecutive_same_tool", "tool_storm"}


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

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"plan-{api}")
    assert healthy.warnings(sink) <= {"consecutive_same_tool", "tool_storm"}


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

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"research-{api}-{len(extra)}")


TICKERS = ["AAPL", "MSFT", "NVDA", "GOOGL", "AMZN"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", ["cities", "quotes", "one user"])
async def test_one_parallel_batch_of_five_different_lookups(
    api: str, shape: str, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    if shape == "cities":
        batch = [("get_weather", {"city": c, "units": "metric"}) for c in ("Paris", "London", "Tokyo", "Lima", "Oslo")]
    elif shape == "one user":  # one id, five tools: a fan-out, not the same lookup sprayed
        tools_of_user = ("get_user", "get_orders", "get_tickets", "get_invoices", "get_sessions")
        batch = [(tool, {"user_id": "u_4821", "limit": 20}) for tool in tools_of_user]
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
        return json.dumps({"for": args.get("city") or args.get("symbol") or name, "value": len(str(args))})

    assert await healthy.play(api, proxy, upstream, plan, tools, f"batch-{api}-{shape}") == healthy.ANSWER
    assert len(upstream.received) == 2
    assert healthy.blocks(sink) == set()


@pytest.mark.parametrize("api", APIS)
async def test_a_coding_agent_rereads_after_editing_and_reruns_tests(
    api: str, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    path = {"path": "src/parser.py"}
    tests = {"path": "tests/", "verbose": False}
    plan: list[list[healthy.Call]] = [[("run_tests", tests)], [("read_file", path)]]
    for fix in range(3):
        plan += [[("edit_file", {**path, "patch": f"fix {fix}"})], [("read_file", path)], [("run_tests", tests)]]
    failing = iter([3, 2, 1, 0])
    version = [0]

    def tools(name: str, args: dict[str, Any]) -> str:
        if name == "edit_file":
            version[0] += 1
            return "ok"
        if name == "read_file":
            return f"# parser.py, revision {version[0]}\n" + "def parse(text):\n    ...\n" * 20
        left = next(failing)
        return f"{left} failed, {12 - left} passed" if left else "12 passed"

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"coding-{api}")
    assert healthy.warnings(sink) <= {"consecutive_same_tool", "tool_storm"}


@pytest.mark.parametrize("api", APIS)
async def test_a_coding_agent_scaffolding_files_one_after_the_other_passes(
    api: str, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    """Five files written in a row, each answered "File written successfully.": the same result five
    times, and progress every time (`non_progress` leaves acknowledgements out)."""
    files = ["pyproject.toml", "src/app/__init__.py", "src/app/main.py", "tests/test_main.py", "README.md"]
    plan: list[list[healthy.Call]] = [[("write_file", {"path": f, "content": f"# {f}\n"})] for f in files]
    plan.append([("run_tests", {"path": "tests/"})])

    def tools(name: str, args: dict[str, Any]) -> str:
        return "File written successfully." if name == "write_file" else "1 passed"

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"scaffold-{api}")


@pytest.mark.parametrize("api", APIS)
async def test_a_coding_agent_keeping_a_to_do_list_passes(
    api: str, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    """The list is rewritten whole after every step with one status changed (Claude Code's TodoWrite,
    deepagents' write_todos): near-identical arguments, and no search spiralling."""
    steps = ["Read the failing test", "Find the bug in the parser", "Fix the off-by-one error", "Run the tests"]
    plan: list[list[healthy.Call]] = []
    for done, step in enumerate(steps):
        status = ["completed"] * done + ["in_progress"] + ["pending"] * len(steps)
        todos = [{"content": s, "status": status[i]} for i, s in enumerate(steps)]
        plan += [[("write_todos", {"todos": todos})], [("work_on", {"step": step})]]

    def tools(name: str, args: dict[str, Any]) -> str:
        return "Updated todo list" if name == "write_todos" else f"finished: {args['step']}"

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"todos-{api}")


@pytest.mark.parametrize("api", APIS)
async def test_a_coding_agent_running_test_files_one_by_one_in_a_shell_passes(
    api: str, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    """The same command line but for the file it names: other work each time, not a spiral."""
    files = ["parser", "lexer", "printer", "ast", "cli"]
    plan: list[list[healthy.Call]] = [
        [("shell", {"command": f"python -m pytest tests/test_{name}.py -x -q"})] for name in files
    ]

    def tools(name: str, args: dict[str, Any]) -> str:
        return f"{len(args['command'])} passed in 0.4s"

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"shell-{api}")


@pytest.mark.parametrize("api", APIS)
async def test_a_data_agent_grouping_by_one_column_after_another_passes(
    api: str, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    """The same snippet but for the quoted column it groups by: other questions, not a spiral."""
    code = "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.groupby('{}')['revenue'].sum().head(10))"
    columns = ["region", "product", "channel", "segment", "month"]
    plan: list[list[healthy.Call]] = [[("run_python", {"code": code.format(column)})] for column in columns]

    def tools(name: str, args: dict[str, Any]) -> str:
        return f"{args['code'].count('e')} rows"

    await runs_clean(api, proxy, upstream, sink, plan, tools, f"pandas-{api}")


@pytest.mark.parametrize("stream", [False, True])
async def test_one_upstream_500_retried_by_the_sdk_passes(
    stream: bool, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    plan = [[("lookup", {"term": "alpha"})], [("lookup", {"term": "beta"})]]

    def flaky(model: Script) -> Script:
        def script(received: Received) -> Reply:
            if len(upstream.received) == 2:  # the second request fails once; the SDK retries it as sent
                return Reply.json({"error": {"message": "The server had an error", "type": "server_error"}}, 500)
            return model(received)

        return script

    def tools(name: str, args: dict[str, Any]) -> str:
        return f"definition of {args['term']}"

    api = "chat-stream" if stream else "chat"
    assert await healthy.play(api, proxy, upstream, plan, tools, f"retry-{stream}", wrap=flaky) == healthy.ANSWER
    assert len(upstream.received) == len(plan) + 2  # the failed send and its retry
    assert healthy.blocks(sink) == set()


class LineItem(BaseModel):
    description: str
    amount: float
    currency: str | None = None


class Invoice(BaseModel):
    vendor: str
    total: float
    items: list[LineItem]


INVOICE = {"vendor": "Acme", "total": 12.5, "items": [{"description": "bolts", "amount": 12.5, "currency": None}]}


@pytest.mark.parametrize("stream", [False, True])
async def test_structured_output_over_several_documents_with_one_bad_answer(
    stream: bool, proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    # An extraction run: five documents, each one request demanding the Invoice schema (nested, optional
    # fields: $defs, $ref, anyOf null); the model gets the second wrong once and is asked again.
    answers = iter([INVOICE, {"vendor": "Acme"}, INVOICE, INVOICE, INVOICE, INVOICE])

    def script(received: Received) -> Reply:
        completion = healthy.payloads.chat_completion(json.dumps(next(answers)), usage=healthy.usage_of(received))
        if not received.json().get("stream"):
            return Reply.json(completion)
        return Reply.sse(healthy.chat_chunks(completion, with_usage=True))

    upstream.script = script
    client = openai.AsyncOpenAI(
        base_url=proxy + "/v1", api_key="sk-test-healthy", default_headers={"X-Run-Id": f"schema-{stream}"}
    )
    parsed = []
    for document in range(5):
        for _ in range(2):  # one re-ask when the answer does not validate
            messages: Any = [{"role": "user", "content": f"Extract invoice {document}."}]
            create: Any = {"model": "gpt-4o-mini", "messages": messages}
            if stream:
                chunks = await client.chat.completions.create(
                    **create, response_format=openai_response_format(Invoice), stream=True
                )
                text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
            else:
                completion = await client.chat.completions.create(
                    **create, response_format=openai_response_format(Invoice)
                )
                text = completion.choices[0].message.content or ""
            try:
                parsed.append(Invoice.model_validate_json(text))
                break
            except ValidationError:
                continue
    assert len(parsed) == 5
    assert len(upstream.received) == 6
    assert healthy.blocks(sink) == set()
    assert healthy.warnings(sink) == set()


async def test_gemini_structured_output_passes(proxy: str, upstream: FakeUpstream, sink: ListSink) -> None:
    upstream.script = lambda received: Reply.json(healthy.payloads.gemini_response(json.dumps(INVOICE)))
    client = genai.Client(
        api_key="test-key", http_options=types.HttpOptions(base_url=proxy, headers={"X-Run-Id": "schema-gemini"})
    )
    config = types.GenerateContentConfig(response_mime_type="application/json", response_schema=Invoice)
    for document in range(5):
        response = await client.aio.models.generate_content(
            model="gemini-2.5-flash", contents=f"Extract invoice {document}.", config=config
        )
        assert isinstance(response.parsed, Invoice)
    assert healthy.blocks(sink) == set()
    assert healthy.warnings(sink) == set()


def conversation(chars: int) -> list[Any]:
    """A chat resumed from storage: earlier user and assistant turns of about `chars` characters in all."""
    turns: list[Any] = [{"role": "system", "content": healthy.SYSTEM}]
    while sum(len(t["content"]) for t in turns) < chars:
        turns.append({"role": "user", "content": "Tell me more about the rollout plan. " * 20})
        turns.append({"role": "assistant", "content": "Here is the next part of the rollout plan. " * 60})
    return [*turns, {"role": "user", "content": "Summarize what we decided."}]


async def test_a_long_conversation_resumed_under_the_history_limit_then_continued(
    proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = healthy.chat_model([])
    client = openai.AsyncOpenAI(
        base_url=proxy + "/v1", api_key="sk-test-healthy", default_headers={"X-Run-Id": "chat-1"}
    )
    messages = conversation(55_000)
    for turn in range(8):
        completion = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        messages += [
            {"role": "assistant", "content": (completion.choices[0].message.content or "") + " detail" * 200 * turn},
            {"role": "user", "content": f"And point {turn}?"},
        ]
    # One large document and no earlier turns is never counted, whatever its size.
    document: Any = [{"role": "user", "content": "Review this contract:\n" + "clause text. " * 20_000}]
    await client.chat.completions.create(model="gpt-4o-mini", messages=document, extra_headers={"X-Run-Id": "doc-1"})
    assert len(upstream.received) == 9
    assert healthy.blocks(sink) == set()
    assert healthy.warnings(sink) == set()


async def test_a_long_chat_named_by_its_id_goes_on_after_the_proxy_forgot_its_run(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """A chat app naming each conversation by its id: the user comes back after the run's idle time, when the
    proxy has forgotten the run's state. The same history under a run id never seen is an earlier session
    loaded into a new run, and is stopped."""
    upstream.script = healthy.chat_model([])
    running = await start_proxy(settings_for(upstream.url, runs={"idle_seconds": 0.3}), sink=sink)
    client = openai.AsyncOpenAI(base_url=running.url + "/v1", api_key="sk-test-chat", max_retries=0)
    messages = conversation(50_000)
    try:
        for turn in range(4):  # over the limit of 60,000 characters by the last
            completion = await client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, extra_headers={"X-Run-Id": "conversation-1"}
            )
            messages += [
                {"role": "assistant", "content": (completion.choices[0].message.content or "") + " detail" * 600},
                {"role": "user", "content": f"And point {turn}?"},
            ]
        await asyncio.sleep(0.6)
        await client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, extra_headers={"X-Run-Id": "conversation-1"}
        )
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, extra_headers={"X-Run-Id": "job-of-today"}
            )
    finally:
        await client.close()
        await running.stop()
    assert caught.value.code == "runguard_session_bloat"
    assert len(upstream.received) == 5
    await eventually(lambda: len(requests_of(sink)) == 6)
    resumed = [r for r in requests_of(sink) if r.run_id == "conversation-1"]
    assert [r.index for r in resumed] == [1, 2, 3, 4, 1]  # the last after the run was forgotten


def reported_usage(input_tokens: int, output_tokens: int) -> Callable[[Script], Script]:
    """The model's answers as scripted, with this usage reported on each (Chat Completions)."""

    def wrap(model: Script) -> Script:
        def script(received: Received) -> Reply:
            completion = json.loads(model(received).body)
            completion["usage"] = {
                "prompt_tokens": input_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            }
            return Reply.json(completion)

        return script

    return wrap


async def test_a_run_spending_just_under_its_budget_and_token_cap_finishes(
    proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    # gpt-4o at 2.50 / 10.00 USD per million: 60k in and 34k out is 0.49 USD a response, ten of them
    # 4.90 USD (budget 5.00) and 940k tokens (cap 2M); 60k is 47% of the 128k window.
    plan = [[("lookup", {"term": f"term {i}"})] for i in range(9)]
    upstream_usage = reported_usage(60_000, 34_000)

    def tools(name: str, args: dict[str, Any]) -> str:
        return f"about {args['term']}"

    model = healthy.chat_model(plan)
    upstream.script = upstream_usage(model)
    client = openai.AsyncOpenAI(base_url=proxy + "/v1", api_key="sk-test-healthy", default_headers={"X-Run-Id": "b"})
    messages: Any = [{"role": "user", "content": "Look up nine terms."}]
    for _ in range(10):
        message = (await client.chat.completions.create(model="gpt-4o", messages=messages)).choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": tools("lookup", json.loads(call.function.arguments)),
                }
            )  # type: ignore[union-attr]
    assert message.content == healthy.ANSWER
    assert len(upstream.received) == 10
    assert healthy.blocks(sink) == set()
    assert healthy.warnings(sink) == {"tool_storm", "consecutive_same_tool"}


async def test_a_run_of_99_requests_is_under_the_step_cap(proxy: str, upstream: FakeUpstream, sink: ListSink) -> None:
    plan = [[("list_files", {"folder": "archive", "page": n})] for n in range(1, 99)]

    def tools(name: str, args: dict[str, Any]) -> str:
        return json.dumps({"files": [f"f{args['page']}-{i}.txt" for i in range(2)]})

    assert await healthy.play("chat", proxy, upstream, plan, tools, "steps-99") == healthy.ANSWER
    assert len(upstream.received) == 99
    assert healthy.blocks(sink) == set()
    assert healthy.warnings(sink) == {"tool_storm", "consecutive_same_tool"}
