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

`told` samples the observation's shingles (`shingles.sample`, long numbers as "#") and then drops the
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
_LONG_NUMBER = re.compile(r"\d{3,}")
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


def told(texts: Sequence[str], stored: object) -> tuple[list[int], str]:
    """(the kept sample of what `texts` say, the harness's lines left out; the edges to store for the next
    observation)."""
    lines = _LONG_NUMBER.sub("#", "\n".join(texts)[:MAX_CHARS]).split("\n")
    keys = [key(line) for line in lines]
    marked = [at for at, found in enumerate(keys) if found]
    head, tail = marked[:HEAD], marked[-TAIL:]
    history = unpack_edges(stored)
    harness: set[int] = set()
    if len(history) == MEMORY:
        harness.update(at for at in head if all(keys[at] in heads for heads, _ in history))
        harness.update(at for at in tail if all(keys[at] in tails for _, tails in history))
    edges = (frozenset(keys[at] for at in head), frozenset(keys[at] for at in tail))
    framing = shingles([lines[at] for at in harness], frozenset()) if harness else set()
    kept = [value >> 48 for value in sorted(shingles(["\n".join(lines)], frozenset()))[:KEEP] if value not in framing]
    return kept, pack_edges([*history, edges])
