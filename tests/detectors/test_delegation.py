"""`delegation`: re-entering the active delegation chain, or nesting too deep."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

from runguard.detectors.delegation import Delegation, DelegationConfig
from runguard.proxy.core.events import AgentIdentity, HandoffKind
from tests.detectors.harness import RunSimulator, Step, first_trip, handoff, request, response, shows

DELEGATE = HandoffKind.DELEGATE


def speaks(agent: str, *targets: str, kind: HandoffKind = HandoffKind.TRANSFER) -> Step:
    """`agent` speaks and hands over to `targets` (none: it just answers)."""
    return Step(request(agent_name=agent), response(text="...", handoffs=[handoff(t, kind) for t in targets]))


def as_agent(identity: AgentIdentity, *targets: str) -> Step:
    """An agent known by `identity` speaks and transfers to `targets`."""
    step = speaks("-", *targets)
    return dataclasses.replace(step, request=dataclasses.replace(step.request, agent=identity))


FIRST = "1a2b3c4d" * 2  # the run's first agent's fingerprint (openai-agents sends no name)


async def test_the_first_agent_named_once_handed_back_to_past_its_parent_trips() -> None:
    """openai-agents: triage speaks unnamed; billing -> refunds -> triage re-enters it at the chain's root."""
    steps = [
        as_agent(AgentIdentity(None, FIRST), "billing"),
        speaks("billing", "refunds"),
        speaks("refunds", "triage"),
        as_agent(AgentIdentity("triage", FIRST, learned=True), "billing"),
    ]
    results = await RunSimulator([Delegation()]).run(steps)
    assert first_trip(results) == 4
    finding = results[3].one("delegation")
    assert shows(finding, "agents")["agents"][-1] in shows(finding)["agents"][:-1]
    assert "agent 'triage' is handed work while already in the delegation chain" in finding.reason
    assert finding.evidence["chain"] == ["triage", "billing", "refunds"]


async def test_the_first_agent_named_once_handed_back_by_its_member_is_home() -> None:
    """openai-agents ping-pong and review loops: the member hands back to the agent that handed to it."""
    steps = [as_agent(AgentIdentity(None, FIRST), "editor")]
    for _ in range(4):
        steps += [speaks("editor", "writer"), as_agent(AgentIdentity("writer", FIRST, learned=True), "editor")]
    assert first_trip(await RunSimulator([Delegation()]).run(steps)) is None


async def test_an_agent_handed_work_while_in_the_chain_trips() -> None:
    steps = [speaks("orchestrator", "specialist"), speaks("specialist", "router"), speaks("router", "orchestrator")]
    results = await RunSimulator([Delegation()]).run(steps)
    assert first_trip(results) == 3
    finding = results[2].one("delegation")
    assert finding.action == "block"
    assert "agent 'orchestrator' is handed work while already in the delegation chain" in finding.reason
    assert finding.evidence["chain"] == ["orchestrator", "specialist", "router"]


async def test_transfer_back_to_the_parent_is_the_way_home() -> None:
    """ADK: the coordinator sends each question to a specialist, who transfers back to its parent."""
    steps = []
    for specialist in ["billing", "support", "billing", "support", "billing"]:
        steps += [speaks("coordinator", specialist), speaks(specialist, "coordinator")]
    assert first_trip(await RunSimulator([Delegation()]).run(steps)) is None


async def test_a_team_leader_delegating_to_members_in_turn_passes() -> None:
    """Agno: the leader delegates, the member answers in its own request, the leader resumes."""
    steps = []
    for member in ["web-researcher", "summarizer", "web-researcher", "summarizer"]:
        steps += [speaks("leader", member, kind=DELEGATE), speaks(member), speaks("leader")]
    assert first_trip(await RunSimulator([Delegation()]).run(steps)) is None


async def test_a_member_delegating_back_to_its_leader_trips() -> None:
    steps = [speaks("leader", "web-researcher", kind=DELEGATE), speaks("web-researcher", "leader", kind=DELEGATE)]
    assert first_trip(await RunSimulator([Delegation()]).run(steps)) == 2


async def test_members_answering_under_another_label_replace_the_top() -> None:
    """openai-agents / agno members are known by a fingerprint label, not the handoff target's name."""
    steps = [speaks("leader", "billing-agent", kind=DELEGATE), speaks("agent-1a2b3c4d"), speaks("leader")]
    steps += [speaks("leader", "billing-agent", kind=DELEGATE), speaks("agent-1a2b3c4d"), speaks("leader")]
    assert first_trip(await RunSimulator([Delegation()]).run(steps)) is None


async def test_a_chain_deeper_than_the_limit_trips() -> None:
    names = ["a", "b", "c", "d", "e", "f", "g"]
    steps = [speaks(name, after) for name, after in pairwise(names)]
    results = await RunSimulator([Delegation()]).run(steps)
    # a -> b -> c -> d -> e is 5 deep; e handing to f makes 6.
    assert first_trip(results) == 5
    assert "6 agents deep, over the limit of 5" in results[4].one("delegation").reason


async def test_sequential_and_parallel_siblings_without_handoffs_stay_shallow() -> None:
    steps = [speaks(f"step_{i}") for i in range(10)]
    assert first_trip(await RunSimulator([(Delegation(), DelegationConfig(max_depth=1))]).run(steps)) is None


async def test_a_parallel_delegation_grows_the_chain_by_one_level() -> None:
    steps = [
        speaks("leader", "m1", "m2", "m3", kind=DELEGATE),
        speaks("m1"),
        speaks("m2"),
        speaks("m3"),
        speaks("leader"),
    ]
    assert first_trip(await RunSimulator([(Delegation(), DelegationConfig(max_depth=2))]).run(steps)) is None
