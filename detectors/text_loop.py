"""`text_loop`: an agent that writes its calls as text, going round and round without adding anything.

Several agent designs keep their tool protocol out of the API's tool fields:
ReAct agents write "Action: ..." and get "Observation: ..." back as a user
message, code agents write code that calls the tools, group chats pass the
task between agents whose turns arrive as user messages. None declares a tool,
so the tool detectors see nothing. This judges what each turn adds: the user
texts the request brings after the model's last turn (an observation, an
error, the other agents' messages) with the answer the model gave to them,
read as word shingles (`shingles`) and compared with the turns before in the
conversation. A turn at least 80% made of shingles already seen is stale;
`turns` stale turns in a row stop the run, from its next request. Judged only
where no tool is declared and no tool result sent; a short answer (a selector
naming the next speaker, "ok") is neither judged nor kept, and a request sent
again unchanged (a retry) is not judged twice.

Defaults. The same as `novelty`'s, so a text agent is stopped about as early as
its structured twin: one turn later, because a turn is judged with its answer.
A stuck ReAct step ("Thought: let me search again. Action: search[lowest fare
LIS BER]" and the same results) is 5-15% new; a step that learns something, or
a group-chat turn that drafts, reviews or decides something new, 40-100%.

False positives. What comes close: a chat whose user pastes the same error
again (the model's new answer keeps the turn over 20% new unless it repeats
itself too); a group chat's agents quoting each other (only the quote is old:
each reply's own words are new); a selector re-sending the whole transcript to
pick a speaker (its answer is a name: not judged).
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support.base import Detector, DetectorConfig, Evidence, Plan, ResponseSeen, Results, Verdict
from runguard.detectors.support.normalize import clip
from runguard.detectors.support.shingles import MAX_CHARS, pack, sample, shingles, stale_shares, unpack
from runguard.proxy.core.events import digest
from runguard.proxy.core.ops import Push, Scope

LABEL_CHARS = 24  # speaker labels kept in state


class TextLoopConfig(DetectorConfig):
    max_new_share: float = Field(
        0.2,
        ge=0,
        lt=1,
        description="Share of a turn's shingles (the texts it was sent and its answer) not seen before in the "
        "conversation at or under which the turn is stale.",
        json_schema_extra={"tighten": "higher"},
    )
    turns: int = Field(
        3,
        ge=1,
        le=8,
        description="Stale turns in a row that stop the run (from its next request).",
        json_schema_extra={"tighten": "lower"},
    )
    min_chars: int = Field(
        200,
        ge=0,
        description="Characters a turn (texts sent and answer) needs to be judged.",
    )
    min_answer_chars: int = Field(
        40,
        ge=0,
        description="Characters the answer needs for the turn to be judged: a shorter one (a selector naming the "
        "next speaker, an acknowledgement) is neither judged nor kept.",
    )
    min_shingles: int = Field(8, ge=1, description="3-word shingles (up to 48 are kept) a turn needs to be judged.")
    window: int = Field(
        16,
        ge=2,
        le=32,
        description="Turns remembered per conversation (a sample of up to 48 shingles each): the history a turn "
        "is compared with.",
    )


class TextLoop(Detector[TextLoopConfig]):
    """After each answer: the turn joins the conversation's window and is judged against the turns before it."""

    name = "text_loop"
    per_thread = True
    Config = TextLoopConfig

    def plan_response(self, seen: ResponseSeen, cfg: TextLoopConfig) -> Plan:
        request, response = seen.request, seen.response
        if request.tool_names or request.new_results or response.tool_calls:
            return {}  # tools in the API's fields: the tool detectors judge them
        if seen.upstream_failed or seen.facts.duplicate or len(response.text.strip()) < cfg.min_answer_chars:
            return {}
        texts = [*request.new_user_texts, response.text]
        if sum(map(len, texts)) < cfg.min_chars:
            return {}
        kept = pack(sample(shingles([text[:MAX_CHARS] for text in texts], frozenset())))
        speaker = clip(request.agent.steady, LABEL_CHARS).replace("~", "-")
        turn = digest(f"{seen.facts.request_index}:{request.message_count}", 4)
        return {"turns": Push(Scope.RUN, "turns", (f"{turn}~{speaker}~{kept}",), keep=cfg.window, unique=True)}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: TextLoopConfig) -> Verdict | None:
        window = got.get("turns")
        if not isinstance(window, tuple) or len(window) <= cfg.turns:
            return None  # the first turn is never stale: `turns` stale ones need one more
        parsed = [(speaker, unpack(packed)) for _, speaker, packed in (item.split("~", 2) for item in window)]
        shares = stale_shares([hashes for _, hashes in parsed], cfg.turns, cfg.min_shingles, cfg.max_new_share)
        if shares is None:
            return None
        speakers = [speaker for speaker, _ in parsed[-cfg.turns :]]
        return self.verdict(
            f"the conversation added almost nothing new {cfg.turns} turns in a row "
            f"(new shares {', '.join(f'{s:.0%}' for s in shares)}, at most {cfg.max_new_share:.0%}; "
            f"speakers {', '.join(dict.fromkeys(speakers))})",
            shows=Evidence(agents=tuple(speakers)),
            new_shares=shares,
            turns=cfg.turns,
            compared_turns=len(parsed) - 1,
        )
