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

import re
from collections.abc import Sequence
from dataclasses import dataclass

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
from runguard.detectors.support.commands import trivial_output
from runguard.detectors.support.normalize import clip
from runguard.detectors.support.shingles import MAX_CHARS, pack, sample, shingles, stale_shares, unpack
from runguard.proxy.core.events import ToolResult, digest
from runguard.proxy.core.ops import Get, Push, Put, Scope

LABEL_CHARS = 24  # speaker labels kept in state
NOTHING: frozenset[bytes] = frozenset()
MAX_TARGETS = 8  # places an action names, kept per turn
_BLOCK = re.compile(r"```[\w+-]*\n(.*?)```", re.DOTALL)  # a fenced block: how text agents write their action
_PLACE = re.compile(r"\d+|[\w.-]*/[\w./-]+|[\w-]+\.[a-z]{1,5}\b")  # a number, a path, a file name
_CALL = re.compile(r"<function=[^>\n]{1,64}>.*?</function>", re.DOTALL)  # a call written as XML-style text
_EDIT = re.compile(  # an action that writes a file: an editor's write, `edit N:M`, `sed -i`, a patch, a heredoc
    r"<parameter=command>\s*(?:str_replace|create|insert)\b|^\s*edit\s+\d+(?::\d+)?\s*$|\bsed\s+-i|\btee\s"
    r"|\b(?:git\s+apply|patch\s+-p|apply_patch)\b|<<-?\s*['\"]?\w+['\"]?\s*>\s*\S|\bcat\s*>\s*\S",
    re.MULTILINE,
)
_SPACES = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")
_TAG = re.compile(r"</?(?:function|parameter)(?:=[^>\n]{0,64})?>")  # an XML-style call's own tags
_PARAMETER = re.compile(r"<parameter=(\w{1,32})>(.*?)</parameter>", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")  # a name a command asks for: a symbol, a file, a folder
MAX_WORDS = 24  # words of a command kept per turn
_STEP = re.compile(r"&&|\|\||[;|\n]")  # where a shell command chains the next one
_WRITES = re.compile(r"(?<![0-9&])>(?!&|\s*/dev/null)")  # an output written to a file: `> f`, `>> f`
_READER = re.compile(  # programs (and text agents' own commands) that only read
    r"cat|head|tail|nl|wc|less|more|e?grep|fgrep|rg|ag|ack|find|ls|tree|file|stat|pwd|cd|echo|which|type|sed|awk"
    r"|cut|sort|uniq|diff|cmp|open|goto|scroll_(?:up|down)|search_(?:file|dir)|find_file"
)
_GIT_READER = re.compile(r"log|show|diff|status|grep|blame|ls-files")  # git's subcommands that only read


def places(answer: str) -> frozenset[str]:
    """Where the answer's action works: the numbers, paths and file names of the first line of its last fenced
    block ("edit 46:46", "open src/Parser.java"), hashed; none when it writes no block."""
    blocks = _BLOCK.findall(answer[:MAX_CHARS])
    lines = blocks[-1].strip().split("\n", 1) if blocks else []
    found = _PLACE.findall(lines[0]) if lines else []
    return frozenset(digest(place, 2) for place in found[:MAX_TARGETS])


def written(answer: str) -> str:
    """The action the answer writes: its last `<function=...>` call, else its last fenced block; "" for none."""
    text = answer[:MAX_CHARS]
    found = _CALL.findall(text) or _BLOCK.findall(text)
    return found[-1] if found else ""


def action(answer: str) -> str:
    """A digest of the action the answer writes, spaces collapsed; "" when it writes none."""
    found = written(answer)
    return digest(_SPACES.sub(" ", found).strip(), 4) if found else ""


def edits(answer: str) -> bool:
    """Whether the answer's action writes a file: an editor's `str_replace`/`create`/`insert`, `edit 46:46`,
    `sed -i`, a patch applied, a heredoc written to a file."""
    return bool(_EDIT.search(written(answer)))


def wording(answer: str) -> str:
    """A digest of the answer's words, its numbers and spacing aside: one answer for "view lines 620-630" and
    then "view lines 610-620" under the same sentence."""
    return digest(_DIGITS.sub("#", _SPACES.sub(" ", answer[:MAX_CHARS])).strip(), 4)


def _reads(command: str) -> bool:
    """Whether a shell command (or a text agent's own command: `open`, `search_dir`) only reads: each of its
    chained steps runs a reading program (`grep`, `sed -n`, `git log`, ...), none writes to a file (`> f`,
    `sed -i`, `find -delete`)."""
    steps = [step for step in map(str.split, _STEP.split(command)) if step]
    if not steps or _WRITES.search(command):
        return False
    for step in steps:
        program = step[0].rsplit("/", 1)[-1]
        git = program == "git" and len(step) > 1 and _GIT_READER.fullmatch(step[1])
        if not (_READER.fullmatch(program) or git):
            return False
        if "-delete" in step or ("sed" in step and any(word.startswith(("-i", "--in-place")) for word in step)):
            return False
    return True


def asked(answer: str) -> tuple[bool, frozenset[str]]:
    """Whether the answer's action only reads (a file viewed, a `grep`, a listing) and the names it asks
    about (its words of three characters or more, numbers and an XML-style call's tags aside), hashed."""
    found = written(answer)
    if not found:
        return False, frozenset()
    if found.startswith("<function="):  # an editor's call names a path, a shell's a command
        parameters = dict(_PARAMETER.findall(found))
        command = parameters.get("command", "").strip()
        reads = command == "view" if "path" in parameters else _reads(command)
    else:
        reads = _reads(found)
    words = dict.fromkeys(word.casefold() for word in _WORD.findall(_TAG.sub(" ", found)))
    return reads, frozenset(digest(word, 2) for word in list(words)[:MAX_WORDS])


def quiet(texts: Sequence[str]) -> bool:
    """Whether what the turn was told only says the last command ran (it printed nothing): a `grep` that
    matched nothing, a file written (`commands.trivial_output`)."""
    return bool(texts) and trivial_output(ToolResult(None, None, "\n".join(texts)))


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


@dataclass(frozen=True, slots=True)
class _Turn:
    """One remembered turn: who spoke, whether it was too short to judge, samples of its shingles (all of
    them; what it was told, the harness's lines left out; a short turn's answer), a digest of what it was
    told, and the places its action works on."""

    speaker: str
    short: bool
    kept: frozenset[int]
    told: frozenset[int]
    said: frozenset[int]
    heard: str = ""
    places: frozenset[str] = frozenset()
    action: str = ""
    quiet: bool = False
    wording: str = ""
    edits: bool = False
    reads: bool = False
    words: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, item: str) -> _Turn:
        parts = item.split("~")
        if len(parts) < 8:  # stored before observations were kept: a full turn
            return cls(parts[1] if len(parts) > 1 else "", False, unpack(parts[-1]), frozenset(), frozenset())
        spots = frozenset(filter(None, parts[7].split(",")))
        told = (unpack(parts[3]), unpack(parts[4]), unpack(parts[5]), parts[6], spots)
        acted = (parts[8], parts[9] == "q", parts[10]) if len(parts) >= 11 else ("", False, "")
        edited = len(parts) >= 12 and parts[11] == "e"
        reads, words = (
            (parts[12] == "r", frozenset(filter(None, parts[13].split(","))))
            if len(parts) >= 14
            else (False, frozenset())
        )
        return cls(parts[1], parts[2] == "s", *told, *acted, edited, reads, words)


def _fresh(turns: Sequence[_Turn], at: int, share: float) -> bool:
    """Whether turn `at` brought something new: what it was told (or, too short to judge, what it said) is at
    least `share` new in the turns before it; or it was told something else than the turn before, and its
    action works on places no earlier action named (an edit at another line, another file)."""
    turn = turns[at]
    seen: set[int] = set()
    worked: set[str] = set()
    for before in turns[:at]:
        seen |= before.kept | before.told
        worked |= before.places
    if at and turn.places and turn.heard != turns[at - 1].heard and worked.isdisjoint(turn.places):
        return True
    for part in (turn.told, turn.said if turn.short else frozenset()):
        new = len(part - seen)
        if new and new >= share * len(part):
            return True
    return False


def _probe(turns: Sequence[_Turn], at: int) -> bool:
    """Whether turn `at` was told only that its last command printed nothing and does something no turn before
    it in the window did (another `grep` after one that matched nothing): it says nothing either way, so it is
    not judged and does not end a run of stale turns."""
    turn = turns[at]
    return turn.quiet and bool(turn.action) and all(before.action != turn.action for before in turns[:at])


def _rerun(turns: Sequence[_Turn], at: int) -> bool:
    """Whether turn `at` runs again an action of a turn before it (a test run after an edit)."""
    return bool(turns[at].action) and any(before.action == turns[at].action for before in turns[:at])


def _awaited(turns: Sequence[_Turn]) -> bool:
    """Whether one of the last four turns wrote an edit no turn before it wrote and the turns between it and
    the last run checks (commands run again: the script, the tests), in a run whose edits change what its
    checks print (a check run right after an edit printed two different things in the window): the edit's
    result is in the output of its checks, not all told yet. A check that prints the same whatever is
    edited, or edits without a check (refused, retried), are judged by what each turn is told."""
    checks = range(1, len(turns) - 1)
    printed = {turns[n + 1].heard for n in checks if turns[n - 1].edits and not turns[n].edits and _rerun(turns, n)}
    for at in range(len(turns) - 1, max(len(turns) - 5, 0) if len(printed) > 1 else len(turns), -1):
        if turns[at].edits and not _rerun(turns, at):
            return True
        if at < len(turns) - 1 and (turns[at].edits or not _rerun(turns, at)):
            return False
    return False


def _asks(turns: Sequence[_Turn], at: int) -> bool:
    """Whether turn `at`'s action only reads and names a word no earlier action of the window named (a `grep`
    for another symbol, a file not opened before): it seeks something new, and what it finds is not told yet."""
    turn = turns[at]
    named: set[str] = set()
    for before in turns[:at]:
        named |= before.words
    return turn.reads and not turn.words <= named


def _same_answers(turns: Sequence[_Turn]) -> int:
    """How many of the last turns gave the last one's answer, numbers aside, each moving its call's numbers
    (turns stored without it: none). The same call again is a poll, judged by what it is told."""
    last = turns[-1].wording
    count = 0
    for at in range(len(turns) - 1, -1, -1):
        turn = turns[at]
        if not last or turn.wording != last or (count and turn.action == turns[at + 1].action):
            break
        count += 1
    return count


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
        said = shingles([response.text[:MAX_CHARS]], NOTHING)  # the answer and the texts each read in full
        heard = shingles([text[:MAX_CHARS] for text in texts], NOTHING)
        news, changed, edges = observation.read(texts, seen.before.get("edges"), heard)
        kept = pack(sample(said | heard))
        told = pack(news)
        own = pack(sample(said)) if short else ""
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
        turns = [_Turn.parse(item) for item in window]
        if (same := _same_answers(turns)) >= cfg.same_answers:
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
        count = cfg.turns + 2 * _awaited(turns)  # a new edit: its result is judged before the run is stopped
        if turns[-1].short or len(full) <= count:
            return None  # judged after a full turn; the first is never stale: `turns` stale ones need one more
        shares = stale_shares([turns[at].kept for at in full], count, cfg.min_shingles, cfg.max_new_share)
        if shares is None or any(_fresh(turns, at, cfg.fresh_share) for at in range(full[-count], len(turns))):
            return None
        probes = sum(_probe(turns, at) for at in full[-count:]) + _asks(turns, len(turns) - 1)
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
