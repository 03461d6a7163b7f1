"""`delegation`: an agent re-entering the delegation chain it is already part of, or a chain too deep.

The chain is the run's stack of agents waiting on each other: a handoff
pushes its target (Agno's delegate: the caller waits for the member; ADK and
the Agents SDK's transfer: the caller's invocation stays underneath), and it
shrinks when a parent speaks again. A transfer to the immediate parent is the
normal way back ("transfer to your parent agent"); a handoff to any other
agent already in the chain is a cycle: A -> B -> C -> A.

The chain is a short JSON list read before the request and written after
the response; a run's requests are sequential in agent loops, and siblings
running in parallel only ever replace the top, which never trips.
"""

from __future__ import annotations

import orjson
from pydantic import Field

from runguard.detectors.support import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseSeen,
    Results,
    Verdict,
)
from runguard.detectors.support.normalize import clip
from runguard.proxy.core.events import HandoffKind, RequestInfo, ResponseInfo
from runguard.proxy.core.ops import Get, OpResult, Put, Scope

MAX_CHAIN = 12  # agents kept in the stored chain (the root and the deepest ones)
LABEL_CHARS = 40  # agent labels are clipped in state


class DelegationConfig(DetectorConfig):
    max_depth: int = Field(
        5,
        ge=1,
        le=MAX_CHAIN - 1,
        description="Agents that may be nested in one delegation chain (each waiting on the next). Set it "
        "to the deepest nesting the pipeline intends, plus two.",
        json_schema_extra={"tighten": "lower"},
    )


def _loads(raw: OpResult) -> list[str]:
    if not isinstance(raw, str):
        return []
    try:
        chain = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return []
    return [str(label) for label in chain] if isinstance(chain, list) else []


def _dumps(chain: list[str]) -> str:
    if len(chain) > MAX_CHAIN:
        chain = chain[:1] + chain[-(MAX_CHAIN - 1) :]
    return orjson.dumps(chain).decode()


def speaking(chain: list[str], request: RequestInfo) -> tuple[list[str], str | None]:
    """The chain once the agent of this request speaks, and the agent if it re-entered the chain.

    The root starts it; a parent speaking again (its member answered) pops back
    to it, as does any ancestor further down; an agent not in the chain takes
    the top's place (a sibling in a sequence or in parallel, no handoff).

    An agent that spoke unnamed (openai-agents names an agent only once work
    is handed to it) is in the chain under its fingerprint label: named now, it
    takes that place. If the handoff that named it also pushed it on top, it
    went home when it is the parent of the agent that handed over, and it
    re-entered the chain otherwise.
    """
    agent = clip(request.agent.label, LABEL_CHARS)
    unnamed = clip(request.agent.unnamed, LABEL_CHARS) if request.agent.learned else agent
    if agent != unnamed and unnamed in chain:
        at = chain.index(unnamed)
        handed_here = chain[-1] == agent and at < len(chain) - 1
        if handed_here:
            chain = chain[:-1]
        chain = [agent if label == unnamed else label for label in chain]
        if handed_here and at != len(chain) - 2:
            return chain, agent  # the chain it re-entered (what the verdict shows)
    if not chain:
        return [agent], None
    if agent in chain:
        return chain[: chain.index(agent) + 1], None
    return [*chain[:-1], agent], None


def handed(chain: list[str], response: ResponseInfo) -> tuple[list[str], str | None]:
    """The chain after the response's handoffs, and the first target that re-entered it (if any).

    Several handoffs in one response are siblings (a parallel delegation):
    the chain grows by one level at most, and each target is checked.
    """
    parent = chain[-2] if len(chain) >= 2 else None
    targets = [(handoff.kind, clip(handoff.target, LABEL_CHARS)) for handoff in response.handoffs]
    home = [kind is HandoffKind.TRANSFER and target == parent for kind, target in targets]
    for (_, target), going_home in zip(targets, home, strict=True):
        if target in chain and not going_home:
            return chain, target
    if any(home):
        return chain[:-1], None  # a transfer back to the parent: the normal way home
    if targets:
        return [*chain, targets[0][1]], None
    return chain, None


class Delegation(Detector[DelegationConfig]):
    """Reads the chain before the request; after the response, applies the speaker and the handoffs.

    The updated chain is written back and checked; a trip opens the breaker for the run's next request.
    """

    name = "delegation"
    Config = DelegationConfig

    def plan_request(self, seen: RequestSeen, cfg: DelegationConfig) -> Plan:
        return {"chain": Get(Scope.RUN, "chain")}

    def plan_response(self, seen: ResponseSeen, cfg: DelegationConfig) -> Plan:
        stored = seen.before.get("chain")
        spoke, again = speaking(_loads(stored), seen.request)
        if again is not None:
            spoke = spoke[: spoke.index(again) + 1]  # back to the agent that re-entered
        chain, _ = handed(spoke, seen.response)
        value = _dumps(chain)
        return {} if value == stored else {"chain": Put(Scope.RUN, "chain", value)}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: DelegationConfig) -> Verdict | None:
        spoke, again = speaking(_loads(seen.before.get("chain")), seen.request)
        if again is not None:
            return self._reentered(again, spoke)
        chain, again = handed(spoke, seen.response)
        if again is not None:
            return self._reentered(again, chain)
        return self._too_deep(chain, cfg)

    def _reentered(self, again: str, chain: list[str]) -> Verdict:
        shown = " -> ".join(chain)
        return self.verdict(
            f"agent '{again}' is handed work while already in the delegation chain {shown}",
            shows=Evidence(agents=(*chain, again)),
            agent=again,
            chain=chain,
        )

    def _too_deep(self, chain: list[str], cfg: DelegationConfig) -> Verdict | None:
        if len(chain) <= cfg.max_depth:
            return None
        return self.verdict(
            f"delegation chain is {len(chain)} agents deep, over the limit of {cfg.max_depth}: {' -> '.join(chain)}",
            shows=Evidence(agents=tuple(chain), value=len(chain), limit=cfg.max_depth),
            depth=len(chain),
            chain=chain,
        )
