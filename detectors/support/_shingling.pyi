"""The shingle kernel in C (`_shingling.c`): `shingles.hashes_py`, `shingles.tops_py` and `shingles._Units`
without a Python object per word triple or a bytecode loop per JSON value."""

from collections.abc import Callable, Collection, Set
from typing import Any

def hashes(text: bytes, echo: Set[bytes], budget: int, width: int, share: float, keep: int, /) -> set[int]: ...
def tops(hashes: Set[int], keep: int, /) -> list[int]: ...
def units(
    value: Any,
    volatile: Collection[str],
    room: int,
    max_depth: int,
    max_parsed: int,
    parse_json: Callable[[str], Any],
    /,
) -> list[str]: ...
