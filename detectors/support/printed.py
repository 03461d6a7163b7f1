"""What a command printed, as the set of its lines: how an agent re-running its own script sees progress.

An agent that edits its code and runs its reproduction script (or its tests) again gets back output that
shares its template with the last run: the same fixtures, the same traceback frames, the same summary
line. What changed is a count of passing tests or one traceback line: a few word shingles of many, but a
line the command never printed before, and that line is the progress. A run that prints only lines it
printed before (the same failure again, or the two failures a flipped line alternates between) says
nothing new.

`printed_digest` reads a command's output as the set of its lines: each line's lowercase [a-z0-9] words,
its volatile parts (durations, timestamps, ids: `normalize.strip_volatile`) left out. Two outputs with the
same digest printed the same lines, in any order, whatever the command looked like. Nothing is taken for
an echo of the command: a probe prints its script's own labels, and they are its answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from runguard.detectors.support.normalize import strip_volatile
from runguard.detectors.support.shingles import MAX_CHARS
from runguard.proxy.core.events import digest

_WORD = re.compile(r"[a-z0-9]+")


def printed_digest(units: Iterable[str]) -> str:
    """A digest of the set of lines `units` hold (their first `MAX_CHARS` characters), each as its words,
    volatile parts left out."""
    text = strip_volatile("\n".join(units)[:MAX_CHARS]).lower()
    lines: set[str] = set()
    for line in text.split("\n"):
        words = _WORD.findall(line)
        if words:
            lines.add(" ".join(words))
    return digest("\n".join(sorted(lines)), 4)


def printed_anew(printed: list[str], turns: int) -> bool:
    """Whether one of the last `turns` turns of shell commands printed a set of lines no turn before it
    printed (`printed_digest`; a turn of other tools has none: empty)."""
    return any(
        printed[index] and printed[index] not in printed[:index] for index in range(len(printed) - turns, len(printed))
    )
