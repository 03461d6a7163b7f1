"""What a command printed, as the set of its lines: how an agent re-running its own script sees progress.

An agent that edits its code and runs its reproduction script (or its tests) again gets back output that
shares its template with the last run: the same fixtures, the same traceback frames, the same summary
line. What changed is a count of passing tests or one traceback line: a few word shingles of many, but a
line the command never printed before, and that line is the progress. A run that prints only lines it
printed before (the same failure again, or the two failures a flipped line alternates between) says
nothing new.

`printed_digest` reads a command's output as the set of its lines: each line's lowercase [a-z0-9] words,
its volatile parts (durations, timestamps, ids: `normalize.strip_volatile`) left out, and a line that only
echoes the command (`$ cd /repo && python reproduce.py`) left out, so the same output of a command written
another way is the same set. Two outputs with the same digest printed the same lines, in any order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from runguard.detectors.support.normalize import strip_volatile
from runguard.detectors.support.shingles import ECHO_SHARE, MAX_CHARS
from runguard.proxy.core.events import digest

_WORD = re.compile(r"[a-z0-9]+")


def printed_digest(units: Iterable[str], echo: frozenset[bytes]) -> str:
    """A digest of the set of lines `units` hold (their first `MAX_CHARS` characters), each as its words,
    volatile parts and lines echoing `echo` (the command's words) left out."""
    text = strip_volatile("\n".join(units)[:MAX_CHARS]).lower()
    lines: set[str] = set()
    for line in text.split("\n"):
        words = _WORD.findall(line)
        if not words:
            continue
        if echo:
            shared = sum(1 for word in set(words) if word.encode() in echo)
            if shared >= ECHO_SHARE * len(set(words)):
                continue  # says what was run
        lines.add(" ".join(words))
    return digest("\n".join(sorted(lines)), 4)
