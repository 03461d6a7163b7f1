"""Builders for request/response records and a simulator that runs detectors exactly like the guard.

`RunSimulator.step()` runs one request and its response through the same
sequence as `runguard.proxy.guard.guard.Guard`: one state batch of the guard's own
`request_ops` plus every detector's request plan, `facts_from`, the request
checks; then `inspect_response`; then one batch of `response_ops` plus the
response plans, and the response checks. Each step returns what each phase
found, so a test can say "trips exactly at step N, not at N-1".

`agent_loop()` scripts the usual agent loop: response i asks for turn i's tool
calls, and request i+1 sends back turn i's results.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from runguard.detectors.base import Detector, DetectorConfig, RequestSeen, ResponseSeen, Results, RunFacts
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
from runguard.proxy.guard import accounting
from runguard.proxy.guard.engine import Armed, Engine, Finding, Lineup, Views
from runguard.proxy.providers.common.handoffs import handoffs_of
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState

MODEL = "test-model"

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
    return ResponseInfo(
        text=text,
        tool_calls=tuple(tool_calls),
        handoffs=tuple(handoffs),
        finish_reason="tool_calls" if tool_calls else "stop",
        usage=Usage(input_tokens, output_tokens) if usage else None,
        error=error,
        complete=complete,
    )


def handoff(target: str, kind: HandoffKind = HandoffKind.TRANSFER, call_id: str | None = None) -> Handoff:
    tool = "delegate_task_to_member" if kind is HandoffKind.DELEGATE else f"transfer_to_{target}"
    return Handoff(tool, target, kind, call_id)


@dataclass(frozen=True)
class Step:
    """One request and what came back (`response=None`: nothing came back, e.g. a connect error)."""

    request: RequestInfo
    response: ResponseInfo | None = field(default_factory=response)
    status: int | None = 200
    usd: float = 0.0
    advance: float = 1.0  # seconds the clock moves before this request
    body_hash: str | None = None  # default: unique per step
    context_window: int = 128_000


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


# -- the simulator --------------------------------------------------------------------------------


def _with_usage(info: ResponseInfo, step: Step) -> ResponseInfo:
    """As the guard does: a successful response without usage gets an estimate, never zero."""
    if info.usage is not None or step.status is None or step.status >= 300:
        return info
    out_chars = len(info.text) + sum(len(c.arguments) + len(c.name) for c in info.tool_calls)
    usage = Usage(step.request.estimated_input_tokens, math.ceil(out_chars / 4), estimated=True)
    return dataclasses.replace(info, usage=usage)


@dataclass
class StepResult:
    facts: RunFacts
    request: list[Finding]
    inspect: list[Finding] = field(default_factory=list)
    response: list[Finding] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [*self.request, *self.inspect, *self.response]

    def tripped(self, detector: str | None = None) -> bool:
        return any(detector is None or f.detector == detector for f in self.findings)

    def one(self, detector: str) -> Finding:
        found = [f for f in self.findings if f.detector == detector]
        assert len(found) == 1, f"expected one {detector} finding, got {found}"
        return found[0]


@dataclass
class Pending:
    """A request admitted and still in flight."""

    step: Step
    ids: ScopeIds
    outcome: StepResult
    before: dict[str, Results]


class RunSimulator:
    """Runs detectors over scripted steps of one run, through the engine and the in-memory state."""

    def __init__(
        self,
        detectors: Sequence[Detector[Any] | tuple[Detector[Any], DetectorConfig]],
        *,
        run_id: str = "run-1",
        key: str = "key-1",
        start: float = 1_700_000_000.0,
        state: MemoryState | None = None,
    ) -> None:
        self.lineup = Lineup.of(Armed(*d) if isinstance(d, tuple) else Armed(d, d.Config()) for d in detectors)
        self.state = state if state is not None else MemoryState()
        self.engine = Engine(self._fault)
        self.run_id = run_id
        self.key = key
        self.now = start
        self.count = 0
        self.faults: list[tuple[str, str, BaseException]] = []

    def _fault(self, detector: str, hook: str, exc: BaseException) -> None:
        self.faults.append((detector, hook, exc))

    def ids(self, model: str) -> ScopeIds:
        return ScopeIds(self.run_id, self.key, f"{self.key}|{model}", f"{self.key}|day")

    async def admit(self, step: Step) -> Pending:
        """The request phase only: the request stays in flight until `complete()`."""
        self.count += 1
        self.now += step.advance
        ids = self.ids(step.request.model)
        body_hash = step.body_hash if step.body_hash is not None else digest(f"{self.run_id}:{self.count}")
        seen = RequestSeen(self.run_id, self.key, self.now, step.request, step.context_window, body_hash)
        batch = self.engine.plan_request(self.lineup, seen, accounting.REQUEST_OPS)
        results = await self.state.execute(ids, [*accounting.request_ops(self.now, body_hash), *batch.ops])
        facts, _ = accounting.facts_from(results)
        findings, before = self.engine.check_request(self.lineup, batch, results, seen, facts)
        self._no_faults()
        return Pending(step, ids, StepResult(facts, findings), before)

    async def complete(self, pending: Pending) -> StepResult:
        """The response phase: inspect, then one batch of the guard's response ops and the response plans."""
        step, outcome = pending.step, pending.outcome
        if step.response is None and step.status is not None:
            raise ValueError("a step without a response must have status None")
        info = step.response if step.response is not None else ResponseInfo(error="no response", complete=False)
        info = _with_usage(info, step)
        seen = ResponseSeen(
            self.run_id, self.key, self.now, step.request, info, outcome.facts, step.status, step.usd, 1.0
        )
        views = Views.of(seen, pending.before)
        outcome.inspect = self.engine.inspect_response(self.lineup, views)
        base = accounting.response_ops(info.usage, step.usd)
        batch = self.engine.plan_response(self.lineup, views, len(base))
        results = await self.state.execute(pending.ids, [*base, *batch.ops])
        outcome.response = self.engine.check_response(self.lineup, batch, results, views)
        self._no_faults()
        return outcome

    async def step(self, step: Step) -> StepResult:
        return await self.complete(await self.admit(step))

    def _no_faults(self) -> None:
        assert not self.faults, f"detector faults: {self.faults}"

    async def run(self, steps: Sequence[Step]) -> list[StepResult]:
        return [await self.step(s) for s in steps]

    async def run_state_bytes(self) -> int:
        """Size of the run's whole state as stored (field names and values)."""
        fields = await self.state.read_scope(Scope.RUN, self.run_id)
        size = 0
        for name, value in fields.items():
            size += len(name)
            size += sum(len(v) for v in value) if isinstance(value, tuple) else len(str(value))
        return size


def first_trip(results: Sequence[StepResult], detector: str | None = None) -> int | None:
    """1-based number of the first step with a finding (of `detector`), or None."""
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


def shows(finding: Finding, *keys: str) -> dict[str, Any]:
    """The finding's evidence, checked against the documented shape (docs/detectors.md, "Evidence"), with
    each of `keys` present; it also passes as JSON (the store writes it so)."""
    evidence = dict(finding.verdict.evidence)
    assert evidence["summary"] == finding.verdict.reason
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
    assert not missing, f"{finding.detector}'s evidence lacks {missing}"
    assert json.loads(json.dumps(evidence)) is not None
    return evidence
