"""`spiral`: one tool called again and again with near-identical arguments.

A search that cannot find what the model wants turns into a stream of
rephrasings ("agent cost control 2026", "agent cost control best practices
2026", ...). Each call's arguments become a small token set per argument; when
enough pairs among a tool's last few calls are similar (Jaccard over the
arguments they do not share), the tool is spiralling. Pairs are of calls from
different turns, one per two turns: a rephrasing comes after the answers, while
the calls of one response were all made before any came (a plan's similar
tasks; a spray of near-identical lookups there is `parallel_calls`').
Identical arguments are left to `repeat_call` and `stagnation`, calls that
differ in their page or cursor are a listing, not a spiral, and so are calls
whose text names other files, numbers, names or quoted literals (`pytest
tests/test_a.py -x`, then `test_b.py`; a query for 2021, then for 2022; the
weather for Paris, then for Lyon; `df.groupby('region')`, then `'product'`),
unless one names all that the other does (a rephrasing that adds a year still
asks the same). A command tool's call (`commands.command_of`: bash, shell, ...),
and a calculation (arguments that are arithmetic: "158 + 141", then "158 + 141
+ 75"), is judged by what comes back too: its words are not its meaning (`grep -n "def
a" f.py`, then `grep -A20 "def b" f.py`), so two similar commands are a pair
only when they got the same answer (volatile text aside), and the call just
made only when the tool's last answer repeated the one before; commands that
keep getting new answers (code read function by function, tests run four ways
failing four ways) are work. Calls handing work
to another agent are left out: a leader giving its members similar tasks
("analyse the North region's sales", "... the South region's ...") fans out,
and the same task handed over again is `handoff_cycle`'s.
"""

from __future__ import annotations

import re
from functools import cached_property
from itertools import combinations

from pydantic import Field

from runguard.detectors.support import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseSeen,
    Results,
    ShownCall,
    Verdict,
    tally,
)
from runguard.detectors.support.commands import is_command_tool
from runguard.detectors.support.normalize import (
    call_args_digest,
    call_json,
    call_keyed_digest,
    call_tag,
    lowered,
    result_digest_of,
)
from runguard.detectors.support.sketch import (
    call_sketch_packed,
    call_targets,
    decode_sketch,
    named_apart,
    sketch_similarity,
)
from runguard.detectors.support.turns import paired_results, tool_work
from runguard.proxy.core.events import ToolCall
from runguard.proxy.core.ops import Get, Op, OpResult, Push, Scope

_ARITHMETIC = re.compile(r"[\d\s.,()]*\d[\d\s.,()]*(?:[-+*/%^][\d\s.,()]+)+")  # "(158 + 161) * 3"
MAX_EXPRESSION = 200  # characters of an argument read as a calculation
ANY = "?"  # a command's answer that is not known yet, and no answer of its tool says it differs
MAX_TOOLS = 6  # tools tracked per run (the first ones called): each keeps up to `window` token sets
PAGINATION_KEYS = (
    "page",
    "page_token",
    "pageToken",
    "cursor",
    "offset",
    "start",
    "after",
    "before",
    "next_token",
    "nextToken",
    "skip",
)


class SpiralConfig(DetectorConfig):
    threshold: float = Field(
        0.72,
        gt=0,
        le=1,
        description="Jaccard similarity of two calls' argument words at which they count as near-identical. "
        "Only the arguments the two calls do not share are compared, and a value without spaces (a path, "
        "an id) is one word: reading sibling files or one query with fixed options is not a spiral. A text of "
        "three lines or more (code, a file's content) has no words: a script edited and run again is work.",
        json_schema_extra={"tighten": "lower"},
    )
    window: int = Field(
        4,
        ge=2,
        le=8,
        description="How many of each tool's latest calls are compared pairwise; the calls of one response are "
        "kept whole beside the earlier ones (up to twice as many).",
    )
    min_pairs: int = Field(
        3,
        ge=1,
        le=28,
        description="Near-identical pairs within a tool's window that stop the run "
        "(calls with exactly the same arguments are not counted here).",
        json_schema_extra={"tighten": "lower"},
    )
    pagination_keys: list[str] = Field(
        default_factory=lambda: list(PAGINATION_KEYS),
        description="Argument keys (any depth, any letter case) that page through results: two calls whose "
        "values under these keys differ are never counted as a pair.",
    )

    @cached_property
    def pagination(self) -> frozenset[str]:
        """`pagination_keys` as matched (lowercase), built once per config."""
        return lowered(self.pagination_keys)


class Spiral(Detector[SpiralConfig]):
    """After each response: add its calls to their tool's window and count similar pairs there."""

    name = "spiral"
    per_thread = True
    needs_tools = True
    Config = SpiralConfig

    def plan_request(self, seen: RequestSeen, cfg: SpiralConfig) -> Plan:
        return {"tools": tally.fetch("tools")}

    def _entry(self, turn: str, call: ToolCall, cfg: SpiralConfig, tells: bool) -> str:
        """One call as "<its turn>~<hash of its page values>/<hash of the files and numbers its text names>|<its
        packed argument sketch>": calls on other pages, or naming other files or numbers, are never a pair,
        nor calls of one turn. `tells`: `_answer_tells(call)`, which marks the entry with its args digest."""
        pages = call_keyed_digest(call, cfg.pagination)
        asked = f"^{call_args_digest(call)[:8]}" if tells else ""
        return f"{turn}~{pages}/{call_targets(call)}{asked}|{call_sketch_packed(call)}"

    def _answers(self, seen: ResponseSeen, tools: set[str]) -> dict[str, list[str]]:
        """Per command tool among `tools`, the answers this request brings back: "<its call's args digest>=<result
        digest>". Only the tools whose answers are pushed are read: most responses call a tool that is no
        command and the run knows no other yet, and then nothing is (a call's `_answer_tells` costs ~1 us)."""
        answers: dict[str, list[str]] = {}
        if not tools:
            return answers
        for call, result in paired_results(seen.request):
            if call is not None and (tool := call_tag(call)) in tools and _answer_tells(call):
                answers.setdefault(tool, []).append(f"{call_args_digest(call)[:8]}={result_digest_of(result)[:8]}")
        return answers

    def plan_response(self, seen: ResponseSeen, cfg: SpiralConfig) -> Plan:
        calls: dict[str, list[ToolCall]] = {}
        for call in tool_work(seen.response):  # a leader's similar tasks for its members are a fan-out
            calls.setdefault(call_tag(call), []).append(call)
        roster = seen.before.get("tools")
        known = set(roster) if isinstance(roster, tuple) else set()
        # Only the calls of tools with a place on the roster are kept: the others' entries would go nowhere.
        admitted, new = tally.admit(roster, calls, MAX_TOOLS) if calls else ([], [])
        turn = str(seen.facts.request_index)  # each request of a run has its own
        entries: dict[str, tuple[str, ...]] = {}
        told: set[str] = set()  # the tools whose calls are judged by their answers (command tools')
        for t in admitted:
            made = []
            for call in calls[t]:
                tells = _answer_tells(call)
                if tells:
                    told.add(t)
                made.append(self._entry(turn, call, cfg, tells))
            entries[t] = tuple(made)
        answers = self._answers(seen, (known - calls.keys()) | told)
        # What a tool this response does not call got back is kept too: a calculation between other calls.
        plan: dict[str, Op] = {
            f"r.{t}": Push(Scope.RUN, f"r.{t}", tuple(heard), keep=4 * cfg.window)
            for t, heard in answers.items()
            if t in known and t not in calls
        }
        if not calls:
            return plan
        # A batch stays whole beside the window's earlier calls (up to twice the window): pairs are of turns.
        for t, batch in entries.items():
            plan[f"w.{t}"] = Push(Scope.RUN, f"w.{t}", batch, keep=min(cfg.window + len(batch) - 1, 2 * cfg.window))
            if t in told:  # a command tool's: what its calls got back
                heard = tuple(answers.get(t, ()))
                plan[f"r.{t}"] = (
                    Push(Scope.RUN, f"r.{t}", heard, keep=4 * cfg.window) if heard else Get(Scope.RUN, f"r.{t}")
                )
        for op in tally.enrol("tools", new, MAX_TOOLS):
            plan["roster"] = op
        return plan

    def check_response(self, seen: ResponseSeen, got: Results, cfg: SpiralConfig) -> Verdict | None:
        for local, window in got.items():
            if not local.startswith("w.") or not isinstance(window, tuple):
                continue
            if len(window) * (len(window) - 1) // 2 < cfg.min_pairs:
                continue  # too few calls yet to hold `min_pairs` pairs: nothing to decode
            pairs = self._similar_pairs(window, cfg, _heard(got.get(f"r.{local[2:]}")))
            if len(pairs) >= cfg.min_pairs:
                tool_tag = local[2:]
                tool = next((c.name for c in seen.response.tool_calls if call_tag(c) == tool_tag), tool_tag)
                involved = sorted({k for i, j, _ in pairs for k in (i, j)})
                calls = tuple(ShownCall(tool, request_seq=_turn_of(window[k])) for k in involved)
                return self.verdict(
                    f"tool '{tool}' was called with near-identical arguments: {len(pairs)} pairs among its "
                    f"last {len(window)} calls have Jaccard >= {cfg.threshold}",
                    shows=Evidence(calls=calls),
                    tool=tool,
                    window=len(window),
                    pairs=pairs,
                )
        return None

    def _similar_pairs(
        self, window: tuple[str, ...], cfg: SpiralConfig, heard: tuple[dict[str, str], str | None] = ({}, ANY)
    ) -> list[tuple[int, int, float]]:
        """Near-identical pairs of calls from different turns, one per pair of turns: a spiral is the model
        asking again once it has seen the answers. Calls of one response were all made before any answer
        came (a plan's similar tasks, a batch of lookups: `parallel_calls` judges those), and a call like
        several of one earlier batch asks again once."""
        parsed = []
        answers, pending = heard
        got: list[str | None] = []
        for index, (marks, _, sketch) in enumerate(entry.partition("|") for entry in window):
            turn, marked, rest = marks.partition("~")
            turn = turn if marked else str(index)  # an entry from before turns were kept: a turn of its own
            rest, command, asked = rest.partition("^")
            # A command's answer; its latest call's, unknown yet, is the tool's last when that repeated itself.
            got.append(answers.get(asked, pending) if command else "")
            parsed.append((turn, rest.partition("/"), decode_sketch(sketch)))
        found = []
        paired: set[tuple[str, str]] = set()
        for (i, (turn_a, (pages_a, _, named_a), a)), (j, (turn_b, (pages_b, _, named_b), b)) in combinations(
            enumerate(parsed), 2
        ):
            if turn_a == turn_b or (turn_a, turn_b) in paired:
                continue  # one batch, or turns already paired
            if pages_a != pages_b:
                continue  # another page of the same listing
            if named_apart(named_a, named_b):
                continue  # other files, numbers or names
            if not _same_answer(got[i], got[j]):
                continue  # commands that got other answers: the agent learnt something
            similarity = sketch_similarity(a, b)
            if cfg.threshold <= similarity < 1.0:
                paired.add((turn_a, turn_b))
                found.append((i, j, round(similarity, 3)))
        return found


def _answer_tells(call: ToolCall) -> bool:
    """Whether a call is judged by what comes back: a command tool's, or a calculation (every argument an
    arithmetic expression: a sum with one more term is another sum, whatever words it shares)."""
    if is_command_tool(call):
        return True
    args = call_json(call)
    if not isinstance(args, dict):
        return _is_arithmetic(args)
    for value in args.values():  # a loop, not all() over a list: most calls fail at their first value
        if not _is_arithmetic(value):
            return False
    return bool(args)


def _is_arithmetic(value: object) -> bool:
    return isinstance(value, str) and len(value) <= MAX_EXPRESSION and _ARITHMETIC.fullmatch(value.strip()) is not None


def _heard(window: OpResult) -> tuple[dict[str, str], str | None]:
    """A command tool's answers by its calls' args digest, and what a call whose answer is not known yet (the
    one just made) is taken to get: `ANY` while the tool has given fewer than two answers, its last answer
    when that repeated the one before (asking again after the same answer), else None (it learnt something)."""
    items = [item.partition("=") for item in window] if isinstance(window, tuple) else []
    answers = {asked: answer for asked, _, answer in items}
    if len(items) < 2:
        return answers, ANY
    return answers, items[-1][2] if items[-1][2] == items[-2][2] else None


def _same_answer(a: str | None, b: str | None) -> bool:
    """Whether two calls got the same answer ("" for a call of no command tool: not judged by its answer)."""
    if a == "" or b == "":
        return True
    if a is None or b is None:
        return False
    return ANY in (a, b) or a == b


def _turn_of(entry: str) -> int | None:
    """The request whose response made a window entry's call (None for an entry kept before turns were)."""
    turn, marked, _ = entry.partition("|")[0].partition("~")
    return int(turn) if marked and turn.isdigit() else None
