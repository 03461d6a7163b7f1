"""Marks a growing count is flagged at: its threshold, then each time it doubles.

A warning that repeats on every response once a count has passed its threshold marks most of a long
session's responses and hides the one that matters; flagged at 8, 16, 32, ... it says the same thing,
and says it again only when it has grown worse.
"""

from __future__ import annotations


def marks(count: int, threshold: int, before: int | None = None) -> bool:
    """Whether a count that went from `before` (default: one less) to `count` reached `threshold` or a
    doubling of it on the way."""
    start = count - 1 if before is None else before
    mark = max(threshold, 1)
    while mark <= count:
        if mark > start:
            return True
        mark *= 2
    return False
