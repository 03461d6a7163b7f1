"""`handoff_cycle`: agent pairs repeating within the last handoffs without progress, or too often."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

from runguard.detectors.handoff_cycle import HandoffCycle, HandoffCycleConfig
from runguard.proxy.core.events import AgentIdentity, HandoffKind
from tests.detectors.harness import RunSimulator, Step, call, first_trip, handoff, request, response, result, shows


def handing(source: str, target: str, text: str = "", brought: str = "") -> Step:
    """`source` speaks, brings `brought` as a tool result, writes `text` and hands over to `target`."""
    results = [result("transfer", brought, "prev")] if brought else []
    transfer = call(f"transfer_to_{target}", {}, f"call-{source}-{target}")
    return Step(
        request(agent_name=source, new_results=results),
        response(text=text, tool_calls=[transfer], handoffs=[handoff(target, call_id=transfer.call_id)]),
    )


async def test_the_same_pair_with_the_same_payload_twice_in_the_window_trips() -> None:
    steps = [handing("triage", "billing"), handing("billing", "triage"), handing("triage", "billing")]
    results = await RunSimulator([HandoffCycle()]).run(steps)
    assert first_trip(results) == 3
    finding = results[2].one("handoff_cycle")
    assert shows(finding, "agents", "calls")["agents"] == ["triage", "billing"]
    assert finding.action == "block"
    assert "triage -> billing repeated with the same payload 2 times" in finding.reason
    assert finding.evidence["pair"] == ["triage", "billing"]


async def test_a_three_round_writer_editor_review_with_changing_drafts_passes() -> None:
    steps = []
    for round_ in range(3):
        steps.append(handing("writer", "editor", text=f"draft v{round_}: ...", brought=f"notes {round_}"))
        steps.append(handing("editor", "writer", text=f"comments on v{round_}", brought=f"draft v{round_}"))
    steps.append(Step(request(agent_name="writer"), response(text="final")))
    assert first_trip(await RunSimulator([HandoffCycle()]).run(steps)) is None


async def test_a_pair_repeating_past_the_hard_limit_trips_whatever_the_payload() -> None:
    steps = []
    for round_ in range(5):
        steps.append(handing("writer", "editor", text=f"draft v{round_}"))
        steps.append(handing("editor", "writer", text=f"comments {round_}"))
    results = await RunSimulator([HandoffCycle()]).run(steps)
    # The 5th writer -> editor handoff is step 9; the 4th (step 7) is still allowed.
    assert first_trip(results) == 9
    assert (
        "happened 5 times since the user's last question, over the limit of 4" in results[8].one("handoff_cycle").reason
    )


async def test_an_agent_named_only_once_handed_work_counts_its_handoffs_as_one_pair() -> None:
    """openai-agents: the writer speaks unnamed (its fingerprint) until the editor hands back to it."""
    fingerprint = "9f" * 8
    steps = []
    for round_ in range(5):
        writer = handing("writer", "editor", text=f"draft v{round_}")
        identity = AgentIdentity("writer", fingerprint, learned=True) if round_ else AgentIdentity(None, fingerprint)
        steps.append(dataclasses.replace(writer, request=dataclasses.replace(writer.request, agent=identity)))
        steps.append(handing("editor", "writer", text=f"comments {round_}"))
    results = await RunSimulator([HandoffCycle()]).run(steps)
    assert first_trip(results) == 9
    finding = results[8].one("handoff_cycle")
    assert "writer -> editor happened 5 times" in finding.reason
    assert finding.evidence["pair"] == ["writer", "editor"]


async def test_allowed_pairs_never_count() -> None:
    config = HandoffCycleConfig(allowed_pairs=[("writer", "editor"), ("editor", "writer")])
    steps = [handing("writer", "editor"), handing("editor", "writer")] * 6
    assert first_trip(await RunSimulator([(HandoffCycle(), config)]).run(steps)) is None


async def test_a_pipeline_passing_work_along_distinct_pairs_passes() -> None:
    chain = ["coordinator", "planner", "researcher", "writer", "reviewer", "coordinator"]
    steps = [handing(a, b, text="same text") for a, b in pairwise(chain)]
    assert first_trip(await RunSimulator([HandoffCycle()]).run(steps)) is None


async def test_drafts_saved_through_a_tool_count_as_progress() -> None:
    """The writer saves each draft with a tool that always answers "saved", then hands over with no text."""

    def writer_round(version: int) -> Step:
        save = call("save_draft", {"text": f"draft v{version}"}, f"save-{version}")
        transfer = call("transfer_to_editor", {}, f"t-{version}")
        return Step(
            request(agent_name="writer", prior_calls=[save], new_results=[result("save_draft", "saved", save.call_id)]),
            response(tool_calls=[transfer], handoffs=[handoff("editor", call_id=transfer.call_id)]),
        )

    steps = []
    for version in range(3):
        steps += [writer_round(version), handing("editor", "writer", text=f"comments {version}")]
    assert first_trip(await RunSimulator([HandoffCycle()]).run(steps)) is None


async def test_a_session_routing_each_new_question_passes_and_the_same_question_again_trips() -> None:
    """A specialist sending a question it does not handle back to the coordinator, question after question."""

    def back_home(question: str) -> Step:
        transfer = call("transfer_to_agent", {"agent_name": "coordinator"}, None)
        return Step(
            request(agent_name="billing", user_text=question),
            response(tool_calls=[transfer], handoffs=[handoff("coordinator")]),
        )

    def routed(question: str) -> Step:
        transfer = call("transfer_to_agent", {"agent_name": "billing"}, None)
        return Step(
            request(agent_name="coordinator", user_text=question),
            response(tool_calls=[transfer], handoffs=[handoff("billing")]),
        )

    session = [back_home("Q1 support"), routed("Q2 billing"), back_home("Q3 support"), routed("Q4 billing")]
    assert first_trip(await RunSimulator([HandoffCycle()]).run(session)) is None
    again = [back_home("Q1 support"), routed("Q2 billing"), back_home("Q1 support")]
    assert first_trip(await RunSimulator([HandoffCycle()]).run(again)) == 3


def delegating(task: str, answer: str, number: int) -> Step:
    """An Agno leader hands `task` to the analyst, having been answered `answer` for the task before."""
    delegation = call("delegate_task_to_member", {"member_id": "analyst", "task": task}, f"call-{number}")
    brought = [result("delegate_task_to_member", answer, f"call-{number - 1}")] if number else []
    return Step(
        request(agent_name="leader", new_results=brought),
        response(
            tool_calls=[delegation], handoffs=[handoff("analyst", HandoffKind.DELEGATE, call_id=delegation.call_id)]
        ),
    )


async def test_a_leader_handing_one_member_many_different_tasks_passes() -> None:
    """A fan-out: the leader waits for each answer, and each task is new."""
    steps = [delegating(f"analyse quarter {n} of the sales ledger", f"answer {n - 1}", n) for n in range(10)]
    assert first_trip(await RunSimulator([HandoffCycle()]).run(steps)) is None


async def test_the_same_task_delegated_past_the_hard_limit_trips_whatever_the_member_answered() -> None:
    steps = [delegating("fix the failing build", f"tried approach {n - 1}, still failing", n) for n in range(6)]
    results = await RunSimulator([HandoffCycle()]).run(steps)
    assert first_trip(results) == 5
    reason = results[4].one("handoff_cycle").reason
    assert (
        "leader -> analyst of the same task happened 5 times since the user's last question, over the limit of 4"
        in reason
    )


def routed(question: str | None, n: int) -> list[Step]:
    """Triage routes a question to billing, who answers it (`question`: the user's own message, or None
    when the request brings none, as in a loop between agents)."""
    ask = handing("triage", "billing", text=f"routing {n}")
    ask = dataclasses.replace(ask, request=request(agent_name="triage", user_text=f"q {n}", question=question))
    return [ask, Step(request(agent_name="billing"), response(text=f"answer {n}"))]


async def test_a_session_routing_each_new_question_to_one_specialist_passes() -> None:
    steps = [step for n in range(8) for step in routed(f"question {n}", n)]
    assert first_trip(await RunSimulator([HandoffCycle()]).run(steps)) is None
    # The same handoffs with no question of the user's between them (one task): the 5th trips.
    steps = [step for n in range(8) for step in routed(None, n)]
    assert first_trip(await RunSimulator([HandoffCycle()]).run(steps)) == 9


async def test_a_loop_within_one_question_trips_after_a_session_of_questions() -> None:
    steps = [step for n in range(6) for step in routed(f"question {n}", n)]
    steps.append(routed("question 6", 6)[0])
    for round_ in range(4):  # billing hands it back, triage hands it over again: 5 handoffs in question 6
        steps.append(handing("billing", "triage", text=f"not mine {round_}"))
        steps.append(handing("triage", "billing", text=f"yours {round_}"))
    results = await RunSimulator([HandoffCycle()]).run(steps)
    assert first_trip(results) == len(steps)  # the 5th triage -> billing handoff since question 6
    assert (
        "triage -> billing happened 5 times since the user's last question" in results[-1].one("handoff_cycle").reason
    )
