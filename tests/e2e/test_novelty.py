"""`novelty` through the real proxy: agents whose tools bring nothing new are stopped, however they ask;
agents whose tools keep answering something new are not.

Each run is a scripted model plan (`healthy`) played by a real SDK's agent loop against the fake
upstream, with every default detector armed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from google.genai import errors as genai_errors

from tests.e2e import healthy
from tests.e2e.faults import eventually, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream

KEY = "sk-test-novelty"
AIRLINES = [("TAP Air Portugal", "TP552", 89), ("easyJet", "U27331", 64), ("Ryanair", "FR1882", 41)]
AIRLINES += [("Lufthansa", "LH1173", 132), ("Eurowings", "EW9413", 77), ("Vueling", "VY8460", 58)]
QUERIES = [
    "cheapest flight Lisbon to Berlin in May",
    "lowest fare LIS BER May",
    "budget airline Lisbon Berlin spring",
    "cheap tickets from Portugal to Germany May 2026",
    "discount flights Lisbon Berlin",
    "Lisbon Berlin one way low cost",
    "LIS to BER flights under 100 euros",
    "best price Lisbon Berlin nonstop",
]


def flights(query: str, shift: int) -> str:
    """A flight search's answer: the same flights (in another order), the query echoed, a fresh id."""
    rows = AIRLINES[shift % 6 :] + AIRLINES[: shift % 6]
    results = [
        {"airline": a, "flight": f, "route": "Lisbon (LIS) to Berlin (BER)", "price_eur": p, "departs": "08:05"}
        for a, f, p in rows
    ]
    return json.dumps({"query": query, "search_id": f"s{shift}", "results": results, "currency": "EUR"})


async def stopped(api: str, proxy: str, upstream: FakeUpstream, plan: healthy.Plan, tools: healthy.Tools) -> int:
    """Play a runaway plan: it must be stopped by `novelty`; how many requests reached the upstream."""
    errors: tuple[type[Exception], ...] = (openai.RateLimitError, genai_errors.ClientError)
    with pytest.raises(errors) as caught:
        await healthy.play(api, proxy, upstream, plan, tools, f"novelty-{api}-{id(plan)}", key=KEY)
    error = caught.value
    if isinstance(error, openai.RateLimitError):
        assert error.code == "runguard_novelty"
        assert error.response.headers["x-runguard-trip"] == "novelty"
    else:
        assert error.code == 429 and "novelty" in str(error)
    return len(upstream.received)


def by_query(answer: Callable[[str, int], str]) -> healthy.Tools:
    asked: list[str] = []

    def tools(name: str, args: dict[str, Any]) -> str:
        asked.append(name)
        return answer(str(next(iter(args.values()))), len(asked))

    return tools


@pytest.mark.parametrize("api", ["chat", "responses", "gemini"])
async def test_rephrased_searches_returning_the_same_flights_are_stopped(
    api: str, proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    plan = [[("search_flights", {"query": q})] for q in QUERIES]
    # The 4th answer (the 3rd bringing nothing new) arrives with the 5th request, which is stopped.
    assert await stopped(api, proxy_url, upstream, plan, by_query(flights)) == 4
    await eventually(lambda: any(t.detector == "novelty" for t in trips_of(sink)))
    trip = next(t for t in trips_of(sink) if t.detector == "novelty")
    assert trip.evidence["tools"] == ["search_flights"] and len(trip.evidence["new_shares"]) == 3


async def test_searches_over_several_search_tools_are_one_kind(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    tools = ["web_search", "search_flights", "kayak_search", "web_search", "search_flights"]
    plan = [[(tool, {"query": q})] for tool, q in zip(tools, QUERIES, strict=False)]
    assert await stopped("chat", proxy_url, upstream, plan, by_query(flights)) == 4


POLICY = "\n".join(
    f"{i}. Invoices are kept for {i + 6} years; copies older than {i + 2} years move to cold storage in region {i}."
    for i in range(1, 12)
)


async def test_refetching_one_document_under_other_urls_is_stopped(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    urls = [
        "https://docs.example.com/retention",
        "https://docs.example.com/retention?lang=en",
        "https://cdn.example.com/docs/retention.html",
        "https://docs.example.com/policies/retention-v2",
        "https://docs.example.com/retention#top",
    ]
    plan = [[("fetch_url", {"url": url})] for url in urls]
    assert await stopped("chat", proxy_url, upstream, plan, by_query(lambda url, _: f"URL: {url}\n{POLICY}")) == 4


async def test_a_sub_agent_re_asking_what_its_leader_answered_is_stopped(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    questions = [
        "Which figures should the report use?",
        "To confirm: which quarter's numbers do I use?",
        "Should I use Q3 or Q4 figures for the report?",
        "What data source did you want for the figures?",
        "Just checking, which figures again?",
    ]
    answer = (
        "Use the Q3 2025 figures from the finance team's quarterly report, in EUR, excluding the one-off "
        "restructuring charge; round to thousands and cite the report's table 4 for revenue and table 7 for costs."
    )
    plan = [[("ask_leader", {"question": q})] for q in questions]
    assert await stopped("chat", proxy_url, upstream, plan, by_query(lambda q, _: f"Q: {q}\nA: {answer}")) == 4


# -- healthy runs that come close --------------------------------------------------------------------


async def runs_clean(api: str, proxy: str, upstream: FakeUpstream, sink: ListSink, plan: Any, tools: Any) -> None:
    assert await healthy.play(api, proxy, upstream, plan, tools, f"clean-{api}-{id(plan)}", key=KEY) == healthy.ANSWER
    assert len(upstream.received) == len(plan) + 1
    assert "novelty" not in healthy.blocks(sink) | healthy.warnings(sink)


@pytest.mark.parametrize("api", ["chat", "gemini"])
async def test_paging_through_a_listing_passes(
    api: str, proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    plan = [[("list_products", {"category": "widgets", "page": n})] for n in range(1, 9)]

    def tools(name: str, args: dict[str, Any]) -> str:
        n = args["page"]
        items = [{"sku": f"W-{n}{i:02}", "name": f"widget {n}-{i}", "price": 10 * n + i, "stock": i} for i in range(8)]
        return json.dumps({"page": n, "pages": 8, "category": "widgets", "items": items})

    await runs_clean(api, proxy_url, upstream, sink, plan, tools)


async def test_a_research_plan_over_many_tools_passes(proxy_url: str, upstream: FakeUpstream, sink: ListSink) -> None:
    plan = [
        [("web_search", {"query": "EU battery recycling regulation 2027 targets"})],
        [("fetch_url", {"url": "https://eur-lex.example/2023-1542"})],
        [("get_company_filings", {"company": "Northvolt", "year": 2024})],
        [("web_search", {"query": "lithium recovery rate industrial processes comparison"})],
        [("get_market_data", {"metric": "black mass price", "region": "EU"})],
        [("fetch_url", {"url": "https://example.org/hydrometallurgy-review"})],
        [("web_search", {"query": "recycling plant capacity announcements Europe 2025"})],
    ]

    def tools(name: str, args: dict[str, Any]) -> str:
        topic = " ".join(str(v) for v in args.values())
        return json.dumps(
            {
                "source": name,
                "findings": [f"{topic}: finding {i} with figure {len(topic) * i} and note {name}{i}" for i in range(6)],
            }
        )

    await runs_clean("chat", proxy_url, upstream, sink, plan, tools)


async def test_a_poll_whose_status_changes_then_completes_passes(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    states = [("queued", 0), ("queued", 0), ("running", 20), ("running", 45), ("running", 70), ("succeeded", 100)]
    plan = [[("get_export_status", {"export_id": "exp_77"})] for _ in states]
    polls = iter(states)
    spec = {
        "table": "orders",
        "destination": "s3://warehouse/exports/orders/",
        "format": "parquet",
        "compression": "zstd",
    }

    def tools(name: str, args: dict[str, Any]) -> str:
        status, progress = next(polls)
        return json.dumps(
            {"export_id": "exp_77", "status": status, "progress": progress, "spec": spec, "note": "Nightly export."}
        )

    await runs_clean("chat", proxy_url, upstream, sink, plan, tools)


async def test_a_writer_editor_loop_with_changing_drafts_passes(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    drafts = [
        "Our new app helps teams plan sprints.",
        "Our new app helps remote teams plan sprints and track blockers in one place.",
        "Plan sprints, track blockers and see who is overloaded: one place for remote teams.",
        "See who is overloaded before the sprint starts. Plan, track blockers, ship: one place for remote teams.",
        "Before the sprint starts, see who is overloaded. Then plan, unblock and ship from one board.",
    ]
    notes = [
        "Too generic; name the audience and one concrete benefit.",
        "Better. Lead with the pain point; 'in one place' is vague.",
        "Good rhythm. Overload is the hook: open with it and cut 'one place'.",
        "Strong opening. Replace 'ship' with a verb that fits planning; shorten the tail.",
        "Approved. Publish as is.",
    ]
    plan = [[("review_draft", {"draft": d})] for d in drafts]
    reviews = iter(notes)

    def tools(name: str, args: dict[str, Any]) -> str:
        note = next(reviews)
        return json.dumps(
            {"draft": args["draft"], "verdict": note, "checklist": ["audience", "benefit", "tone", note[:30]]}
        )

    await runs_clean("chat", proxy_url, upstream, sink, plan, tools)


async def test_a_search_narrowing_its_query_with_new_results_passes(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    queries = [
        "laptops",
        "laptops 14 inch",
        "laptops 14 inch 32GB RAM",
        "laptops 14 inch 32GB under 1500",
        "X1 Carbon Gen 12 32GB",
    ]
    plan = [[("search_products", {"query": q})] for q in queries]

    def tools(name: str, args: dict[str, Any]) -> str:
        seed = len(args["query"])
        rows = [
            {"model": f"Model {seed}-{i}", "price": 900 + seed * 10 + i, "ram_gb": 16 + i % 2 * 16} for i in range(8)
        ]
        return json.dumps({"query": args["query"], "results": rows})

    await runs_clean("chat", proxy_url, upstream, sink, plan, tools)


async def test_short_acknowledgements_pass(proxy_url: str, upstream: FakeUpstream, sink: ListSink) -> None:
    plan = [[("save_note", {"text": f"note {i}: {q}"})] for i, q in enumerate(QUERIES)]
    await runs_clean("chat", proxy_url, upstream, sink, plan, lambda name, args: "ok")


# -- an agent running its own reproduction script after each edit ------------------------------------------

RUNS = [
    "python reproduce.py",
    "cd /repo && python reproduce.py",
    "python /repo/reproduce.py 2>&1",
    "python reproduce.py | tail -40",
]


def reproduction(passing: int) -> str:
    """What the agent's script prints: the same fixtures and traceback frames every run; the count of passing
    checks and the failing row (one traceback line) move as the fix goes on."""
    rows = [f"row {i:03}: invoice INV-{4000 + i} customer C{i % 17:02} amount {i * 13 % 500}.00 EUR" for i in range(24)]
    trace = [
        "Traceback (most recent call last):",
        '  File "/repo/reproduce.py", line 41, in <module>',
        "    totals = reconcile(rows, ledger)",
        '  File "/repo/src/ledger.py", line 88, in reconcile',
        "    raise MismatchError(row, expected, got)",
        f"ledger.MismatchError: row {7 + passing * 3}: expected 1{passing}3.00, got 0.00",
    ]
    return "\n".join(["Loading fixtures from tests/fixtures/invoices.csv", *rows, "", *trace, f"{passing} passed"])


def edit_and_run(passing: Callable[[int], int]) -> tuple[list[list[healthy.Call]], healthy.Tools]:
    """Eight rounds of an edit (an editor tool, whose answer shows the edited lines) and a run of the script,
    written in one of a few ways; the n-th run prints `reproduction(passing(n))`."""
    plan: list[list[healthy.Call]] = []
    for n in range(8):
        edit = {"command": "str_replace", "path": "/repo/src/ledger.py", "old_str": f"v{n}", "new_str": f"v{n + 1}"}
        plan += [[("str_replace_editor", edit)], [("bash", {"command": RUNS[n % len(RUNS)]})]]
    runs = iter(range(8))

    def tools(name: str, args: dict[str, Any]) -> str:
        if name == "bash":
            return reproduction(passing(next(runs)))
        return f"The file {args['path']} has been edited. Here's the result of running `cat -n` on a snippet:\n" + (
            f"    88\t        total = {args['new_str']}(rows)\n    89\t        return total\nReview the changes."
        )

    return plan, tools


async def test_an_edit_and_run_loop_whose_count_and_traceback_line_move_runs_to_its_end(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    """Each run shares its template with the last (a few percent of new shingles): the lines it never
    printed before are the progress."""
    plan, tools = edit_and_run(lambda n: n)
    await runs_clean("chat", proxy_url, upstream, sink, plan, tools)


@pytest.mark.parametrize(("printed", "reached"), [(lambda n: 0, 8), (lambda n: n % 2, 10)], ids=["same", "flipping"])
async def test_an_edit_and_run_loop_whose_output_does_not_move_is_stopped(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink, printed: Callable[[int], int], reached: int
) -> None:
    """The same output after every edit (the 4th run's is the 3rd bringing nothing new), or the two outputs a
    flipped line alternates between (from the 3rd run on, each printed before)."""
    plan, tools = edit_and_run(printed)
    assert await stopped("chat", proxy_url, upstream, plan, tools) == reached
