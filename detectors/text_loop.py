"""`text_loop`: an agent that writes its calls as text, going round and round without adding anything.

Several agent designs keep their tool protocol out of the API's tool fields:
ReAct agents write "Action: ..." and get "Observation: ..." back as a user
message, code agents write code that calls the tools, coding agents write one
shell command per answer, group chats pass the task between agents whose turns
arrive as user messages. None declares a tool, so the tool detectors see
nothing. This judges what each turn adds: the user texts the request brings
after the model's last turn (an observation, an error, the other agents'
messages) with the answer the model gave to them, read as word shingles
(`shingles`; the texts and the answer each read in full, so a long output
leaves room for the answer) and compared with the turns before in the
conversation. A turn at least 80% made of shingles already seen is stale;
`turns` stale turns in a row stop the run, from its next request.

Progress is judged as the agent sees it. What a turn was told is also read
alone, without the lines the harness frames every output with (a status
footer, a prompt, an exit-code header: `observation`) and with long numbers
(line counters, sizes) as "#": a turn told something at least half new
(`fresh_share`) learned something and is not stale, however formulaic its
answer. So did a turn that was told something else than the turn before while
its action works on places no earlier action of the window named: the numbers,
paths and file names of the first line of the answer's last fenced block
("edit 46:46", "open src/Parser.java"): a rename done occurrence by
occurrence, each view the same window with one more line changed, is work; an
edit aimed at another line that is refused the same way is not (what came back
did not change). A turn told only that its last command printed nothing
(`commands.trivial_output`: a `grep` that matched nothing, the harness's fixed
"ran successfully and did not produce any output") whose action (its last
`<function=...>` call or fenced block, whole) no earlier turn of the window
wrote is a probe: an empty result of a command that worked says nothing either
way, so stale turns that are mostly probes (a search through names that are
not there) do not stop the run, while a search replayed (its commands again,
in any order) does. So is the last turn when its action only reads (a
file viewed, a `grep`, a listing: no write, no program run) and names a word
(three characters or more, numbers aside) no earlier action of the window
named: a new search, its answer not told yet, is judged with what it finds
(after re-reading a window shown before, a `grep` for a name not asked about
yet). Reading new text is no progress when the agent does not
read it: `same_answers` answers in a row that say the same word for word,
numbers aside, each moving its call's numbers (one sentence and one view call
whose window moves each time), stop the run whatever they are told; the same
call again (a poll) is judged by what it is told. A turn under `min_chars` (a
bare command and its short output: a folder listing, "ok") is too short to
judge: it is kept, and it ends a run of stale turns when its output, or its
command, is new; a short turn that brings nothing new does not (a fix-and-test
loop whose test runs are short is still a loop). An edit's result shows only
in the output of the commands run after it: when one of the last four turns
wrote an edit no earlier turn wrote (an editor's `str_replace`, `edit 46:46`,
`sed -i`, a heredoc written to a file), the turns between it and the last run
checks (commands run again: the script, the tests) and the agent's checks
printed two different things after its edits in the window, the stale turns
in a row that stop the run are `turns` + 2, so the new edit is judged with
what its checks print (on real fix-and-test loops, a stop two calls later);
a check that prints the same whatever is edited, and edits refused one after
another, stop after `turns`. Judged only where no tool is declared and no tool
result sent; a short answer (a selector naming the next
speaker, "ok") is neither judged nor kept, and a request sent again unchanged
(a retry) is not judged twice.

Defaults. The same as `novelty`'s, so a text agent is stopped about as early as
its structured twin: one turn later, because a turn is judged with its answer.
A stuck ReAct step ("Thought: let me search again. Action: search[lowest fare
LIS BER]" and the same results) is 5-15% new; a step that learns something, or
a group-chat turn that drafts, reviews or decides something new, 40-100%. On
real coding agents (docs/corpus.md), stuck turns are 0-19% new and what a
stuck turn is told at most 25% new; a folder listing, a test run whose result
changed, a new file are told 50-100% new. An agent paging through a file under
one sentence repeats its answer 20-65 times in a row; a healthy one up to 5
times, 12 to read a 1,000-line file a page at a time.

False positives. What comes close: a chat whose user pastes the same error
again (the model's new answer keeps the turn over 20% new unless it repeats
itself too); a group chat's agents quoting each other (only the quote is old:
each reply's own words are new); a selector re-sending the whole transcript to
pick a speaker (its answer is a name: not judged). Still stopped on real
sessions: an agent going back over code it was shown earlier in the window (a whole file
viewed once, then its functions window by window), whose windows are old text.
What comes close to paging: an agent stepping through a list
by its numbers (job 1, job 2, ...) under one sentence, `same_answers` times in a
row; an agent polling (the same call again) is not counted.
"""

from __future__ import annotations

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
    observation,
)
from runguard.detectors.support.normalize import clip
from runguard.detectors.support.shingles import MAX_CHARS, kept_shingles, pack, packed_sample, stale_shares
from runguard.detectors.support.window import Turn, asks, awaited, fresh, probe, same_answers
from runguard.detectors.support.written import action, asked, edits, places, quiet, wording
from runguard.proxy.core.events import digest
from runguard.proxy.core.ops import Get, Push, Put, Scope

LABEL_CHARS = 24  # speaker labels kept in state
NOTHING: frozenset[bytes] = frozenset()


class TextLoopConfig(DetectorConfig):
    max_new_share: float = Field(
        0.2,
        ge=0,
        lt=1,
        description="Share of a turn's shingles (the texts it was sent and its answer) not seen before in the "
        "conversation at or under which the turn is stale. Real coding agents' stuck turns are 0-19% new.",
        json_schema_extra={"tighten": "higher"},
    )
    fresh_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Share of what a turn was told (the harness's own lines left out) that is new in the "
        "conversation at or above which the turn learned something and is not stale, whatever its answer "
        "says; for a turn too short to judge, the same share of its answer. Real stuck turns reach 25%.",
        json_schema_extra={"tighten": "higher"},
    )
    turns: int = Field(
        3,
        ge=1,
        le=8,
        description="Stale turns in a row that stop the run (from its next request); two more while a new edit "
        "waits for its check, in a run whose checks print something else after its edits.",
        json_schema_extra={"tighten": "lower"},
    )
    min_chars: int = Field(
        200,
        ge=0,
        description="Characters a turn (texts sent and answer) needs to be judged stale; a shorter one (a "
        "bare command and its short output) is kept, and ends a run of stale turns when it is fresh.",
    )
    min_answer_chars: int = Field(
        40,
        ge=0,
        description="Characters the answer needs for the turn to be judged: a shorter one (a selector naming the "
        "next speaker, an acknowledgement) is neither judged nor kept.",
    )
    min_shingles: int = Field(8, ge=1, description="3-word shingles (up to 48 are kept) a turn needs to be judged.")
    same_answers: int = Field(
        14,
        ge=2,
        le=32,
        description="Answers in a row that say the same word for word, numbers aside, each moving its call's numbers, "
        "that stop the run (from its next request), whatever they are told: the same sentence and the same call "
        "with another window each time is paging through a file without looking for anything (the same call "
        "again, a poll, is not counted). More than `window` never stops. Real "
        "sessions: a healthy one repeats an answer up to 5 times in a row, 12 to read a 1,000-line file a page "
        "at a time; paging runaways 20-65 times.",
        json_schema_extra={"tighten": "lower"},
    )
    window: int = Field(
        16,
        ge=2,
        le=32,
        description="Turns remembered per conversation (a sample of up to 48 shingles each): the history a turn "
        "is compared with.",
    )


class TextLoop(Detector[TextLoopConfig]):
    """Before a request: the edges of the run's last observations. After each answer: the turn joins the
    conversation's window, and the last full turns are judged against the turns before them."""

    name = "text_loop"
    per_thread = True
    Config = TextLoopConfig

    def plan_request(self, seen: RequestSeen, cfg: TextLoopConfig) -> Plan:
        request = seen.request
        if request.tool_names or request.new_results or not request.new_user_texts:
            return {}
        return {"edges": Get(Scope.RUN, "edges")}

    def plan_response(self, seen: ResponseSeen, cfg: TextLoopConfig) -> Plan:
        request, response = seen.request, seen.response
        if request.tool_names or request.new_results or response.tool_calls:
            return {}  # tools in the API's fields: the tool detectors judge them
        if seen.upstream_failed or seen.facts.duplicate or len(response.text.strip()) < cfg.min_answer_chars:
            return {}
        texts = request.new_user_texts
        short = sum(map(len, texts)) + len(response.text) < cfg.min_chars
        said = kept_shingles([response.text[:MAX_CHARS]], NOTHING)  # the answer and the texts each read in full
        heard = kept_shingles([text[:MAX_CHARS] for text in texts], NOTHING)
        news, changed, edges = observation.read(texts, seen.before.get("edges"), heard)
        kept = packed_sample(said | heard)
        told = pack(news)
        own = packed_sample(said) if short else ""
        speaker = clip(request.agent.steady, LABEL_CHARS).replace("~", "-")
        turn = digest(f"{seen.facts.request_index}:{request.message_count}", 4)
        spots = ",".join(sorted(places(response.text)))
        acted = f"{action(response.text)}~{'q' if quiet(texts) else '-'}~{wording(response.text)}"
        reads, words = asked(response.text)
        acted += f"~{'e' if edits(response.text) else '-'}~{'r' if reads else '-'}~{','.join(sorted(words))}"
        item = f"{turn}~{speaker}~{'s' if short else 'f'}~{kept}~{told}~{own}~{changed}~{spots}~{acted}"
        plan: dict[str, Push | Put] = {"turns": Push(Scope.RUN, "turns", (item,), keep=cfg.window, unique=True)}
        if texts:
            plan["edges"] = Put(Scope.RUN, "edges", edges)
        return plan

    def check_response(self, seen: ResponseSeen, got: Results, cfg: TextLoopConfig) -> Verdict | None:
        window = got.get("turns")
        if not isinstance(window, tuple) or not window:
            return None
        turns = [Turn.parse(item) for item in window]
        if (same := same_answers(turns)) >= cfg.same_answers:
            speakers = [turn.speaker for turn in turns[-same:]]
            return self.verdict(
                f"the model gave the same answer {same} times in a row, numbers aside "
                f"(at most {cfg.same_answers - 1}; speakers {', '.join(dict.fromkeys(speakers))})",
                shows=Evidence(agents=tuple(speakers)),
                same_answers=same,
                turns=cfg.turns,
                compared_turns=len(turns) - 1,
            )
        full = [at for at, turn in enumerate(turns) if not turn.short]
        count = cfg.turns + 2 * awaited(turns)  # a new edit: its result is judged before the run is stopped
        if turns[-1].short or len(full) <= count:
            return None  # judged after a full turn; the first is never stale: `turns` stale ones need one more
        shares = stale_shares([turns[at].kept for at in full], count, cfg.min_shingles, cfg.max_new_share)
        if shares is None or any(fresh(turns, at, cfg.fresh_share) for at in range(full[-count], len(turns))):
            return None
        probes = sum(probe(turns, at) for at in full[-count:]) + asks(turns, len(turns) - 1)
        if 2 * probes > count:
            return None  # mostly new commands that each printed nothing: a search, not a loop
        speakers = [turns[at].speaker for at in full[-count:]]
        return self.verdict(
            f"the conversation added almost nothing new {count} turns in a row "
            f"(new shares {', '.join(f'{s:.0%}' for s in shares)}, at most {cfg.max_new_share:.0%}; "
            f"speakers {', '.join(dict.fromkeys(speakers))})",
            shows=Evidence(agents=tuple(speakers)),
            new_shares=shares,
            turns=cfg.turns,
            compared_turns=len(full) - 1,
        )
