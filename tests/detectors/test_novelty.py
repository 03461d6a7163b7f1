"""`novelty`: a kind of tool whose results bring almost nothing new, several turns in a row."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from runguard.detectors.novelty import Novelty, NoveltyConfig, kind_of
from tests.detectors.harness import RunSimulator, Step, agent_loop, call, first_trip, request, response, shows

FLIGHTS = [
    {"airline": a, "flight": f"{code}{n}", "from": "Lisbon (LIS)", "to": "Berlin (BER)", "price_eur": p, "stops": s}
    for a, code, n, p, s in [
        ("TAP Air Portugal", "TP", 552, 89, 0),
        ("easyJet", "U2", 7331, 64, 0),
        ("Ryanair", "FR", 1882, 41, 0),
        ("Lufthansa", "LH", 1173, 132, 1),
        ("Eurowings", "EW", 9413, 77, 0),
        ("Vueling", "VY", 8460, 58, 1),
    ]
]
QUERIES = [
    "cheapest flight Lisbon to Berlin in May",
    "lowest fare LIS BER May",
    "budget airline Lisbon Berlin spring",
    "cheap tickets from Portugal to Germany May 2026",
    "discount flights Lisbon Berlin",
    "Lisbon Berlin one way low cost",
]


def search(query: str, start: int = 0) -> dict[str, Any]:
    """A flight search: the same flights in another order, echoing the query, with a fresh request id."""
    flights = FLIGHTS[start:] + FLIGHTS[:start]
    return {"query": query, "request_id": f"r-{len(query)}", "results": flights, "currency": "EUR"}


def rephrased(n: int) -> list[Step]:
    return agent_loop([[("search_flights", {"query": q}, search(q, i))] for i, q in enumerate(QUERIES[:n])])


async def test_rephrased_searches_over_the_same_results_trip_at_the_fourth() -> None:
    results = await RunSimulator([Novelty()]).run(rephrased(6))
    # Response i asks search i; request i+1 brings it: the 4th result (3 stale turns after the first) trips.
    assert first_trip(results) == 5
    finding = results[4].one("novelty")
    assert finding.action == "block"
    evidence = shows(finding, "calls")
    assert evidence["tools"] == ["search_flights"] and evidence["kind"] == "search"
    assert len(evidence["new_shares"]) == 3 and all(share <= 0.2 for share in evidence["new_shares"])
    assert "search_flights" in finding.reason


async def test_searches_of_one_kind_count_together() -> None:
    tools = ["search_flights", "web_search", "kayak_search", "searchFares"]
    turns = [[(tools[i], {"q": q}, search(q, i))] for i, q in enumerate(QUERIES[:4])]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop(turns))) == 5


async def test_each_search_finding_new_flights_passes() -> None:
    def fresh(i: int) -> dict[str, Any]:
        return {
            "results": [{**f, "flight": f"{f['flight']}-{i}", "price_eur": f["price_eur"] + 7 * i} for f in FLIGHTS]
        }

    turns = [[("search_flights", {"query": q}, fresh(i))] for i, q in enumerate(QUERIES)]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop(turns))) is None


async def test_pages_of_a_listing_pass() -> None:
    def page(n: int) -> dict[str, Any]:
        return {
            "page": n,
            "items": [{"sku": f"SKU-{n * 10 + i}", "name": f"widget model {n}-{i}", "price": n + i} for i in range(10)],
        }

    turns = [[("list_products", {"category": "widgets", "page": n}, page(n))] for n in range(1, 10)]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop(turns))) is None


async def test_a_poll_with_the_same_arguments_is_not_judged() -> None:
    body = {"job": "export-7", "description": "nightly export of the orders table to the warehouse " * 4}
    turns = [[("get_job", {"job": "export-7"}, {**body, "progress": 10 * i})] for i in range(8)]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop(turns))) is None


async def test_short_results_are_not_judged() -> None:
    turns = [[("search_notes", {"query": q}, {"found": 0, "note": "nothing yet"})] for q in QUERIES]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop(turns))) is None


async def test_the_same_document_under_other_ids_trips() -> None:
    text = "\n".join(
        f"Section {i}. The retention policy keeps invoices for {i + 6} years in cold storage." for i in range(12)
    )
    turns = [
        [("fetch_url", {"url": url}, f"Fetched {url}\n{text}")]
        for url in (
            "https://docs.example.com/policy",
            "https://docs.example.com/policy?v=2",
            "https://cdn.example.com/p.html",
            "https://docs.example.com/policy#top",
        )
    ]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop(turns))) == 5


async def test_a_parallel_batch_counts_as_one_turn() -> None:
    # Three overlapping searches at once: one turn, not three stale ones.
    batch = [("search_flights", {"query": q}, search(q, i)) for i, q in enumerate(QUERIES[:3])]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop([batch]))) is None


async def test_a_client_retry_of_the_same_request_does_not_count_again() -> None:
    steps = rephrased(3)
    # The request carrying the 3rd result is sent three more times (an SDK retrying a 500).
    retried = [*steps[:3], steps[3], steps[3], steps[3]]
    assert first_trip(await RunSimulator([Novelty()]).run(retried)) is None


async def test_turns_is_tightenable() -> None:
    results = await RunSimulator([(Novelty(), NoveltyConfig(turns=2))]).run(rephrased(6))
    assert first_trip(results) == 4


async def test_state_stays_bounded() -> None:
    sim = RunSimulator([Novelty()])
    await sim.run(rephrased(3))
    turns = [
        [("search_flights", {"query": f"q {i}"}, {"results": [f"new result {i} {j}" for j in range(40)]})]
        for i in range(60)
    ]
    await sim.run(agent_loop(turns))
    assert await sim.run_state_bytes() < 12 * 200 + 100


def test_kinds() -> None:
    cfg = NoveltyConfig()
    assert kind_of("web_search", cfg) == kind_of("searchFlights", cfg) == kind_of("tavily-search", cfg) == "search"
    assert kind_of("fetch_url", cfg) == kind_of("read_document", cfg) == "fetch"
    assert kind_of("ask_leader", cfg) == "ask_leader"


# -- results replayed as text (an agent calling tools natively, keeping its history as text) --------------

TASK = "New task:\nFind a flight from Lisbon to Berlin in May under 30 EUR."


def replayed(texts: list[str], *, merged: bool = False, calls: bool = True) -> list[Step]:
    """Step i's response calls search i (when `calls`); request i+1 sends its answer `texts[i]` back as user
    text after the calls written as an assistant turn, or (`merged`: a failed step leaves no assistant turn)
    appended to the user text before it."""
    steps = []
    for i in range(len(texts) + 1):
        if merged:
            text, turns = "\n".join([TASK, *texts[:i]]), 0
        else:
            text, turns = (texts[i - 1] if i else TASK), i
        info = dataclasses.replace(
            request(message_count=2 + (0 if merged else 2 * i), assistant_turns=turns, user_text=text),
            tool_names=("search_flights", "final_answer"),
        )
        made = [call("search_flights", {"query": QUERIES[i % len(QUERIES)]}, f"c{i}")] if calls else []
        steps.append(Step(info, response(tool_calls=made, text="" if calls else "Here is what I found so far.")))
    return steps


def observation(i: int) -> str:
    return "Observation:\n" + json.dumps(search(QUERIES[i], i))


async def test_rephrased_searches_replayed_as_text_trip_at_the_fourth() -> None:
    results = await RunSimulator([Novelty()]).run(replayed([observation(i) for i in range(5)]))
    assert first_trip(results) == 5  # as results in the tool fields
    assert shows(results[4].one("novelty"), "calls")["tools"] == ["search_flights"]


async def test_errors_appended_to_the_user_text_trip_at_the_fourth() -> None:
    errors = [
        f"Error:\nError executing tool 'search_flights' with arguments {{'query': '{QUERIES[i]}'}}: RuntimeError: "
        "flight search backend unavailable for route LIS-BER (upstream status 503)\nPlease try again or use another "
        "tool\nNow let's retry: take care not to repeat previous errors! If you have retried several times, try a "
        "completely different approach."
        for i in range(5)
    ]
    assert first_trip(await RunSimulator([Novelty()]).run(replayed(errors, merged=True))) == 5


async def test_replayed_searches_finding_new_flights_pass() -> None:
    def fresh(i: int) -> str:
        found = [{**f, "flight": f"{f['flight']}-{i}", "price_eur": f["price_eur"] + 7 * i} for f in FLIGHTS]
        return "Observation:\n" + json.dumps({"query": QUERIES[i], "results": found})

    assert first_trip(await RunSimulator([Novelty()]).run(replayed([fresh(i) for i in range(5)]))) is None


async def test_a_user_saying_the_same_again_after_text_answers_is_not_judged() -> None:
    """No call came before: the user text answers none (tools declared, as in a chat with tools)."""
    again = "Still wrong. " + json.dumps(search(QUERIES[0]))
    assert first_trip(await RunSimulator([Novelty()]).run(replayed([again] * 5, calls=False))) is None


# -- what a command printed --------------------------------------------------------------------------

RUN_WAYS = ["python repro.py", "cd /repo && python repro.py", "python /repo/repro.py 2>&1", "python repro.py | tail"]


def repro(passing: int) -> str:
    rows = [f"row {i:03}: invoice INV-{4000 + i} amount {i * 13 % 500}.00 EUR" for i in range(20)]
    frames = ['  File "/repo/repro.py", line 41, in <module>', "    totals = reconcile(rows)"]
    failed = f"MismatchError: row {7 + 3 * passing}: expected 1{passing}3.00, got 0.00"
    return "\n".join([f"$ {RUN_WAYS[passing % 4]}", *rows, *frames, failed, f"{passing} passed in 0.{passing}4s"])


def runs(printed: list[int]) -> list[Step]:
    turns = [[("bash", {"command": RUN_WAYS[n % 4]}, repro(p))] for n, p in enumerate(printed)]
    return agent_loop(turns)


async def test_a_run_printing_a_line_it_never_printed_is_progress() -> None:
    assert first_trip(await RunSimulator([Novelty()]).run(runs(list(range(6))))) is None


async def test_runs_printing_only_what_they_printed_before_trip() -> None:
    assert first_trip(await RunSimulator([Novelty()]).run(runs([0] * 6))) == 5
    assert first_trip(await RunSimulator([Novelty()]).run(runs([0, 1] * 3))) == 6  # a flipped line


# A machine whose interpreter warns about a broken plugin file on every start, whatever the script.
WARNING_BLOCK = """Warning: could not load plugin registry /usr/local/share/toolkit/plugins.d/legacy-hooks.cfg
  Traceback (most recent call last):
    File "/usr/local/lib/toolkit/registry.py", line 88, in load_hooks
      module = importer.find_spec(entry).loader
  AttributeError: 'NoneType' object has no attribute 'loader'
Continuing without the legacy hooks"""


def probe(labels: list[str], values: list[str]) -> tuple[str, dict[str, str], str]:
    """A coding agent's probe: a script printing labelled values; its output, then the warning block."""
    script = "python3 - <<'EOF'\n" + "\n".join(f"print('{label}:', check('{label}'))" for label in labels) + "\nEOF"
    printed = "\n".join(f"{label}: {value}" for label, value in zip(labels, values, strict=True))
    return ("bash", {"command": script}, f"{printed}\n{WARNING_BLOCK}")


PROBES = [
    (
        ["parse_date('2024-02-30') raises", "parse_date('2024-02-29') returns"],
        ["ValueError day out of range", "Feb 29"],
    ),
    (["strict mode default", "locale fallback order"], ["False", "en_US then C then POSIX"]),
    (["timezone of naive input", "dst shift applied"], ["UTC assumed silently", "no, offset stays +01:00"]),
    (["cache hit after reload", "cache size limit"], ["miss, key includes mtime", "128 entries LRU"]),
    (["fixed parse_date('2024-02-30')", "fixed strict default"], ["raises InvalidDate", "True after the patch"]),
]


async def test_probes_printing_new_values_beside_a_constant_warning_pass() -> None:
    # Each probe answers another question; the block every run of the interpreter prints is not the answer.
    tests = ("bash", {"command": "pytest tests/test_dates.py -q"}, f"41 passed, 1 failed in dates\n{WARNING_BLOCK}")
    turns = [[tests], *[[probe(labels, values)] for labels, values in PROBES]]
    turns += [[probe(labels, list(reversed(values)))] for labels, values in PROBES]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop(turns))) is None


async def test_the_same_answer_beside_a_constant_warning_still_trips() -> None:
    answer = "\n".join(f"row {i}: invoice batch {i * 7} was exported to the ledger at step {i}" for i in range(8))
    learned = [[probe(labels, values)] for labels, values in PROBES[:2]]
    stuck = [
        [("bash", {"command": f"python3 tools/export_report.py --since {day}"}, f"{answer}\n{WARNING_BLOCK}")]
        for day in ("monday", "2024-05-06", "yesterday", "last-week")
    ]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop([*learned, *stuck]))) == 7


async def test_a_probes_printed_labels_are_its_answer_not_an_echo() -> None:
    # The labels come from the script and the values are single words: the lines are still what it found.
    asked = [
        ["im(a).is_zero", "im(a) != 0", "bool(im(a))", "im(a).is_real", "Point2D(1, 2).is_zero"],
        ["re(b).is_extended_nonnegative", "abs(e) < 2", "e == 1", "b.is_commutative", "sin(x).is_finite"],
        ["Intersection(*[])", "not other_sets", "other_sets == S.UniversalSet", "len(res)", "len(unk)"],
        [
            "inspect.isbuiltin(int)",
            "int.__module__",
            "inspect.isclass(struct.Struct)",
            "hints[ret]",
            "typing.get_origin(hint)",
        ],
        ["sqf_list(x**5).degree", "gcd of the factors", "factor count", "leading coefficient", "is squarefree"],
        ["_half(other)", "b.is_extended_real", "Pow(b, e).is_zero", "e.is_integer", "other.is_Rational"],
    ]
    values = ["None", "True", "False", "2", "None"]
    turns = [[probe(labels, values[n % 5 :] + values[: n % 5])] for n, labels in enumerate(asked)]
    assert first_trip(await RunSimulator([Novelty()]).run(agent_loop(turns))) is None
