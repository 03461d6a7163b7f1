"""The shingle kernel in C (`_shingling.c`): `shingles.hashes_py` and `shingles.tops_py` without a Python
object per word triple."""

from collections.abc import Set

def hashes(text: bytes, echo: Set[bytes], budget: int, width: int, share: float, keep: int, /) -> set[int]: ...
def tops(hashes: Set[int], keep: int, /) -> list[int]: ...
