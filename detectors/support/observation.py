"""What a text agent was told since its last turn, read as the agent reads it: the harness's own lines out.

An agent whose tool protocol is text gets each command's output back as user text, and the harness that
runs the commands frames every output alike: a status footer ("(Current directory: /repo)", a shell
prompt), an exit-code header, a file viewer's "(N more lines above)". Those lines are common to every
observation of the run, so they say nothing about what the command found. A line is the harness's when
it sits at the same edge of the observation (among its first `HEAD` or last `TAIL` lines) as a line with
the same key in each of the `MEMORY` observations before it. A line's key is its text, lowercase, with
numbers of three digits or more as "#" (line counters, sizes, file lengths); a "(Label: value)" or
"Label: value" line is keyed by its label alone, so a footer naming the current directory is the
harness's wherever the agent went.

`read` samples the observation's shingles (`shingles.sample`, long numbers as "#") and then drops the
harness lines' ones: the same observation twice gives the same sample whatever its edges, so a repeated
observation never looks new for what was left out of it.

The edges are stored between requests as `pack_edges` text: for each remembered observation, the hashed
keys of its head lines and of its tail lines (a few hex characters each, never the text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runguard.detectors.support.shingles import KEEP, MAX_CHARS, shingles
from runguard.proxy.core.events import digest

HEAD, TAIL = 2, 3  # edge lines of an observation: its first and last non-blank ones
MEMORY = 2  # observations before this one whose edges a harness line must be on
_LONG_NUMBER = re.compile(r"[0-9][0-9][0-9]+")  # twice as fast as \\d{3,}
_LABEL = re.compile(r"^\(?([a-z][a-z ]{0,30}):")

Edges = tuple[frozenset[str], frozenset[str]]  # the hashed keys of an observation's head and tail lines


def key(line: str) -> str:
    """The key a line is compared by at an observation's edge ("" for a blank line)."""
    text = _LONG_NUMBER.sub("#", line.strip().lower())
    label = _LABEL.match(text)
    return digest(label.group(1) if label else text, 3) if text else ""


def unpack_edges(stored: object) -> list[Edges]:
    """The edges `pack_edges` stored (oldest first); none when nothing readable is stored."""
    if not isinstance(stored, str):
        return []
    found: list[Edges] = []
    for entry in stored.split(";"):
        head, _, tail = entry.partition("|")
        found.append((frozenset(filter(None, head.split(","))), frozenset(filter(None, tail.split(",")))))
    return found[-MEMORY:]


def pack_edges(history: Sequence[Edges]) -> str:
    return ";".join(",".join(sorted(head)) + "|" + ",".join(sorted(tail)) for head, tail in history[-MEMORY:])


def _edges(lines: Sequence[str], count: int) -> list[tuple[int, str]]:
    """The first `count` non-blank lines of `lines` with their keys (in the order met)."""
    found: list[tuple[int, str]] = []
    for at, line in enumerate(lines):
        if len(found) == count:
            break
        if found_key := key(line):
            found.append((at, found_key))
    return found


def read(texts: Sequence[str], stored: object, plain: set[int] | None = None) -> tuple[list[int], str, str]:
    """(the kept sample of what `texts` say, long numbers as "#" and the harness's lines left out; a digest of
    the text with its long numbers as "#", to tell whether it changed; the edges to store for the next
    observation). `plain`: the shingles of the one text as it came, reused when it holds
    no long number. Only the edge lines are keyed: a long output costs a pass to mask its numbers and, when
    it has some, one to shingle it."""
    masked, count = _LONG_NUMBER.subn("#", "\n".join(texts)[:MAX_CHARS])
    lines = masked.split("\n")
    head = _edges(lines, HEAD)
    tail = [(len(lines) - 1 - at, found) for at, found in _edges(lines[::-1], TAIL)]
    history = unpack_edges(stored)
    harness: set[int] = set()
    if len(history) == MEMORY:
        harness.update(at for at, found in head if all(found in heads for heads, _ in history))
        harness.update(at for at, found in tail if all(found in tails for _, tails in history))
    hashes = plain if plain is not None and not count and len(texts) == 1 else shingles([masked], frozenset())
    framing = shingles([lines[at] for at in harness], frozenset()) if harness else set()
    kept = [value >> 48 for value in sorted(hashes)[:KEEP] if value not in framing]
    edges = (frozenset(found for _, found in head), frozenset(found for _, found in tail))
    return kept, digest(masked, 4), pack_edges([*history, edges])
