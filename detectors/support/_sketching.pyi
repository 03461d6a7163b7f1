"""A call's argument sketch in C (`_sketching.c`): `sketch._sketch_py` without a Python object per word."""

from collections.abc import Callable
from typing import Any

def sketch(
    value: Any, names: set[str], dump: Callable[[Any], str], max_args: int, max_tokens: int, /
) -> tuple[tuple[str, tuple[str, ...]], ...] | None: ...
