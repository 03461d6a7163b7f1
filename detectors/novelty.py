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
counter moves (same arguments: not judged); a writer/editor loop whose
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

from runguard.detectors.support.base import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    Results,
    RunFacts,
    ShownCall,
    Verdict,
)
from runguard.detectors.support.commands import is_command_tool
from runguard.detectors.support.constant import without_constant
from runguard.detectors.support.normalize import DEFAULT_VOLATILE_KEYS, call_args_digest, lowered, tag
from runguard.detectors.support.shingles import echo_words, pack, sample, shingles, stale_shares, units_of, unpack
from runguard.detectors.support.turns import paired_results, result_uniq
from runguard.proxy.core.events import RequestInfo, ToolCall, ToolResult, digest, is_transfer
from runguard.proxy.core.ops import Push, Scope

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


@dataclass
class Turn:
    """One turn's results of one kind: their merged shingles, their calls' arguments, and who they were."""

    kind: str
    uniq: str
    hashes: set[int] = field(default_factory=set)
    args: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)


def _turns(request: RequestInfo, cfg: NoveltyConfig) -> dict[str, Turn]:
    """This request's new results grouped by kind of tool (tag -> turn); results too short left out."""
    found: dict[str, Turn] = {}
    for position, (call, result) in enumerate(paired_results(request)):
        if result.name is None or is_transfer(result.name) or len(result.content) < cfg.min_chars:
            continue
        kind = kind_of(result.name, cfg)
        key = tag(kind)
        turn = found.get(key)
        if turn is None:
            turn = found[key] = Turn(kind, result_uniq(request, result, position))
        turn.hashes |= _read(result, call, cfg)
        turn.args.append(call_args_digest(call) if call is not None else "-")
        turn.tools.append(result.name)
    return found


def _read(result: ToolResult, call: ToolCall | None, cfg: NoveltyConfig) -> set[int]:
    # A command's output that repeats its script's words (the labels a probe prints) is its answer, not an echo.
    echo = frozenset() if is_command_tool(call) else echo_words(call)
    return shingles(units_of(result, cfg.volatile), echo)


class Novelty(Detector[NoveltyConfig]):
    """Pre-flight: each kind's turn is appended to its window, and judged against the turns before it."""

    name = "novelty"
    per_thread = True
    Config = NoveltyConfig
    reads_results = True

    def plan_request(self, seen: RequestSeen, cfg: NoveltyConfig) -> Plan:
        turns = _turns(seen.request, cfg)
        if not turns:
            return {}
        plan = {}
        mine: dict[str, tuple[str, Turn]] = {}
        for kind, turn in turns.items():
            args = digest("\x00".join(sorted(turn.args)), 4)
            item = f"{kind}~{turn.uniq}~{args}~{pack(sample(turn.hashes))}"
            mine[kind] = (item, turn)
            plan[f"turns.{kind}"] = Push(Scope.RUN, "turns", (item,), keep=cfg.window, unique=True)
        seen.request.derived[f"novelty.{id(cfg)}"] = mine
        return plan

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: NoveltyConfig) -> Verdict | None:
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

    def _judge(
        self, kind: str, item: str, turn: Turn, window: tuple[str, ...], cfg: NoveltyConfig, seq: int
    ) -> Verdict | None:
        if item not in window:
            return None
        # The kind's turns up to this one (a re-sent request finds its turn where it was first pushed).
        end = len(window) - 1 - window[::-1].index(item)
        packs = [
            (args, packed)
            for entry in window[: end + 1]
            for kind_of_entry, _, args, packed in [entry.split("~", 3)]
            if kind_of_entry == kind
        ]
        if len(packs) <= cfg.turns:
            return None  # the first turn of a kind is never stale: `turns` stale ones need one more
        if any(packs[index][0] == packs[index - 1][0] for index in range(len(packs) - cfg.turns, len(packs))):
            return None  # the same call again (a poll)
        parsed = [(args, unpack(packed)) for args, packed in packs]  # only now: most turns end above
        shares = stale_shares([hashes for _, hashes in parsed], cfg.turns, cfg.min_shingles, cfg.max_new_share)
        if shares is None:
            return None  # too little to judge, or a turn that brought enough new
        beside = without_constant([hashes for _, hashes in parsed], cfg.min_shingles)
        if stale_shares(beside, cfg.turns, cfg.min_shingles, cfg.max_new_share) is None:
            return None  # stale only by the text every result carries (`constant`): what changes beside it is new
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
