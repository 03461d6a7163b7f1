"""Agents whose tool protocol is text, through the real proxy with the openai SDK: a ReAct agent, a code agent
and a selector group chat going round in circles are stopped by `text_loop`; a ReAct agent learning something
at each step runs to its answer. No tool is declared in any of them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

FLIGHTS = [
    ("TAP Air Portugal", "TP552", "07:05", "nonstop", 89),
    ("easyJet", "U27331", "10:40", "nonstop", 64),
    ("Ryanair", "FR1882", "18:15", "nonstop", 41),
    ("Lufthansa", "LH1173", "13:20", "one stop in Frankfurt", 132),
    ("Eurowings", "EW9413", "06:30", "nonstop", 77),
    ("Vueling", "VY8460", "15:55", "one stop in Barcelona", 58),
    ("KLM", "KL1692", "11:10", "one stop in Amsterdam", 118),
    ("Iberia", "IB3107", "09:45", "one stop in Madrid", 96),
]
QUERIES = [
    "cheapest flight Lisbon to Berlin in May",
    "lowest fare LIS BER May",
    "budget airline Lisbon Berlin spring",
    "cheap tickets Portugal Germany May",
    "discount flights Lisbon Berlin",
    "Lisbon Berlin low cost",
    "LIS BER under 100 euros",
    "best price Lisbon Berlin",
]
REACT = "Answer with Thought, then Action: search[query] or Final Answer. You will get an Observation back."


def search(query: str) -> str:
    """The search tool the agent runs itself: the same flights whatever the words."""
    return "\n".join(
        f"{n}. {airline} {code} Lisbon (LIS) to Berlin (BER), departs {time}, {stops}, fare {fare} EUR"
        for n, (airline, code, time, stops, fare) in enumerate(FLIGHTS, 1)
    )


def react_model(actions: list[str]) -> Callable[[Received], Reply]:
    """The model's side: step i writes actions[i] (counted by the assistant turns so far), then answers."""

    def script(received: Received) -> Reply:
        step = sum(1 for m in received.json()["messages"] if m["role"] == "assistant")
        text = actions[step] if step < len(actions) else "Final Answer: Ryanair FR1882 at 41 EUR."
        return Reply.json(payloads.chat_completion(text, model="gpt-4o"))

    return script


async def react_agent(client: openai.AsyncOpenAI, tool: Callable[[str], str], max_steps: int = 12) -> str:
    """A ReAct loop written in text: the model's action is parsed, run, and sent back as an Observation."""
    messages: list[Any] = [
        {"role": "system", "content": REACT},
        {"role": "user", "content": "Find the cheapest flight from Lisbon to Berlin in May."},
    ]
    for _ in range(max_steps):
        text = (await client.chat.completions.create(model="gpt-4o", messages=messages)).choices[0].message.content
        assert text is not None
        messages.append({"role": "assistant", "content": text})
        if text.startswith("Final Answer:"):
            return text
        action = re.search(r"Action: \w+\[(.*)\]", text)
        assert action is not None
        messages.append({"role": "user", "content": f"Observation: {tool(action.group(1))}"})
    raise AssertionError("the agent did not finish")


def client_of(proxy_url: str, run_id: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="sk-test-text", default_headers={"X-Run-Id": run_id})


async def stopped_by_text_loop(sink: ListSink, caught: pytest.ExceptionInfo[openai.RateLimitError]) -> dict[str, Any]:
    assert caught.value.code == "runguard_text_loop"
    await eventually(lambda: any(t.detector == "text_loop" for t in trips_of(sink)))
    return dict(next(t for t in trips_of(sink) if t.detector == "text_loop").evidence)


async def test_a_react_agent_rephrasing_its_search_is_stopped(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = react_model([f"Thought: let me search. Action: search[{q}]" for q in QUERIES])
    with pytest.raises(openai.RateLimitError) as caught:
        await react_agent(client_of(proxy_url, "react-loop"), search)
    evidence = await stopped_by_text_loop(sink, caught)
    # Steps 1 and 2 are new (the task, then the results); 3, 4 and 5 bring the same results: the 6th is stopped.
    assert len(upstream.received) == 5
    assert len(evidence["new_shares"]) == 3


async def test_a_react_agent_learning_something_each_step_runs_to_its_answer(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    pages = iter(range(1, 9))

    def paging(query: str) -> str:
        page = next(pages)
        return "\n".join(
            f"{n}. flight {page}{n:02} departs {6 + n}:{page}5, fare {30 + 7 * n + page} EUR, seats left {n + page}"
            for n in range(1, 9)
        )

    actions = [f"Thought: page {i} read. Action: search[{QUERIES[0]} page {i + 1}]" for i in range(8)]
    upstream.script = react_model(actions)
    answer = await react_agent(client_of(proxy_url, "react-healthy"), paging)
    assert answer.startswith("Final Answer:")
    assert not [t for t in trips_of(sink) if t.action == "block"]


async def code_agent(client: openai.AsyncOpenAI, error: str) -> None:
    """A code agent's loop: the model's code runs (here: fails with `error`) and the logs go back as user text."""
    messages: list[Any] = [{"role": "system", "content": "You write Python code to solve the task."}]
    messages.append({"role": "user", "content": "What is the total of sales.csv?"})
    for _ in range(12):
        text = (await client.chat.completions.create(model="gpt-4o", messages=messages)).choices[0].message.content
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": error}]
    raise AssertionError("not stopped")


async def test_a_code_agent_getting_the_same_error_back_is_stopped(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    """A code agent (no tool declared: the model writes code that calls the tools) whose code keeps failing
    the same way, tweaking a line each time."""
    codes = [
        f"Thought: try parsing again.\nCode:\n```py\nrows = read_csv('sales.csv', sep='{sep}')\nprint(total(rows))\n```"
        for sep in (",", ";", "\\t", "|", " ", ":", ",", ";")
    ]
    upstream.script = react_model(codes)
    error = (
        'Execution logs:\nTraceback (most recent call last):\n  File "<agent>", line 1, in <module>\n'
        '  File "tools.py", line 88, in read_csv\n    header = parse_header(stream, dialect)\n'
        "  File \"tools.py\", line 41, in parse_header\n    raise ValueError(f'column {name!r} is missing')\n"
        "ValueError: column 'amount' is missing from the header of sales.csv; expected columns: date, region, "
        "product, amount, currency. Now let's retry: take care not to repeat previous errors!"
    )
    with pytest.raises(openai.RateLimitError) as caught:
        await code_agent(client_of(proxy_url, "code-loop"), error)
    await stopped_by_text_loop(sink, caught)
    assert len(upstream.received) == 5


def group_chat(drafts: list[str], reviews: list[str]) -> Callable[[Received], Reply]:
    """A selector group chat's model: the selector (its transcript in one system message) alternates writer and
    critic; the writer's n-th turn sends drafts[n] (the last one again after), the critic's reviews[n]."""

    def script(received: Received) -> Reply:
        body = received.json()
        system = body["messages"][0]["content"]
        if system.startswith("You are in a role play game"):
            said = system.count("\nwriter:") + system.count("\ncritic:")
            text = "writer" if said % 2 == 0 else "critic"
        else:
            mine = sum(1 for m in body["messages"] if m["role"] == "assistant")
            texts = drafts if system.startswith("You are the writer") else reviews
            text = texts[min(mine, len(texts) - 1)]
        return Reply.json(payloads.chat_completion(text, model="gpt-4o"))

    return script


DRAFT = (
    "Here is the draft: Our app helps remote teams plan sprints, track blockers and see who is overloaded "
    "before the sprint starts, with one board for planning and one for review. Try it free for 30 days."
)
REVIEW = (
    "Review: the draft is too long and its benefit is vague. Name the audience, lead with overload, and cut "
    "the second half about boards. Please revise and send it again."
)
ROLES = {"writer": "You are the writer. Write the product blurb.", "critic": "You are the critic. Review the blurb."}


async def selector_chat(client: openai.AsyncOpenAI) -> int:
    """AutoGen's SelectorGroupChat loop: pick the next speaker from the transcript, let it speak, until the critic
    approves; how many turns the agents spoke."""
    thread: list[tuple[str, str]] = [("user", "Write a one-paragraph blurb for our sprint planning app.")]
    for _ in range(20):
        transcript = "\n".join(f"{source}: {text}" for source, text in thread)
        prompt = (
            "You are in a role play game. The following roles are available:\n"
            + "\n".join(f"{name}: {role}" for name, role in ROLES.items())
            + f"\nRead the following conversation. Then select the next role to play.\n\n{transcript}\n\n"
            "Read the above conversation. Then select the next role from ['writer', 'critic'] to play. "
            "Only return the role."
        )
        pick = await client.chat.completions.create(model="gpt-4o", messages=[{"role": "system", "content": prompt}])
        speaker = pick.choices[0].message.content or ""
        messages: list[Any] = [{"role": "system", "content": ROLES[speaker]}]
        for source, text in thread:
            if source == speaker:
                messages.append({"role": "assistant", "content": text})
            else:
                messages.append({"role": "user", "content": text, "name": source})
        said = await client.chat.completions.create(model="gpt-4o", messages=messages)
        thread.append((speaker, said.choices[0].message.content or ""))
        if thread[-1][1].startswith("APPROVED"):
            return len(thread) - 1
    raise AssertionError("not stopped")


async def test_a_selector_group_chat_passing_the_task_in_circles_is_stopped(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    """AutoGen's SelectorGroupChat shape: each pick is a request whose one system message holds the roles and
    the whole transcript; each agent's request has its own system message and the others' turns as user
    messages with a `name`. The selector's growing prompt is one agent, not a new one every turn."""
    upstream.script = group_chat([DRAFT], [REVIEW])
    client = client_of(proxy_url, "group-chat")
    with pytest.raises(openai.RateLimitError) as caught:
        await selector_chat(client)
    evidence = await stopped_by_text_loop(sink, caught)
    assert len(set(evidence["agents"])) == 2  # the writer and the critic, not the selector
    # Three agents spoke (the selector, the writer, the critic), however long the selector's prompt grew.
    assert len({record.agent for record in requests_of(sink)}) == 3


async def test_a_selector_group_chat_whose_drafts_change_runs_to_approval(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    drafts = [
        "Draft 1: Our app helps remote teams plan sprints, track blockers and see who is overloaded, all on one board.",
        "Draft 2: Remote teams: see who is overloaded before the sprint starts, then plan and unblock on one board.",
        "Draft 3: Know who is overloaded before sprint planning begins. Spread the work, clear blockers, ship calmly.",
        "Draft 4: Spot overloaded teammates before planning starts; rebalance the sprint in minutes, not meetings.",
    ]
    reviews = [
        "Review 1: too generic. Name the audience and lead with the overload pain point instead of features.",
        "Review 2: better audience, but 'one board' is filler; end on an outcome the reader cares about.",
        "Review 3: strong opening; 'ship calmly' is vague. Make the benefit concrete and measurable if you can.",
        "APPROVED: concrete, short, and it leads with the pain. Publish draft 4 as it is.",
    ]
    upstream.script = group_chat(drafts, reviews)
    assert await selector_chat(client_of(proxy_url, "group-chat-healthy")) == 8
    assert not [t for t in trips_of(sink) if t.action == "block"]
