"""`novelty`: a tool whose results bring almost nothing new, turn after turn, however it is asked.

An agent that searches again and again in new words ("cheapest flight Lisbon
to Berlin in May", "lowest fare LIS BER May", ...) and gets back what it
already has, re-fetches one document under other ids, or re-asks a question
that was answered, makes no progress, though no two of its calls or results
are the same. Each tool result is read as word shingles (`shingles`: volatile
keys and the parts that only echo the call's arguments left out) and compared
with the earlier results of the same kind of tool in the conversation (tools
sharing a word of a kind: every `*search*` tool is one kind). A turn whose
results of a kind are at least 80% shingles already received from it is stale;
`turns` stale turns in a row stop the run. Not judged: results under
`min_chars` (an acknowledgement, a status line: too little to tell), and a
call with the same arguments as the kind's previous one (a poll: its answer is
`non_progress`'s).

What a shell command prints is read as the agent reads it: an agent editing its
code and running its reproduction script again gets output that shares its
template with the last run, and the few lines that changed (a count of passing
tests, one traceback line) are its progress. A turn of commands is stale only
when it printed no set of lines it had not printed before (`printed`): the
same output again, or the two outputs a flipped line alternates between.

An agent that calls its tools in the API's tool fields but replays its history
as text (smolagents' `ToolCallingAgent`: "Calling tools: [...]" as an assistant
message, "Observation: ..." or "Error: ... Now let's retry" as user text) sends
no tool result back: the user text that answers a response's calls is read as
their results (`replayed`), and judged as early as results in the tool fields.

Defaults. A search for something new shares its layout with the last one
(keys, the echo, a footer) but little else: paging a listing, a narrowed query
or another document bring 60-100% new shingles, a rephrased search over the
same results 0-20%, so the line sits at 20%. Three stale turns in a row (four
results of the kind) stop the run: one or two stale answers are an agent
checking what it found, as careful agents do. History is the conversation's
last `window` turns with results (each a bottom-48 sample of its shingles, about
190 bytes): the results of the last dozen or so steps, which is what a model
rephrasing a question is circling in, in at most 3 KB of state.

False positives. What comes close: a poll of a large status object whose
counter moves (same arguments: not judged); an agent re-running its own test
script after each edit, a few lines of its output changing (a line never
printed before is progress); a writer/editor loop whose
feedback shares its template (each draft's feedback names new passages, and
the draft it echoes is left out); a listing whose pages share their keys (the
key is part of each unit, the values differ); several parallel searches of
one turn overlapping each other (a turn counts once, its results merged); a
coding agent's probes whose short answers sit beside text every result carries
(an interpreter's warning printed on every start, an editor's confirmation
template): a turn is stale only if it is still stale without that text
(`constant`: what two different answers share), and a command's output is
never taken for an echo of its script (a probe prints its script's labels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from pydantic import Field

from runguard.detectors.support import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseSeen,
    Results,
    RunFacts,
    ShownCall,
    Verdict,
)
from runguard.detectors.support.commands import is_command_tool
from runguard.detectors.support.constant import without_constant
from runguard.detectors.support.normalize import DEFAULT_VOLATILE_KEYS, call_args_digest, lowered, tag
from runguard.detectors.support.printed import printed_anew, printed_digest
from runguard.detectors.support.replayed import (
    Asked,
    answers,
    echo_of,
    may_answer,
    replayed_result,
    tail_digest,
    tail_text,
    without_echo,
)
from runguard.detectors.support.shingles import echo_words, kept_shingles, packed_sample, stale_shares, units_of, unpack
from runguard.detectors.support.turns import paired_results, result_uniq, tool_work
from runguard.proxy.core.events import RequestInfo, ToolCall, ToolResult, digest, is_transfer
from runguard.proxy.core.ops import Get, Push, Put, Scope

KINDS = {
    "search": ["search", "find", "lookup", "query", "retrieve"],
    "fetch": ["fetch", "get", "read", "open", "browse", "download", "scrape", "crawl", "load", "visit"],
}
KNOWN_TOOLS = 4096  # tool names whose kind a config remembers
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_WORD = re.compile(r"[a-z0-9]+")


class NoveltyConfig(DetectorConfig):
    max_new_share: float = Field(
        0.2,
        ge=0,
        lt=1,
        description="Share of a turn's shingles (of one kind of tool) not received before at or under which the "
        "turn is stale: new searches, pages and documents bring 60-100% new, a rephrased search over the same "
        "results 0-20%.",
        json_schema_extra={"tighten": "higher"},
    )
    turns: int = Field(
        3,
        ge=1,
        le=8,
        description="Stale turns of one kind of tool in a row that stop the run (its first result is never "
        "stale: four results at the default).",
        json_schema_extra={"tighten": "lower"},
    )
    min_chars: int = Field(
        200,
        ge=0,
        description="Results shorter than this are not judged: an acknowledgement or a status line carries too "
        "little to tell new from old.",
    )
    min_shingles: int = Field(
        8,
        ge=1,
        description="3-word shingles (up to 48 are kept) a turn needs to be judged.",
    )
    window: int = Field(
        16,
        ge=2,
        le=32,
        description="Turns with results remembered per conversation, of every kind of tool (a sample of up to "
        "48 shingles each): the history a turn is compared with.",
    )
    kinds: dict[str, list[str]] = Field(
        default_factory=lambda: {kind: list(words) for kind, words in KINDS.items()},
        description="Kinds of tools compared together: a tool whose name holds one of a kind's words "
        "(split at _, - and camelCase) is of that kind; any other tool is a kind of its own.",
    )
    volatile_keys: list[str] = Field(
        default_factory=lambda: list(DEFAULT_VOLATILE_KEYS),
        description="JSON keys left out of results (any depth, any letter case), as `non_progress` does.",
    )

    @cached_property
    def volatile(self) -> frozenset[str]:
        return lowered(self.volatile_keys)

    @cached_property
    def known_kinds(self) -> dict[str, str]:
        """Tool names already sorted into kinds (`kind_of` fills it)."""
        return {}

    @cached_property
    def kind_tags(self) -> dict[str, str]:
        """Kinds' tags already computed (`kind_tag` fills it)."""
        return {}

    @cached_property
    def word_kinds(self) -> dict[str, str]:
        """Each kind word, and the kind it names (the first kind listing it)."""
        found: dict[str, str] = {}
        for kind, words in self.kinds.items():
            for word in words:
                found.setdefault(word.lower(), kind)
        return found


def kind_of(tool: str, cfg: NoveltyConfig) -> str:
    """The kind of a tool: the first word of its name that names a kind, else the name itself. Kept per
    config for the first `KNOWN_TOOLS` tool names (a run calls the same few tools again and again)."""
    known = cfg.known_kinds
    found = known.get(tool)
    if found is None:
        words = _NAME_WORD.findall(_CAMEL.sub("_", tool).lower())
        kinds = cfg.word_kinds
        found = next((kinds[word] for word in words if word in kinds), tool)
        if len(known) < KNOWN_TOOLS:
            known[tool] = found
    return found


def kind_tag(kind: str, cfg: NoveltyConfig) -> str:
    """`tag(kind)`, kept per config for the first `KNOWN_TOOLS` kinds (state keys and window items name it)."""
    known = cfg.kind_tags
    found = known.get(kind)
    if found is None:
        found = tag(kind)
        if len(known) < KNOWN_TOOLS:
            known[kind] = found
    return found


@dataclass
class Turn:
    """One turn's results of one kind: their merged shingles, their calls' arguments, and who they were;
    for a turn of shell commands, what they printed (`printed`, one unit list per result)."""

    kind: str
    uniq: str
    hashes: set[int] = field(default_factory=set)
    args: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    commands: bool = True
    printed: list[str] = field(default_factory=list)
    key: str = ""  # the kind's tag, when the caller has it already

    def item(self) -> str:
        """The turn as its window keeps it: kind, uniq, arguments' digest, shingle sample, and what its
        commands printed (empty unless every call of the turn runs a shell command)."""
        args = digest("\x00".join(sorted(self.args)), 4)
        lines = printed_digest(self.printed) if self.commands else ""
        return f"{self.key or tag(self.kind)}~{self.uniq}~{args}~{packed_sample(self.hashes)}~{lines}"

    def add(
        self,
        result: ToolResult,
        call: ToolCall | None,
        cfg: NoveltyConfig,
        command: bool,
        replayed: Asked | None = None,
    ) -> None:
        """Adds a result (of `call`; or replayed in text, its calls' words `replayed.echo`)."""
        # A command's output that repeats its script's words (the labels a probe prints) is its answer, not an echo.
        echo = frozenset() if command else echo_words(call)
        units = units_of(result, cfg.volatile)
        if replayed is not None and not command:
            units = without_echo(units, replayed.echo)
        found = kept_shingles(units, echo)
        if self.hashes:
            self.hashes |= found
        else:
            self.hashes = found  # a turn's first result (most turns have one): its set, not a copy into an empty one
        self.commands = self.commands and command
        if self.commands:
            self.printed.extend(units)
        self.args.append(call_args_digest(call) if call is not None else "-")
        self.tools.append(result.name or "-")


def _turns(request: RequestInfo, cfg: NoveltyConfig) -> dict[str, Turn]:
    """This request's new results grouped by kind of tool (tag -> turn); results too short left out."""
    found: dict[str, Turn] = {}
    for position, (call, result) in enumerate(paired_results(request)):
        if result.name is None or is_transfer(result.name) or len(result.content) < cfg.min_chars:
            continue
        kind = kind_of(result.name, cfg)
        key = kind_tag(kind, cfg)
        turn = found.get(key)
        if turn is None:
            turn = found[key] = Turn(kind, result_uniq(request, result, position), key=key)
        turn.add(result, call, cfg, is_command_tool(call))
    return found


def _replayed_turn(request: RequestInfo, asked: Asked, texts: list[str], cfg: NoveltyConfig) -> Turn:
    """The request's user texts that answer the calls `asked` describes (`replayed.answers`), as their results."""
    turn = Turn(asked.kind, tag(f"{request.message_count}.{sum(map(len, request.new_user_texts))}.text"))
    for text in texts:
        turn.add(replayed_result(text, asked.tools[0] if asked.tools else None), None, cfg, asked.command, asked)
    turn.tools = list(asked.tools) or ["-"]
    turn.args = [asked.args] * len(turn.tools)
    return turn


def _asked(seen: ResponseSeen, cfg: NoveltyConfig) -> Asked | None:
    """The response's calls, kept for a request that may answer them in text: only after a request whose last
    assistant turn made no call in the tool fields (an agent's first step, or one replaying its calls as text)."""
    request = seen.request
    if request.prior_calls or not request.tool_names or seen.upstream_failed:
        return None
    calls = tool_work(seen.response)
    if not calls:
        return None
    kinds = sorted({kind_of(call.name, cfg) for call in calls})
    text = tail_text(request)
    return Asked(
        agent=request.agent.fingerprint[:8],
        turn=request.assistant_turns,
        tail=len(text),
        tail_digest=tail_digest(text),
        command=all(is_command_tool(call) for call in calls),
        args=digest("\x00".join(sorted(call_args_digest(call) for call in calls)), 4),
        kind="+".join(kinds),
        tools=tuple(sorted({call.name for call in calls})),
        echo=echo_of(calls),
    )


class Novelty(Detector[NoveltyConfig]):
    """Pre-flight: each kind's turn is appended to its window, and judged against the turns before it."""

    name = "novelty"
    per_thread = True
    Config = NoveltyConfig
    reads_results = True

    def plan_request(self, seen: RequestSeen, cfg: NoveltyConfig) -> Plan:
        if may_answer(seen.request, cfg.min_chars):
            # Maybe the results of the previous response's calls, in text: judged if that response called tools.
            return {"asked": Get(Scope.RUN, "asked"), "window": Get(Scope.RUN, "turns")}
        turns = _turns(seen.request, cfg)
        if not turns:
            return {}
        plan = {}
        mine: dict[str, tuple[str, Turn]] = {}
        for kind, turn in turns.items():
            item = turn.item()
            mine[kind] = (item, turn)
            plan[f"turns.{kind}"] = Push(Scope.RUN, "turns", (item,), keep=cfg.window, unique=True)
        seen.request.derived[f"novelty.{id(cfg)}"] = mine
        return plan

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: NoveltyConfig) -> Verdict | None:
        if "asked" in got:
            return self._check_replayed(seen, facts, got, cfg)
        mine: dict[str, tuple[str, Turn]] = seen.request.derived.get(f"novelty.{id(cfg)}", {})
        for local, window in got.items():
            kind = local.rpartition(".")[2]
            if kind not in mine or not isinstance(window, tuple):
                continue
            item, turn = mine[kind]
            verdict = self._judge(kind, item, turn, window, cfg, facts.request_index)
            if verdict is not None:
                return verdict
        return None

    def _check_replayed(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: NoveltyConfig) -> Verdict | None:
        """The request's user texts, judged as the results of the previous response's calls when it holds
        those calls' assistant turn (as text) and nothing more; the turn joins the window after the response."""
        request = seen.request
        asked = Asked.loads(got.get("asked"))
        texts = answers(request, asked) if asked is not None else None
        if asked is None or texts is None or sum(map(len, texts)) < cfg.min_chars:
            return None  # a user's message, not the answer to calls (or too short to judge)
        turn = _replayed_turn(request, asked, texts, cfg)
        item = turn.item()
        request.derived[f"novelty.replayed.{id(cfg)}"] = item
        window = got.get("window")
        window = window if isinstance(window, tuple) else ()
        if item not in window:
            window = (*window, item)[-cfg.window :]
        return self._judge(tag(asked.kind), item, turn, window, cfg, facts.request_index)

    def plan_response(self, seen: ResponseSeen, cfg: NoveltyConfig) -> Plan:
        plan: dict[str, Push | Put] = {}
        item = seen.request.derived.get(f"novelty.replayed.{id(cfg)}")
        if isinstance(item, str):
            plan["window"] = Push(Scope.RUN, "turns", (item,), keep=cfg.window, unique=True)
        asked = _asked(seen, cfg)
        if asked is not None:
            plan["asked"] = Put(Scope.RUN, "asked", asked.dumps())
        return plan

    def _judge(
        self, kind: str, item: str, turn: Turn, window: tuple[str, ...], cfg: NoveltyConfig, seq: int
    ) -> Verdict | None:
        if len(window) <= cfg.turns or item not in window:
            return None  # fewer turns than a stale streak needs (a run's first requests), or the turn is not there
        # The kind's turns up to this one (a re-sent request finds its turn where it was first pushed).
        end = len(window) - 1 - window[::-1].index(item)
        packs = [
            (parts[2], parts[3], parts[4] if len(parts) > 4 else "")
            for parts in (entry.split("~", 4) for entry in window[: end + 1])
            if parts[0] == kind and len(parts) > 3
        ]
        if len(packs) <= cfg.turns:
            return None  # the first turn of a kind is never stale: `turns` stale ones need one more
        if any(packs[index][0] == packs[index - 1][0] for index in range(len(packs) - cfg.turns, len(packs))):
            return None  # the same call again (a poll)
        parsed = [unpack(packed) for _, packed, _ in packs]  # only now: most turns end above
        shares = stale_shares(parsed, cfg.turns, cfg.min_shingles, cfg.max_new_share)
        if shares is None:
            return None  # too little to judge, or a turn that brought enough new
        beside = without_constant(parsed, cfg.min_shingles)
        if stale_shares(beside, cfg.turns, cfg.min_shingles, cfg.max_new_share) is None:
            return None  # stale only by the text every result carries (`constant`): what changes beside it is new
        if printed_anew([lines for _, _, lines in packs], cfg.turns):
            return None  # a command printed a line it never printed before: a count, a traceback line moved
        tools = sorted(set(turn.tools))
        shown = tuple(
            ShownCall(tool, args if args != "-" else None, request_seq=seq)
            for tool, args in zip(turn.tools, turn.args, strict=True)
        )
        return self.verdict(
            f"tool '{tools[0]}' brought almost nothing new {cfg.turns} turns in a row "
            f"(new shares {', '.join(f'{s:.0%}' for s in shares)}, at most {cfg.max_new_share:.0%})",
            shows=Evidence(calls=shown),
            tools=tools,
            kind=turn.kind,
            new_shares=shares,
            turns=cfg.turns,
            compared_turns=len(parsed) - 1,
        )
