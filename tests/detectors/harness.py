"""Builders for request and response records, and a simulator that sends them through the real guard.

`RunSimulator.step()` takes one request and its response through
`runguard.proxy.guard.guard.Guard` as the HTTP handler does: `admit`; if the
request is let through, `response_seen`, `inspect` (a response that is not
streamed) and `complete`; if it is answered locally, `complete` with no
response. The guard is the proxy's own (`Rig`): the in-memory state backend,
the `Policy` built from settings (the test's detector settings as
`guard.detectors`), the shipped pricing and context-window tables extended by
`tests/detectors/tables/` (as a user's `pricing_file` and `models_file` extend
them), a list for the records it emits, and a clock the test moves. Each step
returns the trips the guard recorded in each phase, so a test can say "trips
exactly at step N, not at N-1".

The simulator adds no phase, counter, breaker or state op of its own: what a
detector sees and what becomes of its verdict (a trip record, a breaker that
answers the run's next requests) is the guard's doing.

`agent_loop()` scripts the usual agent loop: response i asks for turn i's tool
calls, and request i+1 sends back turn i's results.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.detectors.support.base import Detector, DetectorConfig, RunFacts
from runguard.proxy.core.events import (
    AgentIdentity,
    Api,
    Handoff,
    HandoffKind,
    OutputSchema,
    RequestInfo,
    ResponseInfo,
    ToolCall,
    ToolResult,
    Usage,
    digest,
)
from runguard.proxy.core.ops import Scope
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.guard import Guard
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.guard.observer import NullObserver
from runguard.proxy.guard.ticket import Ticket, scope_ids
from runguard.proxy.providers.answers import Synthetic
from runguard.proxy.providers.base import Adapter
from runguard.proxy.providers.common.handoffs import handoffs_of
from runguard.proxy.providers.registry import adapter_for
from runguard.proxy.runs import tenants
from runguard.proxy.state.base import ScopeIds, ScopeTtls
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.records import TripRecord
from tests.support.proxy import ListSink

MODEL = "test-model"  # priced and sized by tables/: $1 per million output tokens, input free; 128k window
SMALL_WINDOW_MODEL = "test-model-1k"  # the same price, a 1,000-token window
TABLES = Path(__file__).parent / "tables"
START = 1_700_000_000.0
LATENCY = 1.0  # seconds each response takes upstream
NO_RESPONSE_STATUS = 502  # what the client gets when nothing came back from upstream (a connect error)

# -- builders -------------------------------------------------------------------------------------


def as_json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def call(name: str, args: Any = None, call_id: str | None = None, index: int = 0) -> ToolCall:
    return ToolCall(name, as_json({} if args is None else args), call_id, index)


def result(name: str | None, content: Any, call_id: str | None = None) -> ToolResult:
    return ToolResult(name, call_id, as_json(content))


def agent(name: str | None = "agent", fingerprint: str = "f" * 16) -> AgentIdentity:
    return AgentIdentity(name, fingerprint)


def request(
    *,
    agent_name: str | None = "agent",
    prior_calls: Sequence[ToolCall] = (),
    new_results: Sequence[ToolResult] = (),
    message_count: int = 1,
    assistant_turns: int = 0,
    history_chars: int = 100,
    estimated_input_tokens: int = 100,
    output_schema: dict[str, Any] | None = None,
    model: str = MODEL,
    user_text: str | None = None,
    question: str | None = None,
) -> RequestInfo:
    """A Chat Completions request as the adapter reads it (not streamed)."""
    return RequestInfo(
        api=Api.CHAT,
        model=model,
        stream=False,
        agent=agent(agent_name),
        message_count=message_count,
        history_chars=history_chars,
        estimated_input_tokens=estimated_input_tokens,
        prior_calls=tuple(prior_calls),
        new_results=tuple(new_results),
        new_user_turn=not new_results,
        new_user_hash=digest(user_text) if user_text else None,
        new_user_texts=(user_text,) if user_text else (),
        question_hash=digest(question) if question else None,
        assistant_turns=assistant_turns,
        output_schema=OutputSchema(output_schema) if output_schema is not None else None,
    )


def response(
    *,
    text: str = "",
    tool_calls: Sequence[ToolCall] = (),
    handoffs: Sequence[Handoff] = (),
    input_tokens: int = 100,
    output_tokens: int = 10,
    usage: bool = True,
    error: str | None = None,
    complete: bool = True,
) -> ResponseInfo:
    """A response as the adapter reads it. At the test model's price it costs $1 per million output tokens."""
    return ResponseInfo(
        text=text,
        tool_calls=tuple(tool_calls),
        handoffs=tuple(handoffs),
        finish_reason="tool_calls" if tool_calls else "stop",
        usage=Usage(input_tokens, output_tokens) if usage else None,
        error=error,
        complete=complete,
    )


def costing(usd: float, **fields: Any) -> ResponseInfo:
    """A response of the test model whose usage costs `usd` by the pricing table (output tokens at $1 a million;
    a cent is 10,000 tokens, so the cost is exact)."""
    return response(output_tokens=round(usd * 1_000_000), **fields)


def handoff(target: str, kind: HandoffKind = HandoffKind.TRANSFER, call_id: str | None = None) -> Handoff:
    tool = "delegate_task_to_member" if kind is HandoffKind.DELEGATE else f"transfer_to_{target}"
    return Handoff(tool, target, kind, call_id)


@dataclass(frozen=True)
class Step:
    """One request and what came back (`response=None`: nothing came back, e.g. a connect error)."""

    request: RequestInfo
    response: ResponseInfo | None = field(default_factory=response)
    status: int | None = 200
    advance: float = 1.0  # seconds the clock moves before this request
    body: str | None = None  # the request body as sent (its digest is the body hash); default: unique per step


Turn = Sequence[tuple[str, Any, Any]]  # (tool, arguments, result) per call of one assistant turn


def agent_loop(
    turns: Sequence[Turn], *, ids: bool = True, agent_name: str = "agent", final: str = "done"
) -> list[Step]:
    """A loop of len(turns) + 1 steps: response i makes turn i's calls; request i+1 returns their results.

    `ids=False` scripts Gemini: no call ids, results matched by name and order.
    """
    steps = []
    prior: list[ToolCall] = []
    results: list[ToolResult] = []
    for i in range(len(turns) + 1):
        req = request(
            agent_name=agent_name,
            prior_calls=prior,
            new_results=results,
            message_count=1 + 2 * i,
            assistant_turns=i,
        )
        if i == len(turns):
            steps.append(Step(req, response(text=final)))
            break
        prior = [call(name, args, f"c{i}_{j}" if ids else None, j) for j, (name, args, _) in enumerate(turns[i])]
        results = [result(c.name, content, c.call_id) for c, (_, _, content) in zip(prior, turns[i], strict=True)]
        steps.append(Step(req, response(tool_calls=prior)))
    return steps


def with_handoffs(steps: Sequence[Step]) -> list[Step]:
    """`steps` with each response's handoffs read from its calls, as the adapters read them."""
    return [
        dataclasses.replace(s, response=dataclasses.replace(s.response, handoffs=handoffs_of(s.response.tool_calls)))
        if s.response is not None
        else s
        for s in steps
    ]


def delegations(count: int, *, also: tuple[str, Any, Any] | None = None) -> list[Step]:
    """An Agno leader handing `count` different tasks to its analyst, one a turn (each turn with the
    call `also` besides, if given), as `agent_loop` steps with their handoffs."""
    turns: list[Turn] = []
    for i in range(count):
        task = ("delegate_task_to_member", {"member_id": "analyst", "task": f"answer question {i}"}, f"answer {i}")
        turns.append([task, also] if also is not None else [task])
    return with_handoffs(agent_loop(turns, agent_name="leader"))


def review_transfers(rounds: int, *, adk: bool = True) -> list[Turn]:
    """A writer/editor review loop's handoff turns, each acknowledged alike by the framework:
    ADK's `transfer_to_agent` (`{"result": null}`), else openai-agents' `transfer_to_<agent>`."""
    turns: list[Turn] = []
    for _ in range(rounds):
        for target, name in (("editor", "Editor"), ("writer", "Writer")):
            if adk:
                turns.append([("transfer_to_agent", {"agent_name": target}, {"result": None})])
            else:
                turns.append([(f"transfer_to_{target}", {}, {"assistant": name})])
    return turns


# -- the guard under test -------------------------------------------------------------------------


@functools.cache
def _tables(pricing_file: str | None, models_file: str | None) -> ModelTables:
    """The model tables, read once per test process: parsing the shipped YAML takes 20-50 ms, and every test
    builds a guard. Sharing them is safe here: the guard changes them only when a response names the model
    that served it (`ModelTables.served`), which no response these builders make does."""
    return ModelTables(pricing_file, models_file)


class Clock:
    """The time the guard and its state read: it moves only when a test moves it."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Watch(NullObserver):
    """Observes nothing but what must not happen in a detector test: a detector that raised (the guard
    logs it and goes on without it, so a test of its silence would pass) and a failing state."""

    def __init__(self) -> None:
        self.faults: list[tuple[str, str]] = []
        self.state_errors = 0

    def detector_fault(self, detector: str, hook: str) -> None:
        self.faults.append((detector, hook))

    def state_error(self) -> None:
        self.state_errors += 1


Configured = Detector[Any] | tuple[Detector[Any], DetectorConfig]


@dataclass
class Rig:
    """One proxy's guard and what it is built from; runs simulated on one rig share its state and clock."""

    guard: Guard
    state: MemoryState
    clock: Clock
    records: ListSink
    watch: Watch
    adapter: Adapter

    @classmethod
    def of(cls, detectors: Sequence[Configured], **runs: float) -> Rig:
        """A guard over in-memory state running the registry's detectors as the proxy does, with settings
        that turn off all but `detectors` (each with its settings, or its defaults). A detector is named
        by its instance here: the registry's own runs, so one taken out of the registry runs in no test.
        `runs`: settings of `runs` (`idle_seconds`, `remember_seconds`: how long the state keeps a run)."""
        chosen = [d if isinstance(d, tuple) else (d, d.Config()) for d in detectors]
        registered = default_detectors()
        configured: dict[str, dict[str, Any]] = {d.name: {"action": "off"} for d in registered}
        configured.update({d.name: config.model_dump(mode="json") for d, config in chosen})
        settings = Settings.model_validate(
            {
                "runs": runs,
                "store": {"database_url": ""},
                "guard": {"detectors": configured},
                "pricing_file": str(TABLES / "pricing.yaml"),
                "models_file": str(TABLES / "models.yaml"),
            }
        )
        clock = Clock()
        ttls = ScopeTtls.of_runs(settings.runs.idle_seconds, settings.runs.remember_seconds)
        state = MemoryState(ttls, settings.runs.max_runs, clock=clock)
        policy = Policy(registered, settings.guard)
        tables = _tables(settings.pricing_file, settings.models_file)
        records, watch = ListSink(), Watch()
        guard = Guard(settings, state, policy, tables, records, watch, clock)
        adapter = adapter_for(Api.CHAT)
        assert adapter is not None
        return cls(guard, state, clock, records, watch, adapter)

    def no_faults(self) -> None:
        assert not self.watch.faults, f"detector faults: {self.watch.faults}"
        assert not self.watch.state_errors, "the state backend failed"


# -- the simulator --------------------------------------------------------------------------------


@dataclass
class StepResult:
    """What the guard did with one request: its ticket, and the trips it recorded in each phase."""

    ticket: Ticket
    request: list[TripRecord]  # admission: the request checks
    inspect: list[TripRecord] = field(default_factory=list)  # the response, before the client gets it
    response: list[TripRecord] = field(default_factory=list)  # after the response: the response checks
    replacement: Synthetic | None = None  # what the client got instead of the response, if inspection stopped it

    @property
    def facts(self) -> RunFacts:
        assert self.ticket.facts is not None, "the state did not answer"
        return self.ticket.facts

    @property
    def answer(self) -> Synthetic | None:
        """The guard's own answer to the request, had it stopped it before it went upstream."""
        return self.ticket.answer

    @property
    def blocked_by(self) -> str | None:
        """The detector whose verdict (or open breaker) stopped the request, or its response."""
        return self.ticket.blocked_by

    @property
    def findings(self) -> list[TripRecord]:
        return [*self.request, *self.inspect, *self.response]

    def tripped(self, detector: str | None = None) -> bool:
        return any(detector is None or f.detector == detector for f in self.findings)

    def one(self, detector: str) -> TripRecord:
        found = [f for f in self.findings if f.detector == detector]
        assert len(found) == 1, f"expected one {detector} trip, got {found}"
        return found[0]


@dataclass
class Pending:
    """A request admitted and still in flight (or answered locally: then already complete)."""

    step: Step
    outcome: StepResult

    @property
    def upstream(self) -> bool:
        """Whether the request went upstream (its response is still to come)."""
        return self.outcome.answer is None


class RunSimulator:
    """Sends scripted steps of one run (`X-Run-Id: run_id`, one API key) through a real guard."""

    def __init__(self, detectors: Sequence[Configured] | Rig, *, run_id: str = "run-1", key: str = "key-1") -> None:
        self.rig = detectors if isinstance(detectors, Rig) else Rig.of(detectors)
        self.run_id = run_id
        self.key = key
        self.count = 0

    def another_run(self, run_id: str) -> RunSimulator:
        """Another run of the same API key through the same guard."""
        return RunSimulator(self.rig, run_id=run_id, key=self.key)

    @property
    def state(self) -> MemoryState:
        return self.rig.state

    @property
    def clock(self) -> Clock:
        return self.rig.clock

    @property
    def state_id(self) -> str:
        """The id the run's state is kept under (its tenant's: `tenants`)."""
        return tenants.state_id(self.rig.guard.tenants.of(self.key), self.run_id)

    def ids(self, model: str = MODEL) -> ScopeIds:
        """The scopes a request of this run for `model` acts on now."""
        return scope_ids(self.state_id, self.key, model, self.clock.now)

    async def admit(self, step: Step) -> Pending:
        """The request phase; a request the guard answers locally is complete at once (as the handler
        completes it), one it lets through stays in flight until `complete()`."""
        self.count += 1
        self.clock.now += step.advance
        body = step.body if step.body is not None else f"{self.run_id}:{self.count}"
        guard = self.rig.guard
        ticket = await guard.admit(
            self.rig.adapter, step.request, body=body.encode(), key_hash=self.key, header_run=self.run_id
        )
        outcome = StepResult(ticket, list(ticket.trips))
        if ticket.answer is not None:
            await guard.complete(ticket, None, client_status=ticket.answer.status)
        self.rig.no_faults()
        return Pending(step, outcome)

    async def complete(self, pending: Pending) -> StepResult:
        """The response phase: what came back, seen, inspected (not streamed) and completed by the guard."""
        step, outcome = pending.step, pending.outcome
        if not pending.upstream:
            return outcome
        guard, ticket = self.rig.guard, outcome.ticket
        if step.response is None:
            if step.status is not None:
                raise ValueError("a step without a response must have status None")
            failure = ResponseInfo(error="no response", complete=False)
            seen = guard.response_seen(ticket, failure, None, LATENCY)
            await guard.complete(ticket, seen, client_status=NO_RESPONSE_STATUS, error="UpstreamError")
        else:
            seen = guard.response_seen(ticket, step.response, step.status, LATENCY)
            if not ticket.request.stream:
                outcome.replacement = guard.inspect(ticket, seen)
            client_status = outcome.replacement.status if outcome.replacement is not None else step.status
            await guard.complete(ticket, seen, client_status=client_status)
        # The guard records the inspection's findings first, then the response checks' (`Guard.complete`).
        after = ticket.trips[len(outcome.request) :]
        inspected = len(ticket.inspected or ())
        outcome.inspect, outcome.response = after[:inspected], after[inspected:]
        self.rig.no_faults()
        return outcome

    async def step(self, step: Step) -> StepResult:
        return await self.complete(await self.admit(step))

    async def run(self, steps: Sequence[Step]) -> list[StepResult]:
        return [await self.step(s) for s in steps]

    async def run_fields(self, scope: Scope = Scope.RUN) -> dict[str, Any]:
        """The run's state in `scope` (the run's own, or its trace), as stored."""
        return await self.state.read_scope(scope, self.state_id)

    async def run_state_bytes(self) -> int:
        """Size of the run's whole state as stored (field names and values)."""
        size = 0
        for name, value in (await self.run_fields()).items():
            size += len(name)
            size += sum(len(v) for v in value) if isinstance(value, tuple) else len(str(value))
        return size


def first_trip(results: Sequence[StepResult], detector: str | None = None) -> int | None:
    """1-based number of the first step with a trip (of `detector`), or None."""
    return next((i + 1 for i, r in enumerate(results) if r.tripped(detector)), None)


# -- evidence ---------------------------------------------------------------------------------------

_HEX = set("0123456789abcdef")


def _shown_calls(value: Any) -> None:
    assert isinstance(value, list) and value, "calls and batch are non-empty lists"
    for entry in value:
        assert isinstance(entry["tool"], str) and entry["tool"]
        assert set(entry) <= {"tool", "args_digest", "result_digest", "request_seq"}, entry
        for key in ("args_digest", "result_digest"):
            assert key not in entry or (entry[key] and set(entry[key]) <= _HEX), entry
        assert "request_seq" not in entry or (isinstance(entry["request_seq"], int) and entry["request_seq"] > 0)


def shows(trip: TripRecord, *keys: str) -> dict[str, Any]:
    """The trip's evidence, checked against the documented shape (docs/detectors.md, "Evidence"), with
    each of `keys` present; it also passes as JSON (the store writes it so)."""
    evidence = dict(trip.evidence)
    assert evidence["summary"] == trip.reason
    for key in ("calls", "batch"):
        if key in evidence:
            _shown_calls(evidence[key])
    if "agents" in evidence:
        assert evidence["agents"] and all(isinstance(a, str) and a for a in evidence["agents"])
    if "series" in evidence:
        assert evidence["series"] and all(set(p) == {"x", "y"} for p in evidence["series"])
        assert all(isinstance(v, int | float) for p in evidence["series"] for v in p.values())
    for key in ("value", "limit"):
        assert key not in evidence or isinstance(evidence[key], int | float), key
    missing = [key for key in keys if key not in evidence]
    assert not missing, f"{trip.detector}'s evidence lacks {missing}"
    assert json.loads(json.dumps(evidence)) is not None
    return evidence


def declaring(steps: Sequence[Step], *tools: str) -> list[Step]:
    """`steps` whose requests declare `tools` (the agent's tool list, as the adapters read it)."""
    return [dataclasses.replace(s, request=dataclasses.replace(s.request, tool_names=tools)) for s in steps]
