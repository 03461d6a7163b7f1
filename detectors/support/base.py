"""What a detector is, what it sees, and what it says.

A detector is a small class with a unique `name`, a pydantic `Config` whose
field descriptions are its documentation, and up to five pure hooks. It holds
no state and does no I/O: run state lives behind `runguard.proxy.core.ops`.

For each request the guard calls, for every enabled detector:

1. `plan_request(seen, cfg)`  -> ops to run before forwarding (one batch for all
   detectors and the guard's own counters, so the run's facts are not known yet)
2. `check_request(seen, facts, got, cfg)` -> a verdict, or None; a blocking verdict
   stops the request
3. `inspect_response(seen, cfg)` -> a verdict from the response alone (plus what the
   request phase fetched, `seen.before`), before a non-streamed response reaches
   the client; a blocking verdict replaces that response
4. `plan_response(seen, cfg)` -> ops to run after the response
5. `check_response(seen, got, cfg)` -> a verdict; a blocking one opens the breaker
   so the *next* request of the run (or key) is answered locally

`got` maps the names a plan chose to the operation results. A detector that
raises is isolated by the guard: logged, counted, and the request proceeds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from runguard.detectors.support.normalize import call_args_digest, result_digest_of
from runguard.detectors.support.turns import paired_results, turn_signature
from runguard.detectors.support.waiting import still_running
from runguard.proxy.core.events import RequestInfo, ResponseInfo, ToolCall, ToolResult
from runguard.proxy.core.frozen import frozen
from runguard.proxy.core.ops import Op, OpResult, Push, Scope

Plan = Mapping[str, Op]
Results = Mapping[str, OpResult]


class Action(StrEnum):
    BLOCK = "block"  # stop the run: answer with a synthetic response
    WARN = "warn"  # forward, add x-runguard-warning, record the verdict (shadow mode)
    # The first time in a run: forward with a note to the model asking it to change course (the one case
    # where the proxy changes a request); the next time the detector fires in that run: block.
    NUDGE = "nudge"
    OFF = "off"  # do not run


class ResponseKind(StrEnum):
    AUTO = "auto"  # the answer that ends the request's client (`guard.client_answers`; docs/stopping.md)
    ERROR = "error"  # a provider-native 429 the SDK does not retry
    REFUSE = "refuse"  # a provider-native 400 no SDK retries (for clients that retry any 429 or hide its body)
    STOP = "stop"  # a normal-looking completion that ends the agent's turn


class DetectorConfig(BaseModel):
    """Settings every detector has. Subclasses add their thresholds.

    A field whose `json_schema_extra` has `tighten: "lower"` (or "higher") may be
    set per run by a request header, and only in that direction.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action = Field(
        Action.BLOCK,
        description="block, warn (record and flag only), nudge (first a note to the model, then block) or off.",
    )
    response: ResponseKind = Field(
        ResponseKind.AUTO,
        description="What a block answers: auto (what ends the client that sent it: guard.client_answers), "
        "error (429 the SDK won't retry), refuse (400) or stop (a completion).",
    )


@frozen
class RunFacts:
    """Counters the guard keeps for every run and key, before this request's own usage."""

    request_index: int  # 1 for the run's first request
    started_at: float  # epoch seconds of the run's first request
    usd: float  # spent by the run so far
    input_tokens: int
    output_tokens: int
    in_flight: int  # requests of this run under way, this one included
    key_day_usd: float  # spent today (UTC) by this API key
    last_input_tokens: int = 0  # input tokens of the run's previous response (0 if none)
    duplicate: bool = False  # the same body as the run's previous request (a client-side retry)


@frozen
class RequestSeen:
    """A request about to be forwarded."""

    run_id: str
    key_hash: str
    now: float  # epoch seconds
    request: RequestInfo
    context_window: int  # input-token window of the model
    body_hash: str = ""  # digest of the request body


@frozen
class ResponseSeen:
    """A response that came back (or an upstream failure)."""

    run_id: str
    key_hash: str
    now: float
    request: RequestInfo
    response: ResponseInfo
    facts: RunFacts  # as of the request phase
    status: int | None  # upstream HTTP status; None when no response arrived (connect error, timeout)
    usd: float  # cost of this response
    latency: float  # seconds upstream took
    before: Results = field(default_factory=dict)  # this detector's request-phase results

    @property
    def upstream_failed(self) -> bool:
        """The upstream failed: no response, a 429, a 5xx, or an error inside a 200 stream."""
        if self.status is None or self.status == 429 or self.status >= 500:
            return True
        return self.status < 300 and self.response.error is not None


@frozen
class ShownCall:
    """One tool call (with its result, when the pattern is in the results) that formed a pattern.

    Digests, never content: `args_digest` is the call's normalized arguments' (`normalize.call_args_digest`),
    `result_digest` its result's with volatile keys dropped. `request_seq` is the run's request that carried
    the result (or whose response made the call), when known: the state keeps only digests of earlier ones.
    """

    tool: str
    args_digest: str | None = None
    result_digest: str | None = None
    request_seq: int | None = None

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"tool": self.tool}
        for key in ("args_digest", "result_digest", "request_seq"):
            value = getattr(self, key)
            if value is not None:
                shown[key] = value
        return shown


@frozen
class Point:
    """One point of a growth curve: `x` a request (or step) of the run, `y` the figure then."""

    x: float
    y: float


@frozen
class Evidence:
    """What formed a pattern, under the keys every trip's evidence uses (docs/detectors.md, "Evidence").

    A verdict's evidence is `{"summary": <reason>, **these keys that are set, **the detector's figures}`:
    `calls` (the calls and results that repeated), `agents` (the agents of a cycle or chain, in order),
    `series` (a growth curve), `batch` (the calls of one response), `value` and `limit` (the figure that
    reached its threshold, and the threshold).
    """

    calls: tuple[ShownCall, ...] = ()
    agents: tuple[str, ...] = ()
    series: tuple[Point, ...] = ()
    batch: tuple[ShownCall, ...] = ()
    value: float | None = None
    limit: float | None = None

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        if self.calls:
            shown["calls"] = [call.as_json() for call in self.calls]
        if self.agents:
            shown["agents"] = list(self.agents)
        if self.series:
            shown["series"] = [{"x": p.x, "y": p.y} for p in self.series]
        if self.batch:
            shown["batch"] = [call.as_json() for call in self.batch]
        if self.value is not None:
            shown["value"] = self.value
        if self.limit is not None:
            shown["limit"] = self.limit
        return shown


def shown_call(call: ToolCall, result: ToolResult | None = None, seq: int | None = None) -> ShownCall:
    """A call (and its result) as evidence: its digests (the result's with the default volatile keys dropped)."""
    return ShownCall(call.name, call_args_digest(call), result_digest_of(result) if result else None, seq)


def shown_results(request: RequestInfo, seq: int | None, tools: Collection[str] | None = None) -> tuple[ShownCall, ...]:
    """The results a request carries back (of `tools` only, if given), each with the call it answers."""
    return tuple(
        shown_call(call, result, seq) if call is not None else ShownCall(result.name or "", None, None, seq)
        for call, result in paired_results(request)
        if tools is None or (result.name or "") in tools
    )


WAITING = "~"  # before the signature of a turn whose every result says its job is still running


def push_action(request: RequestInfo, keep: int) -> Plan:
    """The plan that pushes the request's last turn as one action (`turn_signature`, "hash:turn id") onto the
    run's `actions` window of `keep`; none when that turn called no tool but handoffs (or none at all). A turn
    whose results all say a job is still running (`waiting.still_running`) is marked `WAITING`: a poll, whose
    patience is `non_progress`'s to judge."""
    action = turn_signature(request)
    if action is None:
        return {}
    signature, turn = action
    results = request.new_results
    if results and all(still_running(result) for result in results):
        signature = WAITING + signature
    # Unique by turn id: a re-sent request cannot add its turn twice.
    return {"actions": Push(Scope.RUN, "actions", (f"{signature}:{turn}",), keep=keep, unique=True)}


@frozen
class Verdict:
    """A detector's finding. `reason` names the figure that tripped it; `evidence` shows what formed it."""

    detector: str
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    scope: Scope = Scope.RUN  # whose breaker opens: the run, the key, or the key and model
    advisory: bool = False  # a warning only, whatever the action (e.g. context at 70%)


C = TypeVar("C", bound=DetectorConfig)


class Detector(Generic[C]):
    """Base class: every hook does nothing until a subclass overrides it."""

    name: ClassVar[str]
    Config: ClassVar[type[DetectorConfig]]
    # Judges one conversation (a tool loop, its context): in a thread nested in the run (a sub-agent
    # started through a tool call), its run state is that thread's own. Caps and multi-agent
    # detectors judge the whole run.
    per_thread: ClassVar[bool] = False
    # A run this detector stopped stays stopped until it is reset or forgotten (its breaker is latched:
    # no cooldown, no probe). False for upstream-health detectors, whose breakers heal after a cooldown.
    stays_stopped: ClassVar[bool] = True
    # Whether `action: nudge` makes sense: the model can change what the detector sees (its calls, its
    # handoffs), not an upstream's health or a client's retries.
    nudges: ClassVar[bool] = True
    # Its request hooks read only the tool results the request sends back (`RequestInfo.new_results`, or user
    # text that may replay them: `replayed.may_replay`): for a request with neither (a question without tools),
    # its plan would be empty and its check would find nothing, so the engine skips both (`engine.Lineup`).
    reads_results: ClassVar[bool] = False
    # Its request hooks read only the calls of the conversation's last assistant turn (`RequestInfo.prior_calls`):
    # for a request with none, its plan would be empty and its check would find nothing (skipped likewise).
    reads_calls: ClassVar[bool] = False
    # It judges only the tool calls of responses: for a response with none, its response hooks plan nothing
    # and find nothing, and its request hooks only read state for them (no check, no write). The engine skips
    # its response hooks for a response without tool calls, and its request hooks for a request whose
    # response cannot call a tool (`engine.may_call_tools`: none declared, none in its tail).
    needs_tools: ClassVar[bool] = False

    def plan_request(self, seen: RequestSeen, cfg: C) -> Plan:
        return {}

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: C) -> Verdict | None:
        return None

    def inspect_response(self, seen: ResponseSeen, cfg: C) -> Verdict | None:
        return None

    def plan_response(self, seen: ResponseSeen, cfg: C) -> Plan:
        return {}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: C) -> Verdict | None:
        return None

    def verdict(self, reason: str, scope: Scope = Scope.RUN, shows: Evidence | None = None, **figures: Any) -> Verdict:
        """A finding: its evidence is the `summary` (the reason), what `shows` holds, and the detector's own
        `figures` (a figure under a well-known key must have its documented shape: `limit=5` is fine)."""
        evidence = {"summary": reason, **(shows.as_json() if shows is not None else {}), **figures}
        return Verdict(detector=self.name, reason=reason, evidence=evidence, scope=scope)
