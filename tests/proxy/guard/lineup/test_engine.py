"""The detector engine: per-hook lineups, namespaced state, per-detector results and views, fault isolation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from runguard.detectors.registry import default_detectors
from runguard.detectors.support.base import (
    Action,
    Detector,
    DetectorConfig,
    Plan,
    RequestSeen,
    ResponseKind,
    ResponseSeen,
    Results,
    RunFacts,
    Verdict,
)
from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo, ResponseInfo, ToolResult, Usage
from runguard.proxy.core.ops import Add, Get, Op, Push, Put, Scope
from runguard.proxy.guard.lineup import engine as engine_module
from runguard.proxy.guard.lineup.engine import NO_DETECTORS, Armed, Engine, Finding, Hook, Lineup, Views
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState

RUN, KEY, MODEL = "run-1", "key-1", "test-model"
IDS = ScopeIds(RUN, KEY, f"{KEY}|{MODEL}", f"{KEY}|day")
REQUEST = RequestInfo(api=Api.CHAT, model=MODEL, stream=False, agent=AgentIdentity("agent", "f" * 16))
FACTS = RunFacts(
    request_index=1, started_at=1000.0, usd=0.0, input_tokens=0, output_tokens=0, in_flight=1, key_day_usd=0.0
)
# The guard's own counters go first in every batch, as in the real guard: detectors' ops come after them.
GUARD_REQUEST_OPS: list[Op] = [Add(Scope.RUN, "requests"), Get(Scope.RUN, "requests")]
GUARD_RESPONSE_OPS: list[Op] = [Add(Scope.RUN, "responses")]
HOOKS = ("plan_request", "check_request", "inspect_response", "plan_response", "check_response")


def request_seen(now: float = 1000.0) -> RequestSeen:
    return RequestSeen(RUN, KEY, now, REQUEST, 128_000, "body-hash")


def response_seen() -> ResponseSeen:
    info = ResponseInfo(text="done", finish_reason="stop", usage=Usage(100, 10))
    return ResponseSeen(RUN, KEY, 1001.0, REQUEST, info, FACTS, 200, 0.01, 0.5)


def arm(*detectors: Detector[Any] | tuple[Detector[Any], DetectorConfig]) -> Lineup:
    return Lineup.of(Armed(*d) if isinstance(d, tuple) else Armed(d, d.Config()) for d in detectors)


@dataclass
class Outcome:
    request: list[Finding]
    before: dict[str, Results]
    inspect: list[Finding]
    response: list[Finding]
    views: Views
    seen: ResponseSeen


class Faults:
    def __init__(self) -> None:
        self.got: list[tuple[str, str, BaseException]] = []

    def __call__(self, detector: str, hook: str, exc: BaseException) -> None:
        self.got.append((detector, hook, exc))


async def request_phase(
    engine: Engine, lineup: Lineup, state: MemoryState, seen: RequestSeen | None = None
) -> tuple[list[Finding], dict[str, Results]]:
    seen = seen if seen is not None else request_seen()
    batch = engine.plan_request(lineup, seen, len(GUARD_REQUEST_OPS))
    results = await state.execute(IDS, [*GUARD_REQUEST_OPS, *batch.ops])
    return engine.check_request(lineup, batch, results, seen, FACTS)


async def cycle(engine: Engine, lineup: Lineup, state: MemoryState) -> Outcome:
    """One request and its response, in the order the guard runs them."""
    request, before = await request_phase(engine, lineup, state)
    seen = response_seen()
    views = Views.of(seen, before)
    inspect = engine.inspect_response(lineup, views)
    batch = engine.plan_response(lineup, views, len(GUARD_RESPONSE_OPS))
    results = await state.execute(IDS, [*GUARD_RESPONSE_OPS, *batch.ops])
    response = engine.check_response(lineup, batch, results, views)
    return Outcome(request, before, inspect, response, views, seen)


def no_faults() -> Engine:
    def fault(detector: str, hook: str, exc: BaseException) -> None:
        raise AssertionError(f"{detector}.{hook} raised {exc!r}")

    return Engine(fault)


# -- fake detectors ---------------------------------------------------------------------------------


class Recording(Detector[DetectorConfig]):
    """Overrides no hook: subclasses override some, and log what each call received."""

    Config = DetectorConfig

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def called(self, hook: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.calls if name == hook]


class ResponseOnly(Recording):
    """Plans and checks after the response only."""

    name = "response_only"

    def plan_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Plan:
        self.calls.append(("plan_response", (seen, cfg)))
        return {"n": Add(Scope.RUN, "responses")}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_response", (seen, got, cfg)))
        return None


class RequestOnly(Recording):
    name = "request_only"

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        self.calls.append(("plan_request", (seen, cfg)))
        return {"n": Add(Scope.RUN, "requests")}

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_request", (seen, facts, got, cfg)))
        return None


class InspectOnly(Recording):
    name = "inspect_only"

    def inspect_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("inspect_response", (seen, cfg)))
        return None


class Tally(Recording):
    """Counts requests in a run field and a key field whose local names are the same for every subclass."""

    name = "tally"
    step = 1.0

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        return {
            "count": Add(Scope.RUN, "hits", self.step),
            "label": Put(Scope.RUN, "label", self.name),
            "per_key": Add(Scope.KEY, "hits", self.step),
        }

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_request", (seen, facts, got, cfg)))
        return None


class Alpha(Tally):
    name = "alpha"
    step = 1.0


class Beta(Tally):
    name = "beta"
    step = 10.0


class CheckOnly(Recording):
    """Checks the request without planning anything."""

    name = "check_only"

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_request", (seen, facts, got, cfg)))
        return None


class EmptyPlan(Recording):
    """Implements plan_request but asks for nothing this time."""

    name = "empty_plan"

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        return {}

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_request", (seen, facts, got, cfg)))
        return None


class Ordered(Recording):
    """Several ops on one field: results come back in plan order, each after the ones before it."""

    name = "ordered"

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        return {
            "added": Add(Scope.RUN, "x", 2.0),
            "read": Get(Scope.RUN, "x"),
            "window": Push(Scope.RUN, "w", ("a", "b"), keep=3),
            "missing": Get(Scope.RUN, "never_written"),
        }

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_request", (seen, facts, got, cfg)))
        return None


class Fetcher(Recording):
    """Fetches a counter before the request, then reads the response with it."""

    name = "fetcher"

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        return {"count": Add(Scope.RUN, "requests")}

    def inspect_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("inspect_response", (seen, cfg)))
        return None

    def plan_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Plan:
        self.calls.append(("plan_response", (seen, cfg)))
        return {"after": Add(Scope.RUN, "responses", 5.0)}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_response", (seen, got, cfg)))
        return None


class Plain(Recording):
    """Reads the response without having fetched anything before the request."""

    name = "plain"

    def inspect_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("inspect_response", (seen, cfg)))
        return None

    def plan_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Plan:
        self.calls.append(("plan_response", (seen, cfg)))
        return {"after": Add(Scope.RUN, "responses")}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_response", (seen, got, cfg)))
        return None


class Boom(Exception):
    pass


class Faulty(Detector[DetectorConfig]):
    """Implements every hook, writes "<name>.req" / "<name>.resp", trips in every check; raises in `fails`."""

    Config = DetectorConfig

    def __init__(self, fails: str | None = None) -> None:
        self.fails = fails
        self.error = Boom(f"{self.name} failed in {fails}")
        self.got: dict[str, Results] = {}

    def _maybe(self, hook: str) -> None:
        if hook == self.fails:
            raise self.error

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        self._maybe("plan_request")
        return {"n": Add(Scope.RUN, "req")}

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self._maybe("check_request")
        self.got["check_request"] = got
        return self.verdict("request")

    def inspect_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Verdict | None:
        self._maybe("inspect_response")
        return self.verdict("inspect")

    def plan_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Plan:
        self._maybe("plan_response")
        return {"n": Add(Scope.RUN, "resp", 3.0)}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self._maybe("check_response")
        self.got["check_response"] = got
        return self.verdict("response")


class Broken(Faulty):
    name = "boom"


class Healthy(Faulty):
    name = "fine"


class TripConfig(DetectorConfig):
    advisory: bool = False


class Tripper(Detector[TripConfig]):
    """Trips in all three check hooks; the config says whether its verdicts are advisory."""

    name = "tripper"
    Config = TripConfig

    def _verdict(self, reason: str, cfg: TripConfig) -> Verdict:
        return Verdict(self.name, reason, {"hook": reason}, advisory=cfg.advisory)

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: TripConfig) -> Verdict | None:
        return self._verdict("check_request", cfg)

    def inspect_response(self, seen: ResponseSeen, cfg: TripConfig) -> Verdict | None:
        return self._verdict("inspect_response", cfg)

    def check_response(self, seen: ResponseSeen, got: Results, cfg: TripConfig) -> Verdict | None:
        return self._verdict("check_response", cfg)


class Quiet(Recording):
    name = "quiet"

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        return None

    def inspect_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Verdict | None:
        return None

    def check_response(self, seen: ResponseSeen, got: Results, cfg: DetectorConfig) -> Verdict | None:
        return None


# -- lineup -----------------------------------------------------------------------------------------


def names(armed: Sequence[Armed] | Sequence[Hook]) -> list[str]:
    return [a.name for a in armed]


def test_lineup_lists_each_detector_only_under_the_hooks_its_class_overrides() -> None:
    lineup = arm(ResponseOnly(), RequestOnly(), InspectOnly(), Fetcher())
    assert names(lineup.armed) == ["response_only", "request_only", "inspect_only", "fetcher"]
    assert names(lineup.plans_request) == ["request_only", "fetcher"]
    assert names(lineup.checks_request) == ["request_only"]
    assert names(lineup.inspects_response) == ["inspect_only", "fetcher"]
    assert names(lineup.plans_response) == ["response_only", "fetcher"]
    assert names(lineup.checks_response) == ["response_only", "fetcher"]


def test_lineup_counts_hooks_inherited_from_a_detector_subclass() -> None:
    lineup = arm(Alpha(), Beta())  # both inherit plan_request and check_request from Tally
    assert names(lineup.plans_request) == ["alpha", "beta"]
    assert names(lineup.checks_request) == ["alpha", "beta"]
    assert lineup.inspects_response == lineup.plans_response == lineup.checks_response == ()


def test_lineup_configs_map_names_to_the_armed_configs() -> None:
    warn = DetectorConfig(action=Action.WARN)
    stop = TripConfig(response=ResponseKind.STOP, advisory=True)
    lineup = arm((ResponseOnly(), warn), (Tripper(), stop))
    assert dict(lineup.configs) == {"response_only": warn, "tripper": stop}
    assert lineup.configs["tripper"] is stop
    assert [a.config for a in lineup.armed] == [warn, stop]
    assert NO_DETECTORS.armed == () and dict(NO_DETECTORS.configs) == {}


async def test_hooks_a_detector_does_not_override_are_never_called(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[tuple[str, str]] = []

    def spy(hook: str) -> Callable[..., Any]:
        def base_hook(self: Detector[Any], *args: Any) -> Any:
            called.append((self.name, hook))
            return {} if hook.startswith("plan") else None

        return base_hook

    for hook in HOOKS:
        monkeypatch.setattr(Detector, hook, spy(hook))
    detector = ResponseOnly()
    outcome = await cycle(no_faults(), arm(detector), MemoryState())
    assert called == []
    assert [name for name, _ in detector.calls] == ["plan_response", "check_response"]
    assert outcome.request == outcome.inspect == outcome.response == []


async def test_the_armed_config_is_the_one_every_hook_receives() -> None:
    config = DetectorConfig(action=Action.WARN, response=ResponseKind.STOP)
    fetcher = Fetcher()
    await cycle(no_faults(), arm((fetcher, config)), MemoryState())
    assert [args[-1] for _, args in fetcher.calls] == [config, config, config]
    assert all(args[-1] is config for _, args in fetcher.calls)


# -- state: namespaced ops, own results ------------------------------------------------------------


async def test_each_detector_writes_fields_under_its_own_name() -> None:
    state = MemoryState()
    await request_phase(no_faults(), arm(Alpha(), Beta()), state)
    assert await state.read_scope(Scope.RUN, RUN) == {
        "requests": 1.0,  # the guard's own op, unprefixed
        "alpha.hits": 1.0,
        "alpha.label": "alpha",
        "beta.hits": 10.0,
        "beta.label": "beta",
    }
    assert await state.read_scope(Scope.KEY, KEY) == {"alpha.hits": 1.0, "beta.hits": 10.0}


async def test_every_run_keys_its_state_with_the_same_name_strings() -> None:
    # A run's state holds the names, not copies of its own: 100k runs would otherwise each
    # carry some twenty key strings (a quarter of a run's memory).
    state, lineup, engine = MemoryState(), arm(Alpha(), Beta()), no_faults()
    for run in ("run-a", "run-b"):
        batch = engine.plan_request(lineup, request_seen(), 0)
        await state.execute(dataclasses.replace(IDS, run=run), batch.ops)
    first, second = [list(await state.read_scope(Scope.RUN, run)) for run in ("run-a", "run-b")]
    assert first == second == ["alpha.hits", "alpha.label", "beta.hits", "beta.label"]
    assert all(a is b for a, b in zip(first, second, strict=True))


def test_names_kept_per_detector_are_capped_and_names_past_the_cap_are_still_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_module, "MAX_NAMES", 3)
    armed = Armed(Alpha(), DetectorConfig())
    names = [armed.state_name(f"w.{i}") for i in range(10)]
    assert names == [f"alpha.w.{i}" for i in range(10)]
    assert armed.names == {"w.0": "alpha.w.0", "w.1": "alpha.w.1", "w.2": "alpha.w.2"}


async def test_detectors_using_the_same_local_field_do_not_see_each_others_values() -> None:
    state = MemoryState()
    alpha, beta = Alpha(), Beta()
    lineup = arm(alpha, beta)
    for _ in range(3):
        await request_phase(no_faults(), lineup, state)
    alpha_got = [args[2] for args in alpha.called("check_request")]
    beta_got = [args[2] for args in beta.called("check_request")]
    # Put answers with the previous value: each detector finds only its own label there.
    assert alpha_got == [
        {"count": 1.0, "label": None, "per_key": 1.0},
        {"count": 2.0, "label": "alpha", "per_key": 2.0},
        {"count": 3.0, "label": "alpha", "per_key": 3.0},
    ]
    assert beta_got == [
        {"count": 10.0, "label": None, "per_key": 10.0},
        {"count": 20.0, "label": "beta", "per_key": 20.0},
        {"count": 30.0, "label": "beta", "per_key": 30.0},
    ]


async def test_check_request_hands_each_detector_its_own_results_under_its_local_names() -> None:
    ordered, alpha, check_only, empty = Ordered(), Alpha(), CheckOnly(), EmptyPlan()
    lineup = arm(check_only, ordered, empty, alpha)
    findings, before = await request_phase(no_faults(), lineup, MemoryState())
    assert findings == []
    [(_, _, got, _)] = ordered.called("check_request")
    assert dict(got) == {"added": 2.0, "read": 2.0, "window": ("a", "b"), "missing": None}
    assert list(got) == ["added", "read", "window", "missing"]
    [(_, _, got, _)] = alpha.called("check_request")
    assert dict(got) == {"count": 1.0, "label": None, "per_key": 1.0}
    # Checking without planning, or with an empty plan: an empty mapping.
    [(_, _, got, _)] = check_only.called("check_request")
    assert dict(got) == {}
    [(_, _, got, _)] = empty.called("check_request")
    assert dict(got) == {}
    # Kept for the response phase: only what the planning detectors fetched.
    assert before == {
        "ordered": {"added": 2.0, "read": 2.0, "window": ("a", "b"), "missing": None},
        "alpha": {"count": 1.0, "label": None, "per_key": 1.0},
    }


async def test_check_request_passes_the_request_and_the_facts_through() -> None:
    check_only = CheckOnly()
    seen = request_seen(now=1234.5)
    await request_phase(no_faults(), arm(check_only), MemoryState(), seen)
    [(got_seen, facts, _, _)] = check_only.called("check_request")
    assert got_seen is seen
    assert facts is FACTS


async def test_no_detectors_add_no_ops_and_find_nothing() -> None:
    state = MemoryState()
    findings, before = await request_phase(no_faults(), NO_DETECTORS, state)
    assert (findings, before) == ([], {})
    assert no_faults().plan_request(NO_DETECTORS, request_seen(), 2).ops == []
    assert await state.read_scope(Scope.RUN, RUN) == {"requests": 1.0}


async def test_response_results_go_to_the_detector_that_planned_them() -> None:
    state = MemoryState()
    fetcher, plain, response_only = Fetcher(), Plain(), ResponseOnly()
    await cycle(no_faults(), arm(fetcher, plain, response_only), state)
    [(_, got, _)] = fetcher.called("check_response")
    assert dict(got) == {"after": 5.0}
    [(_, got, _)] = plain.called("check_response")
    assert dict(got) == {"after": 1.0}
    [(_, got, _)] = response_only.called("check_response")
    assert dict(got) == {"n": 1.0}
    fields = await state.read_scope(Scope.RUN, RUN)
    assert fields["responses"] == 1.0  # the guard's
    assert fields["fetcher.responses"] == 5.0
    assert fields["plain.responses"] == 1.0
    assert fields["response_only.responses"] == 1.0


# -- faults -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("hook", HOOKS)
async def test_a_detector_raising_in_any_hook_is_reported_and_the_others_still_find(hook: str) -> None:
    faults = Faults()
    state = MemoryState()
    boom, fine = Broken(fails=hook), Healthy()
    outcome = await cycle(Engine(faults), arm(boom, fine), state)

    assert len(faults.got) == 1
    detector, where, exc = faults.got[0]
    assert (detector, where) == ("boom", hook)
    assert exc is boom.error

    found = {
        "check_request": [(f.detector, f.verdict.reason) for f in outcome.request],
        "inspect_response": [(f.detector, f.verdict.reason) for f in outcome.inspect],
        "check_response": [(f.detector, f.verdict.reason) for f in outcome.response],
    }
    expected = {"check_request": "request", "inspect_response": "inspect", "check_response": "response"}
    for phase, reason in expected.items():
        assert ("fine", reason) in found[phase]
        if phase == hook:
            assert found[phase] == [("fine", reason)]
    # The detector after the faulty one still gets its own results, not shifted ones.
    assert dict(fine.got["check_request"]) == {"n": 1.0}
    assert dict(fine.got["check_response"]) == {"n": 3.0}

    fields = await state.read_scope(Scope.RUN, RUN)
    assert fields["fine.req"] == 1.0 and fields["fine.resp"] == 3.0
    assert ("boom.req" in fields) is (hook != "plan_request")
    assert ("boom.resp" in fields) is (hook != "plan_response")
    if hook == "plan_request":
        assert "boom" not in outcome.before
        assert "boom" not in outcome.views.own  # its response hooks see the shared record


@pytest.mark.parametrize(("plan_hook", "check_phase"), [("plan_request", "request"), ("plan_response", "response")])
async def test_a_detector_whose_plan_raised_is_not_checked_in_that_phase(plan_hook: str, check_phase: str) -> None:
    boom, fine = Broken(fails=plan_hook), Healthy()
    outcome = await cycle(Engine(Faults()), arm(boom, fine), MemoryState())

    findings: list[Finding] = getattr(outcome, check_phase)
    assert [f.detector for f in findings] == ["fine"]
    assert ("check_" + check_phase) not in boom.got


class Malformed(Recording):
    """Plans something that is not a state op."""

    name = "malformed"

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        return {"ok": Add(Scope.RUN, "fine"), "bad": "not an op"}  # type: ignore[dict-item]

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        return self.verdict("should not be checked")


async def test_a_plan_that_is_not_ops_is_reported_and_adds_no_ops() -> None:
    faults = Faults()
    fine = Healthy()
    state = MemoryState()
    findings, before = await request_phase(Engine(faults), arm(Malformed(), fine), state)

    assert [(name, hook) for name, hook, _ in faults.got] == [("malformed", "plan_request")]
    assert [f.detector for f in findings] == ["fine"]
    assert "malformed" not in before
    assert dict(before["fine"]) == {"n": 1.0}
    # Not even the plan's well-formed op ran: a plan goes in whole or not at all.
    assert not [name for name in await state.read_scope(Scope.RUN, RUN) if name.startswith("malformed.")]


class Garbled(Detector[DetectorConfig]):
    """Warns only, and returns something that is not a verdict from every check hook."""

    name = "garbled"
    Config = DetectorConfig

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        return "tripped"  # type: ignore[return-value]

    def inspect_response(self, seen: ResponseSeen, cfg: DetectorConfig) -> Verdict | None:
        return "tripped"  # type: ignore[return-value]

    def check_response(self, seen: ResponseSeen, got: Results, cfg: DetectorConfig) -> Verdict | None:
        return "tripped"  # type: ignore[return-value]


async def test_a_check_that_returns_no_verdict_is_reported_and_makes_no_finding() -> None:
    faults = Faults()
    warn_only = (Garbled(), DetectorConfig(action=Action.WARN))  # a warning is never read for blocking
    outcome = await cycle(Engine(faults), arm(warn_only, Healthy()), MemoryState())

    assert [(name, hook) for name, hook, _ in faults.got] == [
        ("garbled", "check_request"),
        ("garbled", "inspect_response"),
        ("garbled", "check_response"),
    ]
    assert all(isinstance(exc, TypeError) for _, _, exc in faults.got)
    for findings in (outcome.request, outcome.inspect, outcome.response):
        assert [f.detector for f in findings] == ["fine"]


# -- views ------------------------------------------------------------------------------------------


async def test_a_detector_that_fetched_before_the_request_sees_it_in_every_response_hook() -> None:
    fetcher = Fetcher()
    outcome = await cycle(no_faults(), arm(fetcher), MemoryState())
    assert outcome.before == {"fetcher": {"count": 1.0}}
    views = [args[0] for name, args in fetcher.calls if name != "check_request"]
    assert len(views) == 3  # inspect_response, plan_response, check_response
    for view in views:
        assert isinstance(view, ResponseSeen)
        assert dict(view.before) == {"count": 1.0}
        # Everything else is the response as the guard saw it.
        assert dataclasses.replace(view, before={}) == outcome.seen
    assert dict(outcome.seen.before) == {}  # the shared record is left alone


async def test_a_detector_without_request_results_gets_the_very_response_object() -> None:
    plain, fetcher = Plain(), Fetcher()
    outcome = await cycle(no_faults(), arm(fetcher, plain), MemoryState())
    views = [args[0] for _, args in plain.calls]
    assert len(views) == 3
    assert all(view is outcome.seen for view in views)


def test_views_share_the_response_with_detectors_that_fetched_nothing() -> None:
    seen = response_seen()
    views = Views.of(seen, {"fetched": {"k": 2.0}, "empty": {}})
    assert views.seen is seen
    assert set(views.own) == {"fetched"}  # the rest (an empty fetch, no fetch) share `seen`
    own = views.own["fetched"]
    assert dict(own.before) == {"k": 2.0}
    assert dataclasses.replace(own, before={}) == seen


# -- findings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "advisory", "shadow", "blocking"),
    [
        (Action.BLOCK, False, False, True),
        (Action.WARN, False, False, False),
        (Action.BLOCK, True, False, False),
        (Action.BLOCK, False, True, False),
        (Action.WARN, True, True, False),
    ],
)
async def test_a_finding_blocks_only_for_a_block_action_a_non_advisory_verdict_and_shadow_off(
    action: Action, advisory: bool, shadow: bool, blocking: bool
) -> None:
    config = TripConfig(action=action, advisory=advisory)
    outcome = await cycle(Engine(Faults(), shadow=shadow), arm((Tripper(), config)), MemoryState())
    findings = [*outcome.request, *outcome.inspect, *outcome.response]
    assert [f.verdict.reason for f in findings] == ["check_request", "inspect_response", "check_response"]
    assert [f.blocking for f in findings] == [blocking] * 3
    assert all(f.verdict.advisory is advisory for f in findings)


@pytest.mark.parametrize("kind", list(ResponseKind))
async def test_a_finding_answers_with_the_response_its_config_names(kind: ResponseKind) -> None:
    outcome = await cycle(no_faults(), arm((Tripper(), TripConfig(response=kind))), MemoryState())
    findings = [*outcome.request, *outcome.inspect, *outcome.response]
    assert len(findings) == 3
    assert all(f.response is kind for f in findings)
    assert all(f.detector == "tripper" for f in findings)


async def test_a_check_that_returns_nothing_makes_no_finding() -> None:
    outcome = await cycle(no_faults(), arm(Quiet(), Tripper()), MemoryState())
    for findings in (outcome.request, outcome.inspect, outcome.response):
        assert [f.detector for f in findings] == ["tripper"]
        assert findings[0].verdict.evidence == {"hook": findings[0].verdict.reason}


# -- request shape ------------------------------------------------------------------------------------


class ResultsReader(Recording):
    """Reads only the tool results a request sends back (`Detector.reads_results`)."""

    name = "results_reader"
    reads_results = True

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        self.calls.append(("plan_request", (seen,)))
        return {"seen": Push(Scope.RUN, "seen", tuple(r.content for r in seen.request.new_results), keep=4)}

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        self.calls.append(("check_request", (seen, got)))
        return None


async def test_a_request_without_tool_results_skips_the_detectors_that_read_only_them() -> None:
    reader, check_only = ResultsReader(), CheckOnly()
    lineup = arm(reader, check_only)
    await request_phase(no_faults(), lineup, MemoryState())  # REQUEST sends back no result
    assert reader.calls == []
    assert len(check_only.called("check_request")) == 1  # the others run as before
    with_result = dataclasses.replace(REQUEST, new_results=(ToolResult("search", "call-1", "found it"),))
    seen = RequestSeen(RUN, KEY, 1000.0, with_result, 128_000, "body-hash")
    await request_phase(no_faults(), lineup, MemoryState(), seen)
    [(got_seen,)] = reader.called("plan_request")
    [(_, got)] = reader.called("check_request")
    assert got_seen is seen and dict(got) == {"seen": ("found it",)}


@pytest.mark.parametrize("detector", [d for d in default_detectors() if d.reads_results], ids=lambda d: d.name)
def test_a_detector_said_to_read_only_results_plans_and_finds_nothing_without_them(detector: Detector[Any]) -> None:
    """The skip changes nothing: with no result sent back, such a detector's plan is empty and its check
    finds nothing, whatever the run's facts (its flag would be wrong otherwise)."""
    cfg = detector.Config()
    seen = request_seen()
    assert not seen.request.new_results
    assert detector.plan_request(seen, cfg) == {}
    late = dataclasses.replace(FACTS, request_index=50, usd=5.0, input_tokens=10**6)
    assert detector.check_request(seen, late, {}, cfg) is None
    assert {"novelty", "non_progress", "repeat_call"} <= {d.name for d in default_detectors() if d.reads_results}
