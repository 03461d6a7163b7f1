"""Request and response shapes: the hooks a lineup leaves out for a shape could not have done anything.

Three kinds of proof: the providers' recorded cases (`fixtures/`) show a response
calls tools only when its request may call them (`may_call_tools`); each
detector's flags are checked against what its hooks do for a shape without
results, calls or tools; and whole runs through the real guard give the same
trips and the same state with the shapes as without them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from runguard.detectors.registry import default_detectors
from runguard.detectors.support.base import Detector, RequestSeen, ResponseSeen, RunFacts
from runguard.proxy.core.events import Api, RequestInfo, ResponseInfo
from runguard.proxy.core.ops import Get, Scope
from runguard.proxy.guard.lineup import engine, shapes
from runguard.proxy.guard.lineup.engine import Armed, Lineup
from runguard.proxy.guard.lineup.shapes import CALLS, EVERY, RESULTS, TOOLS, may_call_tools, request_shape
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common.conversation import TOOLS_ELSEWHERE
from runguard.proxy.providers.registry import adapter_for
from tests.detectors.harness import (
    RunSimulator,
    Step,
    agent_loop,
    call,
    request,
    response,
    result,
)
from tests.proxy.providers.test_fixtures import CASES, adapter_of, context_of

FACTS = RunFacts(
    request_index=5, started_at=0.0, usd=0.5, input_tokens=1000, output_tokens=100, in_flight=1, key_day_usd=1.0
)
REQUESTED = [case for case in CASES if (case / "request.json").is_file()]
TOOL_DETECTORS = {"novelty", "non_progress", "repeat_call", "stagnation", "oscillation", "spiral", "tool_storm"}


def _responses(case: Path, adapter: Any) -> list[ResponseInfo]:
    found = []
    if (case / "response.json").is_file():
        found.append(adapter.parse_response((case / "response.json").read_bytes()))
    if (case / "stream.sse").is_file():
        parser = adapter.stream_parser()
        parser.feed((case / "stream.sse").read_bytes())
        found.append(parser.close())
    return found


# -- the providers' rule ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", REQUESTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_recorded_response_calls_tools_only_when_its_request_may(case: Path) -> None:
    adapter = adapter_of(case)
    info = adapter.parse_request((case / "request.json").read_bytes(), context_of(case))
    for answer in _responses(case, adapter):
        if answer.tool_calls:
            assert may_call_tools(info), "a toolless request got tool calls: the shapes would skip them"


def test_the_recorded_cases_hold_tool_calls_and_answers_without() -> None:
    """The rule above is not checked on nothing: some cases call tools, some requests declare none."""
    called, toolless = 0, 0
    for case in REQUESTED:
        adapter = adapter_of(case)
        info = adapter.parse_request((case / "request.json").read_bytes(), context_of(case))
        called += any(answer.tool_calls for answer in _responses(case, adapter))
        toolless += not may_call_tools(info)
    assert called >= 5 and toolless >= 3


def _parsed(api: str, body: dict[str, Any]) -> RequestInfo:
    adapter = adapter_for(Api(api))
    assert adapter is not None
    return adapter.parse_request(orjson.dumps(body), RequestContext("gemini-2.5-flash", None, False))


PLAIN = {
    "chat": {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]},
    "responses": {"model": "gpt-4.1", "input": "hi"},
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    "messages": {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
}


@pytest.mark.parametrize("api", sorted(PLAIN))
def test_a_question_without_tools_is_the_shape_that_skips_the_tool_detectors(api: str) -> None:
    info = _parsed(api, PLAIN[api])
    assert not may_call_tools(info) and request_shape(info) == 0


@pytest.mark.parametrize("api", sorted(PLAIN))
@pytest.mark.parametrize("key", TOOLS_ELSEWHERE)
def test_tools_from_elsewhere_than_the_request_s_tools_count(api: str, key: str) -> None:
    info = _parsed(api, {**PLAIN[api], key: {"id": "stored"}})
    assert info.tools_elsewhere and may_call_tools(info) and request_shape(info) == TOOLS


def test_continuations_socket_turns_and_unreadable_requests_may_call_tools() -> None:
    plain = request()
    assert not may_call_tools(plain)
    assert may_call_tools(dataclasses.replace(plain, previous_response_id="resp_1"))
    assert may_call_tools(dataclasses.replace(plain, api=Api.REALTIME))
    assert may_call_tools(dataclasses.replace(plain, parse_error="bad json"))
    assert may_call_tools(dataclasses.replace(plain, tool_names=("search",)))


def test_a_request_s_shape_says_what_it_carries() -> None:
    searched = [call("search", {"q": "x"}, "c1")]
    assert request_shape(request(prior_calls=searched)) == CALLS | TOOLS
    assert request_shape(request(new_results=[result("search", "r", "c1")])) == RESULTS | TOOLS
    assert request_shape(request(prior_calls=searched, new_results=[result("search", "r", "c1")])) == EVERY


def test_user_text_that_may_replay_results_is_read_as_results() -> None:
    """An agent calling tools natively and sending their results back as user text (`replayed`)."""
    observed = dataclasses.replace(request(assistant_turns=1, user_text="Observation: found"), tool_names=("search",))
    assert request_shape(observed) == RESULTS | TOOLS
    assert request_shape(dataclasses.replace(observed, tool_names=())) == 0


# -- each detector's flags --------------------------------------------------------------------------


def _seen(info: RequestInfo) -> RequestSeen:
    return RequestSeen("run-1", "key-1", 1000.0, info, 128_000, "body-hash")


@pytest.mark.parametrize("detector", [d for d in default_detectors() if d.reads_calls], ids=lambda d: d.name)
def test_a_detector_said_to_read_only_calls_plans_and_finds_nothing_without_them(detector: Detector[Any]) -> None:
    cfg = detector.Config()
    seen = _seen(request(new_results=[result("search", "found", "c1")]))
    assert detector.plan_request(seen, cfg) == {}
    assert detector.check_request(seen, FACTS, {}, cfg) is None


@pytest.mark.parametrize("detector", [d for d in default_detectors() if d.needs_tools], ids=lambda d: d.name)
def test_a_detector_said_to_need_tools_only_reads_before_and_does_nothing_without_calls(
    detector: Detector[Any],
) -> None:
    """Its request hooks write nothing and find nothing (skipping them loses only a read for its response
    hooks), and a response without calls gets no plan (so no results) and no verdict, whatever was read."""
    cfg = detector.Config()
    assert type(detector).check_request is Detector.check_request
    plan = detector.plan_request(_seen(request()), cfg)
    assert all(isinstance(op, Get) for op in plan.values())
    before = {"tools": ("a1b2c3d4",), "turns": ("x", "x", "x", "x", "x")}
    info = request(prior_calls=[call("search", {"q": "x"}, "c1")], new_results=[result("search", "r", "c1")])
    for answer in (response(text="the answer"), response(error="overloaded")):
        seen = ResponseSeen("run-1", "key-1", 1000.0, info, answer, FACTS, 200, 0.01, 1.0, before)
        assert detector.inspect_response(seen, cfg) is None
        assert detector.plan_response(seen, cfg) == {}
        assert detector.check_response(seen, {}, cfg) is None


def test_the_flags_name_the_detectors_expected() -> None:
    by = {d.name: d for d in default_detectors()}
    assert {n for n, d in by.items() if d.reads_calls} == {"stagnation", "oscillation"}
    assert {n for n, d in by.items() if d.needs_tools} == {"spiral", "tool_storm", "consecutive_same_tool"}


# -- the lineup ---------------------------------------------------------------------------------------


def _every() -> Lineup:
    return Lineup.of(Armed(d, d.Config()) for d in default_detectors())


def _names(hooks: tuple[engine.Hook, ...]) -> set[str]:
    return {h.name for h in hooks}


def test_a_lineup_lists_the_request_hooks_of_each_shape() -> None:
    lineup = _every()
    assert lineup.requests[EVERY] == (lineup.plans_request, lineup.checks_request)
    plans, checks = lineup.requests[0]
    assert not (_names(plans) | _names(checks)) & TOOL_DETECTORS
    assert _names(plans) | _names(checks) >= {"duplicate_request", "delegation", "handoff_cycle", "budget"}
    plans, _ = lineup.requests[TOOLS]  # a first request with tools: the rosters are read
    assert {"spiral", "tool_storm"} <= _names(plans) and not _names(plans) & {"novelty", "stagnation"}
    plans, _ = lineup.requests[TOOLS | CALLS]
    assert {"stagnation", "oscillation"} <= _names(plans) and "novelty" not in _names(plans)


def test_a_lineup_lists_the_response_hooks_with_and_without_calls() -> None:
    lineup = _every()
    assert lineup.responses[True] == (lineup.inspects_response, lineup.plans_response, lineup.checks_response)
    inspects, plans, checks = lineup.responses[False]
    skipped = {"spiral", "tool_storm", "consecutive_same_tool"}
    assert not (_names(inspects) | _names(plans) | _names(checks)) & skipped
    assert {"parallel_calls", "fan_out", "delegation", "text_loop"} <= _names(plans)  # they clear or track anyway


# -- the same verdicts and state ----------------------------------------------------------------------


def _declared(steps: list[Step]) -> list[Step]:
    return [
        dataclasses.replace(s, request=dataclasses.replace(s.request, tool_names=("search", "fetch"))) for s in steps
    ]


def _mixed_run() -> list[Step]:
    """A tool loop, a question without tools (text answers), a loop again that spirals and repeats."""
    loop = [[("search", {"q": f"cheap flights lisbon {i}"}, {"hits": i})] for i in range(3)]
    spiral = [[("search", {"query": f"lowest fare lisbon berlin may {w}"}, "no results")] for w in "abcdef"]
    steps = _declared(agent_loop(loop))
    steps += [Step(request(question=f"and {q}?", user_text=f"and {q}?"), response(text=q)) for q in ("x", "y")]
    steps += _declared(agent_loop(spiral))
    steps.append(Step(request(question="thanks"), response(text="bye")))
    return steps


async def _outcome(steps: list[Step]) -> tuple[list[list[tuple[str, str]]], dict[str, Any], dict[str, Any]]:
    sim = RunSimulator(default_detectors())
    results = await sim.run(steps)
    trips = [[(f.detector, f.reason) for f in r.findings] for r in results]
    return trips, await sim.run_fields(), await sim.run_fields(Scope.THREAD)


async def test_a_run_trips_and_keeps_the_same_with_the_shapes_as_without(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _mixed_run()
    shaped = await _outcome(steps)
    assert any(trips for trips in shaped[0])  # the run does trip: the comparison is about verdicts
    monkeypatch.setattr(engine, "requests_fit", lambda detector, shape: True)
    monkeypatch.setattr(engine, "responses_fit", lambda detector, calls: True)
    assert await _outcome(steps) == shaped
    assert shapes.requests_fit is not engine.requests_fit  # the patch reached the engine only
