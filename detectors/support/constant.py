"""Constant text: what a run's tool results carry whatever was asked, learned from the results themselves.

A machine whose Python prints the same broken-package traceback on every start
adds it to every command's output; an editor tool frames every confirmation in
the same template. Beside such a block a short real answer is most of what
changed, yet most of the result is old text: judged whole, every probe looks
stale. Like the volatile text the client adds (`normalize.strip_volatile`),
this text is noise; what is left is what the result says.

The run shows which text that is: two results that each bring at least
`least` shingles the other lacks (two different answers) and still share
some, share text that does not depend on the answer. A tool that keeps
answering the same (a search returning the same flights however it is asked,
one document re-fetched) never gives two such results, so nothing of its
answers is learned as constant: only text that has ridden along with
different answers is. Turns are compared as the shingle sets `novelty` keeps
(`shingles`), at most a few dozen turns of at most 48 values each, and only
when a run is about to be stopped.
"""

from __future__ import annotations

from collections.abc import Sequence

from runguard.detectors.support.shingles import KEEP


def constant_part(turns: Sequence[frozenset[int]], least: int) -> frozenset[int]:
    """The shingles two of `turns` share while each holds at least `least` shingles the other lacks, and the
    shingles that come with them wherever they are seen (`_riding`)."""
    core: set[int] = set()
    for index, first in enumerate(turns):
        for second in turns[index + 1 :]:
            shared = first & second
            if shared and len(first) - len(shared) >= least and len(second) - len(shared) >= least:
                core |= shared
    return frozenset(core | _riding(turns, core)) if core else frozenset()


def _riding(turns: Sequence[frozenset[int]], core: set[int]) -> set[int]:
    """The rest of the constant block `core` is part of: shingles found in two or more of the turns that carry
    the block, and in each of them, unless that turn's sample could not hold them.

    A turn keeps only its `KEEP` smallest values: a long answer's sample holds the block's small values only,
    so two long answers show part of the block; the block's other values are told by riding along with it
    wherever a sample reaches that far.
    """
    reach = [max(hashes) if len(hashes) >= KEEP else None for hashes in turns]
    carriers = []
    for hashes, top in zip(turns, reach, strict=True):
        seen = [value for value in core if top is None or value <= top]
        if seen and 2 * len(hashes.intersection(seen)) >= len(seen):
            carriers.append((hashes, top))
    found: set[int] = set()
    for hashes, _ in carriers:
        for value in hashes - core:
            if value in found:
                continue
            held = sum(value in other for other, _ in carriers)
            missing = any(value not in other and (top is None or value <= top) for other, top in carriers)
            if held >= 2 and not missing:
                found.add(value)
    return found


def without_constant(turns: Sequence[frozenset[int]], least: int) -> list[frozenset[int]]:
    """`turns` less their `constant_part`: what each one says beside the text the run's results all carry."""
    constant = constant_part(turns, least)
    return [hashes - constant for hashes in turns] if constant else list(turns)
