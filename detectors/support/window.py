"""A conversation's turns as `text_loop` remembers them, and what a window of them says.

Each turn is stored as one `~`-separated item (`Turn.parse` reads every format stored so far); the helpers
take the window's turns in order, oldest first, and say whether a turn brought something new (`fresh`), was
an empty result of a new command (`probe`), ran a command again (`rerun`), asks about a name no action named
before (`asks`), whether a new edit still waits for its checks (`awaited`), and how many answers in a row
said the same (`same_answers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runguard.detectors.support.shingles import unpack


@dataclass(frozen=True, slots=True)
class Turn:
    """One remembered turn: who spoke, whether it was too short to judge, samples of its shingles (all of
    them; what it was told, the harness's lines left out; a short turn's answer), a digest of what it was
    told, and what its action is (`written`): the places it works on, its digest, whether what the turn was
    told only says the last command ran, its wording, whether it edits, whether it only reads and the names it
    asks about."""

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
    def parse(cls, item: str) -> Turn:
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


def fresh(turns: Sequence[Turn], at: int, share: float) -> bool:
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


def probe(turns: Sequence[Turn], at: int) -> bool:
    """Whether turn `at` was told only that its last command printed nothing and does something no turn before
    it in the window did (another `grep` after one that matched nothing): it says nothing either way, so it is
    not judged and does not end a run of stale turns."""
    turn = turns[at]
    return turn.quiet and bool(turn.action) and all(before.action != turn.action for before in turns[:at])


def rerun(turns: Sequence[Turn], at: int) -> bool:
    """Whether turn `at` runs again an action of a turn before it (a test run after an edit)."""
    return bool(turns[at].action) and any(before.action == turns[at].action for before in turns[:at])


def awaited(turns: Sequence[Turn]) -> bool:
    """Whether one of the last four turns wrote an edit no turn before it wrote and the turns between it and
    the last run checks (commands run again: the script, the tests), in a run whose edits change what its
    checks print (a check run right after an edit printed two different things in the window): the edit's
    result is in the output of its checks, not all told yet. A check that prints the same whatever is
    edited, or edits without a check (refused, retried), are judged by what each turn is told."""
    checks = range(1, len(turns) - 1)
    printed = {turns[n + 1].heard for n in checks if turns[n - 1].edits and not turns[n].edits and rerun(turns, n)}
    for at in range(len(turns) - 1, max(len(turns) - 5, 0) if len(printed) > 1 else len(turns), -1):
        if turns[at].edits and not rerun(turns, at):
            return True
        if at < len(turns) - 1 and (turns[at].edits or not rerun(turns, at)):
            return False
    return False


def asks(turns: Sequence[Turn], at: int) -> bool:
    """Whether turn `at`'s action only reads and names a word no earlier action of the window named (a `grep`
    for another symbol, a file not opened before): it seeks something new, and what it finds is not told yet."""
    turn = turns[at]
    named: set[str] = set()
    for before in turns[:at]:
        named |= before.words
    return turn.reads and not turn.words <= named


def same_answers(turns: Sequence[Turn]) -> int:
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
