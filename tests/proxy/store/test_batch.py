"""Records as rows, and one batch written in one transaction: values every database holds, what each
batch adds to its runs (outcome, totals, agents), and a write that adds nothing twice when retried while
two batches add to one run without overwriting each other."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import orjson
import pytest

from runguard.proxy.store import StoreReader, make_engine, parse, upgrade
from runguard.proxy.store.batch import (
    INT32,
    TEXT_LIMIT,
    Columns,
    EngineWriter,
    build,
    deltas_of,
    new_agents,
    outcome,
    run_conflict,
    stored_run_id,
)
from runguard.proxy.store.models import Request
from runguard.proxy.store.records import VerdictRecord
from tests.proxy.store import factory
from tests.proxy.store.conftest import count

T0 = factory.T0


def _ids(prefix: str = "id") -> Iterator[str]:
    """Row ids as a writer hands them out."""
    return (f"{prefix}-{n}" for n in itertools.count())


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"blocked_by": "spiral"}, "tripped:spiral"),
        (
            {"verdicts": (VerdictRecord("text_loop", "warn", "w"), VerdictRecord("fan_out", "block", "b"))},
            "tripped:fan_out",
        ),
        ({"error": "upstream_timeout"}, "error"),
        ({"status": None}, "error"),
        ({"status": 500}, "error"),
        ({"tool_calls": (), "finish_reason": "stop"}, "completed"),
        ({"tool_calls": (), "finish_reason": "in_progress"}, None),  # a background response still running
        ({"tool_calls": ("search",), "finish_reason": "tool_calls"}, None),  # the agent is still at work
        ({"tool_calls": (), "finish_reason": None}, None),
    ],
)
def test_what_a_request_says_of_how_its_run_ended(fields: dict[str, object], expected: str | None) -> None:
    assert outcome(factory.request(**fields)) == expected


def test_rows_hold_only_values_every_database_takes() -> None:
    record = factory.request(
        "run\x00-é",
        agent="a" * 1000,
        input_tokens=2**40,
        output_tokens=-(2**40),
        usd=float("nan"),
        upstream_ms=float("inf"),
        error="bad \udcff byte",
    )
    trip = factory.trip(evidence={"calls": ({"tool": "t"},), 3: {1, 2}, "nul": "a\x00b"}, tokens_so_far=2**40)
    batch = build([record, trip], _ids(), record_bodies=False)
    (row, _), (trip_row, _) = batch.requests[0], batch.trips[0]
    assert row["run_id"] == "run-é"
    assert "\x00" not in row["run_id"] and len(row["agent"]) == 256
    assert (row["input_tokens"], row["output_tokens"]) == (INT32, -INT32)
    assert (row["usd"], row["upstream_ms"]) == (0.0, 0.0)
    assert row["error"] == "bad \\udcff byte"
    assert trip_row["tokens_so_far"] == 2**40  # a BigInteger column
    assert trip_row["evidence"]["calls"] == [{"tool": "t"}] and trip_row["evidence"]["nul"] == "ab"
    assert trip_row["evidence"]["3"] in ("{1, 2}", "{2, 1}")
    assert orjson.dumps(trip_row["evidence"])  # plain JSON


def test_a_record_no_row_can_hold_is_left_out_alone() -> None:
    bad = factory.request("run-bad", input_tokens="many")  # type: ignore[arg-type]
    batch = build([factory.request("run-ok"), bad, factory.trip("run-ok")], _ids(), record_bodies=False)
    assert (len(batch), len(batch.unbuilt)) == (2, 1)


def test_bodies_are_kept_only_in_record_mode() -> None:
    records = [factory.request("r", 1, body=factory.body()), factory.request("r", 2)]
    assert build(records, _ids(), record_bodies=False).bodies == []
    (kept,) = build(records, _ids(), record_bodies=True).bodies
    assert (kept["request_id"], kept["path"], kept["status"]) == ("id-0", "/v1/chat/completions", 200)


def test_long_run_ids_keep_their_start_and_stay_apart() -> None:
    first, second = "x" * 5000 + "a", "x" * 5000 + "b"
    assert len(stored_run_id(first)) == TEXT_LIMIT and stored_run_id(first) != stored_run_id(second)
    assert stored_run_id(first).startswith("x" * 100) and stored_run_id("short") == "short"


def test_deltas_count_only_the_rows_that_went_in() -> None:
    records = [
        factory.request("run-a", 1, at=T0 + 5, usd=0.5, input_tokens=10),
        factory.request("run-a", 2, at=T0 + 1, usd=0.25, input_tokens=5, polled=True),  # adds cost, no request
        factory.request("run-a", 3, at=T0 + 9, usd=0.0, tool_calls=(), finish_reason="stop"),
        factory.trip("run-a", action="warn", at=T0 + 2),
        factory.trip("run-b", at=T0 + 20, usd_avoided_estimate=1.5),
    ]
    batch = build(records, _ids(), record_bodies=False)
    deltas = deltas_of(batch, {"id-0", "id-1", "id-2"}, {"id-3", "id-4"})
    a, b = deltas["run-a"], deltas["run-b"]
    assert (a.requests, a.usd, a.input_tokens, a.warnings, a.trips) == (2, 0.75, 115, 1, 0)
    assert (a.first_seen, a.last_seen, a.exit_reason, a.exit_at) == (T0 + 1, T0 + 9, "completed", T0 + 9)
    assert (b.trips, b.usd_avoided, b.exit_reason, b.requests) == (1, 1.5, "tripped:non_progress", 0)
    assert deltas_of(batch, set(), set()) == {}


def test_each_agent_is_named_once_per_run_at_its_first_time_in_lock_order() -> None:
    records = [
        factory.request("run-b", 1, agent="coder", at=T0 + 3),
        factory.request("run-a", 1, agent="planner", at=T0 + 2),
        factory.request("run-a", 2, agent="planner", at=T0 + 1),
        factory.request("run-a", 3, agent="", at=T0),
    ]
    batch = build(records, _ids(), record_bodies=False)
    assert new_agents(batch, {"id-0", "id-1", "id-2", "id-3"}) == [
        {"run_id": "run-a", "agent": "planner", "first_seen": T0 + 1},
        {"run_id": "run-b", "agent": "coder", "first_seen": T0 + 3},
    ]


def test_rows_bind_by_position_in_column_order_with_json_as_text() -> None:
    columns = Columns(Request.__table__)  # type: ignore[arg-type]
    batch = build([factory.request("r", verdicts=(factory.verdict(),))], _ids(), record_bodies=False)
    (values,) = columns.values([row for row, _ in batch.requests])
    by_name = dict(zip(columns.names, values, strict=True))
    assert by_name["run_id"] == "r" and by_name["tool_calls"] == '["search"]'
    assert orjson.loads(by_name["verdicts"])[0]["detector"] == "non_progress"


def test_the_sql_text_conflict_clause_follows_the_same_rules() -> None:
    clause = run_conflict("min", "max")
    assert "requests = runs.requests + excluded.requests" in clause and "usd = runs.usd + excluded.usd" in clause
    assert "first_seen = min(runs.first_seen, excluded.first_seen)" in clause
    assert "last_seen = max(runs.last_seen, excluded.last_seen)" in clause


async def test_a_retried_batch_adds_nothing_twice_and_batches_add_up(store_url: str) -> None:
    target = parse(store_url)
    engine = make_engine(target)
    try:
        await upgrade(engine, target)
        writer = EngineWriter(engine)
        first = build(
            [factory.request("run", 1, at=T0 + 5, agent="planner"), factory.trip("run", action="warn", at=T0 + 6)],
            _ids("a"),
            record_bodies=False,
        )
        second = build(
            [
                factory.request("run", 2, at=T0 + 1, agent="coder"),
                factory.request("run", 3, at=T0 + 8, blocked_by="spiral"),
            ],
            _ids("b"),
            record_bodies=False,
        )
        for prepared in (first, first, second, second):  # each retried after a lost answer
            await writer.write(prepared)
        run = await StoreReader.on(engine).runs.one("run")
    finally:
        await engine.dispose()
    assert run is not None
    assert (run["requests"], run["warnings"], run["agents"]) == (3, 1, ["coder", "planner"])
    assert (run["first_seen"], run["last_seen"], run["status"]) == (T0 + 1, T0 + 8, "tripped:spiral")
    assert await count(store_url, "requests") == 3
