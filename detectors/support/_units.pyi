"""A JSON tool result's units in C (`_units.c`): `shingles._Units` without a bytecode loop per value."""

from collections.abc import Callable, Collection
from typing import Any

def units(
    value: Any,
    volatile: Collection[str],
    room: int,
    max_depth: int,
    max_parsed: int,
    parse_json: Callable[[str], Any],
    /,
) -> list[str]: ...
