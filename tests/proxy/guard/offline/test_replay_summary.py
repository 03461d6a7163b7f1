"""A replay's summary per detector: a long healthy session under permissive caps is not stopped, a runaway
is, at the call where the guard answers it, out of the calls it made as recorded, with the detector's
reason and evidence; warnings are counted once per response, and folders add their files up."""

from __future__ import annotations

from typing import Any

import orjson

from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.offline.replay import Exchange, ReplayReport, replay
from runguard.proxy.guard.offline.replay_summary import Summary
from runguard.proxy.store.records import TripRecord
from tests.support.sessions import PERMISSIVE, healthy, runaway


def _exchanges(lines: list[dict[str, Any]]) -> list[Exchange]:
    return [
        Exchange(e["run_id"], e["at"], e["path"], orjson.dumps(e["request"]), orjson.dumps(e["response"]))
        for e in lines
    ]


async def _replay(lines: list[dict[str, Any]], sections: dict[str, Any]) -> ReplayReport:
    return await replay(_exchanges(lines), Settings.model_validate(sections), default_detectors())


async def test_a_long_healthy_session_runs_through_and_a_runaway_is_stopped_with_its_reason() -> None:
    report = await _replay([*healthy("fixing", 150), *runaway("looping", 20)], PERMISSIVE)
    summary = Summary()
    summary.add(report, "traffic.jsonl")
    assert (summary.sessions, summary.calls, summary.files) == (2, 170, 1)
    (stop,) = summary.stops
    assert (stop.run_id, stop.detector, stop.of_calls, stop.source) == ("looping", "non_progress", 20, "traffic.jsonl")
    assert 3 <= stop.at_call <= 8 and stop.reason and stop.evidence
    assert summary.responses == 150 + stop.at_call - 1
    assert summary.as_json()["sessions_stopped"] == 1
    assert summary.as_json()["detectors"]["non_progress"]["stops"][0]["at_call"] == stop.at_call


async def test_a_cap_stops_a_long_session_where_it_is_reached_and_says_so() -> None:
    report = await _replay(healthy("fixing", 150), {"guard": {"detectors": {"max_requests": {"limit": 100}}}})
    summary = Summary()
    summary.add(report)
    (stop,) = summary.stops
    assert (stop.detector, stop.at_call, stop.of_calls) == ("max_requests", 101, 150)
    assert stop.evidence["limit"] == 100 and "100" in stop.reason


def _trip(run_id: str, index: int, detector: str, action: str) -> TripRecord:
    return TripRecord(run_id, "k", detector, action, "why", "run", index, 0.0, 0.0, 0, 0.0)


async def test_warnings_count_once_per_response_and_per_detector_and_folders_add_up() -> None:
    report = await _replay(healthy("fixing", 10), PERMISSIVE)
    report.trips[:] = [
        _trip("fixing", 2, "tool_storm", "warn"),
        _trip("fixing", 2, "spiral", "warn"),
        _trip("fixing", 2, "spiral", "warn"),
        _trip("fixing", 5, "spiral", "warn"),
        _trip("fixing", 6, "novelty", "nudge"),
    ]
    summary = Summary()
    summary.add(report)
    summary.add(report, "again.jsonl")
    figures = summary.as_json()
    assert (figures["sessions"], figures["calls"], figures["responses"], figures["files"]) == (2, 20, 20, 2)
    assert (figures["warned_responses"], figures["warning_share"], figures["nudged_responses"]) == (4, 0.2, 2)
    assert figures["detectors"]["spiral"]["warned_responses"] == 4
    assert figures["detectors"]["tool_storm"]["warning_share"] == 0.1
    assert figures["detectors"]["novelty"]["nudged_responses"] == 2
    assert figures["sessions_stopped"] == 0 and Summary().share(3) == 0.0
