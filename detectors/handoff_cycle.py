"""`handoff_cycle`: agents handing work back and forth without moving it on.

The seeds' signal is a repeated from->to pair among the last few handoffs.
Review loops repeat pairs on purpose (writer -> editor -> writer), so a repeat
alone is not enough: the handoff also carries a payload hash (the handoff
call's arguments, the response's text, and what the request brought: the tool
calls and results, and the user text since the last turn, such as the next
question of a session), and the same pair with the same payload twice within
the window means nothing changed between rounds. Past a hard number of repeats of one
pair within one question of the user's the run stops whatever the payloads: a loop
between agents goes round without the user, while a help desk's session routes
question after question to the same specialist. A new question (the user's own
message, not ADK's quote of other agents' turns) starts the counts again.

A delegation is not a transfer: the delegating agent waits for the member's
answer as a tool result (Agno's `delegate_task_to_member`), and a leader
handing one member task after task is a fan-out, not a ping-pong. Its hard
limit counts each pair and task (the delegation's arguments) apart, so the
same task handed over again and again still stops the run, whatever the
member answered each time.
"""

from __future__ import annotations

import dataclasses

from pydantic import Field

from runguard.detectors.support import tally
from runguard.detectors.support.base import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseSeen,
    Results,
    Verdict,
    shown_call,
)
from runguard.detectors.support.normalize import call_args_digest, clip, result_digest_of, tag
from runguard.proxy.core.events import Handoff, HandoffKind, digest
from runguard.proxy.core.ops import Add, Get, Op, Push, Put, Scope

MAX_PAIRS = 32  # distinct agent pairs counted per run
LABEL_CHARS = 32  # agent labels are clipped in state


class HandoffCycleConfig(DetectorConfig):
    window: int = Field(
        6,
        ge=2,
        le=16,
        description="How many of the run's latest handoffs are searched for a repeat that carried "
        "the same payload (nothing changed between the rounds).",
    )
    max_pair_repeats: int = Field(
        4,
        ge=1,
        description="Handoffs from one agent to another that a run may make for one question of the user's; "
        "one more stops it, whatever was handed over. A review loop of a few rounds stays under it. "
        "Delegations (the delegating agent waits for the answer: Agno's delegate_task_to_member, a call of "
        "an agent tool) count per task.",
        json_schema_extra={"tighten": "lower"},
    )
    allowed_pairs: list[tuple[str, str]] = Field(
        default_factory=list,
        description="(from, to) agent pairs that are never counted, e.g. [[writer, editor], [editor, writer]].",
    )


class HandoffCycle(Detector[HandoffCycleConfig]):
    """After each response with handoffs: window the handoffs with their payloads, count each pair."""

    name = "handoff_cycle"
    Config = HandoffCycleConfig

    def plan_request(self, seen: RequestSeen, cfg: HandoffCycleConfig) -> Plan:
        if seen.request.question_hash is None:  # the same question goes on: no count starts again
            return {"pairs": tally.fetch("pairs")}
        return {"pairs": tally.fetch("pairs"), "asked": Get(Scope.RUN, "asked")}

    def _pairs(self, seen: ResponseSeen, cfg: HandoffCycleConfig) -> list[tuple[Handoff, str]]:
        """(handoff, "<from>><to>") for each handoff of the response not on the allowed list.

        The source is the agent's steady label: an agent named only once handed work (openai-agents)
        counts its handoffs from before and after as one pair. A delegation's pair ends with the digest
        of what it handed over, so its hard limit counts each task apart (see the module's doc).
        """
        if not seen.response.handoffs:
            return []
        agent = seen.request.agent
        source, steady = agent.label, clip(agent.steady, LABEL_CHARS)
        allowed = {(a, b) for a, b in cfg.allowed_pairs}
        pairs = []
        for handoff in seen.response.handoffs:
            if (source, handoff.target) in allowed:
                continue
            pair = f"{steady}>{clip(handoff.target, LABEL_CHARS)}"
            if handoff.kind is HandoffKind.DELEGATE:
                pair += "+" + digest(_handed(seen, handoff), 4)
            pairs.append((handoff, pair))
        return pairs

    def _payload(self, seen: ResponseSeen, handoff: Handoff, brought: str) -> str:
        """What was handed over and answered: the handoff's arguments, the response text, what was brought."""
        return digest("\x00".join((_handed(seen, handoff), seen.response.text, brought)), 4)

    def plan_response(self, seen: ResponseSeen, cfg: HandoffCycleConfig) -> Plan:
        pairs = self._pairs(seen, cfg)
        question = seen.request.question_hash
        asked = question is not None and question != seen.before.get("asked")
        if not pairs:  # a run that never handed off has no count to start again
            return _new_question(seen, question) if asked and seen.before.get("pairs") else {}
        plan: dict[str, Op] = _new_question(seen, question) if asked else {}
        # What the request brought: the last turn's calls (a draft saved by a tool), their results, and
        # the user text since (a new question; ADK quotes the other agents' turns as user text).
        brought = "".join(
            [call_args_digest(c) for c in seen.request.prior_calls]
            + [result_digest_of(r) for r in seen.request.new_results]
            + [seen.request.new_user_hash or ""]
        )
        items = tuple(f"{pair}#{self._payload(seen, handoff, brought)}" for handoff, pair in pairs)
        plan["recent"] = Push(Scope.RUN, "recent", items, keep=cfg.window)
        counts: dict[str, int] = {}
        for _, pair in pairs:
            counts[tag(pair)] = counts.get(tag(pair), 0) + 1
        admitted, new = tally.admit(seen.before.get("pairs"), counts, MAX_PAIRS)
        plan.update({f"n.{t}": Add(Scope.RUN, f"n.{t}", counts[t]) for t in admitted})
        for op in tally.enrol("pairs", new, MAX_PAIRS):
            plan["roster"] = op
        return plan

    def check_response(self, seen: ResponseSeen, got: Results, cfg: HandoffCycleConfig) -> Verdict | None:
        recent = got.get("recent")
        pairs = self._pairs(seen, cfg)
        if not isinstance(recent, tuple) or not pairs:
            return None
        source = seen.request.agent.label
        # The batch appended this response's items last: no need to hash the payloads again.
        mine = recent[-len(pairs) :]
        for (handoff, pair), item in zip(pairs[-len(mine) :], mine, strict=True):
            same = recent.count(item)
            shows = _shown(seen, handoff, source)
            if same >= 2:
                return self.verdict(
                    f"handoff {source} -> {handoff.target} repeated with the same payload {same} times "
                    f"within the last {len(recent)} handoffs: nothing changed between the rounds",
                    shows=shows,
                    pair=[source, handoff.target],
                    payload=item.rpartition("#")[2],
                    repeats=same,
                )
            count = got.get(f"n.{tag(pair)}")
            if isinstance(count, float) and count > cfg.max_pair_repeats:
                what = "of the same task " if handoff.kind is HandoffKind.DELEGATE else ""
                return self.verdict(
                    f"handoff {source} -> {handoff.target} {what}happened {int(count)} times since the "
                    f"user's last question, over the limit of {cfg.max_pair_repeats}",
                    shows=dataclasses.replace(shows, value=int(count), limit=cfg.max_pair_repeats),
                    pair=[source, handoff.target],
                    repeats=int(count),
                )
        return None


def _shown(seen: ResponseSeen, handoff: Handoff, source: str) -> Evidence:
    """The agents of the repeated handoff, and the call that made it this time."""
    calls = [
        shown_call(call, seq=seen.facts.request_index)
        for call in seen.response.tool_calls
        if (call.call_id is not None and call.call_id == handoff.call_id) or call.name == handoff.tool
    ][:1]
    return Evidence(calls=tuple(calls), agents=(source, handoff.target))


def _new_question(seen: ResponseSeen, question: str | None) -> dict[str, Op]:
    """The user asked something new: note it, and count every pair's handoffs from zero again."""
    roster = seen.before.get("pairs")
    plan: dict[str, Op] = {"asked": Put(Scope.RUN, "asked", question)}
    for pair in roster if isinstance(roster, tuple) else ():
        plan[f"reset.{pair}"] = Put(Scope.RUN, f"n.{pair}", None)
    return plan


def _handed(seen: ResponseSeen, handoff: Handoff) -> str:
    """The arguments of the call that made `handoff` ("" if it is not among the response's calls)."""
    return next(
        (
            call.arguments
            for call in seen.response.tool_calls
            if (call.call_id == handoff.call_id if handoff.call_id else call.name == handoff.tool)
        ),
        "",
    )
