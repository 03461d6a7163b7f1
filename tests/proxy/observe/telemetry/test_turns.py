"""Agent turns and pending tool calls, in this process only and bounded: a turn lasts while one agent speaks
and has not been silent for the idle time; it ends (an error if a request of it was blocked) when another
agent speaks, on a sweep, when evicted, or at close. A call waits for its result until taken or evicted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from runguard.proxy.observe.telemetry.turns import AgentTurns, Call, PendingCalls

SECOND = 1_000_000_000


class Spans:
    """A tracer whose ended spans are kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("test")

    def start(self, name: str) -> Callable[[], Any]:
        return lambda: self.tracer.start_span(name, start_time=1)

    def ended(self) -> list[tuple[str, int | None, StatusCode]]:
        return [(s.name, s.end_time, s.status.status_code) for s in self.exporter.get_finished_spans()]


def test_one_agent_s_requests_are_one_turn_until_another_agent_speaks() -> None:
    spans, turns = Spans(), AgentTurns(idle_ns=30 * SECOND)
    first = turns.current("run", "planner", spans.start("invoke_agent planner"), at=SECOND)
    first.last_end = 2 * SECOND
    assert turns.current("run", "planner", spans.start("never"), at=3 * SECOND) is first
    first.last_end = 4 * SECOND
    coder = turns.current("run", "coder", spans.start("invoke_agent coder"), at=5 * SECOND)
    assert coder is not first and coder.agent == "coder"
    assert spans.ended() == [("invoke_agent planner", 4 * SECOND, StatusCode.UNSET)]  # ended at its last request


def test_a_silent_agent_s_next_request_starts_a_new_turn_and_a_sweep_ends_silent_turns() -> None:
    spans, turns = Spans(), AgentTurns(idle_ns=10 * SECOND)
    first = turns.current("a", "planner", spans.start("turn a1"), at=0)
    later = turns.current("a", "planner", spans.start("turn a2"), at=11 * SECOND)
    assert later is not first
    other = turns.current("b", "planner", spans.start("turn b"), at=20 * SECOND)
    other.last_end = 20 * SECOND
    turns.sweep(now=25 * SECOND)  # a's turn (last request at 11 s) is silent past 10 s; b's is not
    assert [name for name, _, _ in spans.ended()] == ["turn a1", "turn a2"]
    turns.sweep(now=31 * SECOND)
    assert [name for name, _, _ in spans.ended()][-1] == "turn b"


def test_a_turn_with_a_blocked_request_ends_as_an_error() -> None:
    spans, turns = Spans(), AgentTurns(idle_ns=SECOND)
    turn = turns.current("run", "planner", spans.start("turn"), at=0)
    turn.blocked = True
    turns.close()
    (ended,) = spans.exporter.get_finished_spans()
    assert ended.status.status_code is StatusCode.ERROR and "blocked by RunGuard" in (ended.status.description or "")


def test_open_turns_are_bounded_and_the_least_recent_is_ended_first() -> None:
    spans, turns = Spans(), AgentTurns(idle_ns=60 * SECOND, max_runs=2)
    for run in ("r1", "r2"):
        turns.current(run, "a", spans.start(f"turn {run}"), at=0)
    turns.current("r1", "a", spans.start("never"), at=SECOND)  # r1 used again: r2 is now the oldest
    turns.current("r3", "a", spans.start("turn r3"), at=2 * SECOND)
    assert [name for name, _, _ in spans.ended()] == ["turn r2"]
    turns.close()
    assert sorted(name for name, _, _ in spans.ended()) == ["turn r1", "turn r2", "turn r3"]


def test_a_call_is_taken_once_by_run_and_key_and_the_oldest_go_first() -> None:
    calls = PendingCalls(max_calls=2)
    search = Call("search", '{"q": 1}', ended=5, agent="planner")
    calls.add("run", "call_1", search)
    assert calls.take("other-run", "call_1") is None
    assert calls.take("run", "call_1") == search
    assert calls.take("run", "call_1") is None
    for key in ("c1", "c2", "c3"):
        calls.add("run", key, Call(key, "", 0, "a"))
    assert calls.take("run", "c1") is None  # evicted: its result still gets a span, timed at the result
    assert calls.take("run", "c3") is not None
