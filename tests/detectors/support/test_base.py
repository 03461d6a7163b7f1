"""What every detector shares: the base class's hooks do nothing, a verdict's evidence has the documented
keys and shows calls by digest only, results are paired with the calls they answer, and a response counts
as an upstream failure exactly when the breaker docs say so."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from runguard.detectors.support.base import (
    Action,
    Detector,
    DetectorConfig,
    Evidence,
    Point,
    RequestSeen,
    ResponseKind,
    ResponseSeen,
    RunFacts,
    ShownCall,
    push_action,
    shown_call,
    shown_results,
)
from runguard.proxy.core.ops import Scope
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from tests.detectors.harness import call, request, response, result

FACTS = RunFacts(request_index=3, started_at=0.0, usd=0.0, input_tokens=0, output_tokens=0, in_flight=1, key_day_usd=0)
SECRET = "the customer's home address"


class Quiet(Detector[DetectorConfig]):
    name = "quiet"
    Config = DetectorConfig


def _seen_response(status: int | None, error: str | None = None) -> ResponseSeen:
    return ResponseSeen("run", "k_0", 0.0, request(), response(error=error), FACTS, status, usd=0.0, latency=0.1)


def test_the_default_config_blocks_with_the_answer_that_ends_the_client_and_refuses_unknown_keys() -> None:
    cfg = DetectorConfig()
    assert (cfg.action, cfg.response) == (Action.BLOCK, ResponseKind.AUTO)
    assert DetectorConfig.model_validate({"action": "nudge", "response": "stop"}).action is Action.NUDGE
    with pytest.raises(ValidationError):
        DetectorConfig.model_validate({"threshold": 3})
    with pytest.raises(ValidationError):
        cfg.action = Action.OFF  # type: ignore[misc]


def test_every_hook_of_the_base_class_does_nothing() -> None:
    quiet, cfg = Quiet(), DetectorConfig()
    seen = RequestSeen("run", "k_0", 0.0, request(), context_window=128_000)
    after = _seen_response(200)
    assert quiet.plan_request(seen, cfg) == {}
    assert quiet.check_request(seen, FACTS, {}, cfg) is None
    assert quiet.inspect_response(after, cfg) is None
    assert quiet.plan_response(after, cfg) == {}
    assert quiet.check_response(after, {}, cfg) is None
    assert (Quiet.per_thread, Quiet.stays_stopped, Quiet.nudges) == (False, True, True)


def test_a_verdict_s_evidence_is_the_summary_what_it_shows_and_its_figures() -> None:
    shows = Evidence(agents=("planner", "critic"), series=(Point(1, 10.0), Point(2, 20.0)), limit=5)
    verdict = Quiet().verdict("handoff cycle planner -> critic", Scope.KEY, shows, value=6, rounds=3)
    assert (verdict.detector, verdict.scope, verdict.advisory) == ("quiet", Scope.KEY, False)
    assert verdict.evidence == {
        "summary": "handoff cycle planner -> critic",
        "agents": ["planner", "critic"],
        "series": [{"x": 1, "y": 10.0}, {"x": 2, "y": 20.0}],
        "limit": 5,
        "value": 6,
        "rounds": 3,
    }
    assert Quiet().verdict("plain").evidence == {"summary": "plain"}


def test_evidence_leaves_out_what_is_not_set() -> None:
    assert Evidence().as_json() == {}
    assert Evidence(value=0.0).as_json() == {"value": 0.0}
    assert ShownCall("search").as_json() == {"tool": "search"}
    assert ShownCall("search", "a1", None, 4).as_json() == {"tool": "search", "args_digest": "a1", "request_seq": 4}


def test_a_shown_call_holds_digests_never_the_content() -> None:
    asked = call("lookup", {"address": SECRET, "page": 1}, "c1")
    answered = result("lookup", {"found": SECRET}, "c1")
    shown = shown_call(asked, answered, seq=2)
    text = orjson.dumps(Evidence(calls=(shown,)).as_json()).decode()
    assert SECRET not in text
    assert shown.tool == "lookup" and shown.request_seq == 2
    assert shown.args_digest and shown.result_digest
    # the same arguments in another key order are the same call
    assert shown_call(call("lookup", {"page": 1, "address": SECRET})).args_digest == shown.args_digest
    assert shown_call(call("lookup", {"address": "elsewhere", "page": 1})).args_digest != shown.args_digest


def test_shown_results_pairs_each_result_with_its_call_and_filters_by_tool() -> None:
    calls = [call("search", {"q": "a"}, "c1"), call("fetch", {"url": "u"}, "c2")]
    results = [result("search", "hits", "c1"), result("fetch", "page", "c2"), result("orphan", "x", "c9")]
    seen = request(prior_calls=calls, new_results=results)
    shown = shown_results(seen, seq=7)
    assert [s.tool for s in shown] == ["search", "fetch", "orphan"]
    assert shown[0] == shown_call(calls[0], results[0], 7)
    assert shown[2] == ShownCall("orphan", None, None, 7)
    assert [s.tool for s in shown_results(seen, None, tools={"fetch"})] == ["fetch"]


async def test_push_action_adds_a_turn_once_however_often_it_is_resent() -> None:
    turn: dict[str, Any] = {
        "prior_calls": [call("search", {"q": "a"}, "c1")],
        "new_results": [result("search", "hits", "c1")],
    }
    plan = push_action(request(**turn), keep=4)
    state = MemoryState()
    ids = ScopeIds(run="run", key="k", key_model="k:m", key_day="k:d")
    for _ in range(3):
        (window,) = await state.execute(ids, [plan["actions"]])
    assert isinstance(window, tuple) and len(window) == 1
    assert push_action(request(), keep=4) == {}  # a turn that called no tool is no action


@pytest.mark.parametrize(
    ("status", "error", "failed"),
    [
        (None, None, True),
        (429, None, True),
        (500, None, True),
        (503, None, True),
        (200, None, False),
        (200, "server_error mid-stream", True),
        (400, "bad request", False),
        (404, None, False),
    ],
)
def test_an_upstream_failure_is_no_answer_a_429_a_5xx_or_an_error_in_a_200(
    status: int | None, error: str | None, failed: bool
) -> None:
    assert _seen_response(status, error).upstream_failed is failed


def test_the_support_package_face_names_the_same_objects_its_modules_define() -> None:
    from runguard.detectors import support
    from runguard.detectors.support import base, normalize, sketch, turns

    homes = (base, normalize, sketch, turns)
    for name in support.__all__:
        assert any(getattr(home, name, None) is getattr(support, name) for home in homes), name
    assert support.Detector is base.Detector
