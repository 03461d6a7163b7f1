"""The C units kernel (`detectors/support/_units.c`) collects a JSON result's units as `shingles._Units` does.

`novelty` reads a JSON tool result as "key value" units before hashing their words; the kernel does it where it
is built and `_Units` where it is not, and a stored sample must mean the same on either build: the two are
compared on generated nested values (any scalar, volatile and capitalised keys, JSON text inside strings,
nesting past the depth bound) and on large results.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runguard.detectors.support import shingles
from runguard.detectors.support.normalize import DEFAULT_VOLATILE, parse_json
from runguard.detectors.support.shingles import MAX_CHARS, MAX_DEPTH, MAX_PARSED
from tests.services import require_kernel

KERNEL = "runguard.detectors.support._units"


@pytest.fixture(scope="module")
def kernel() -> object:
    require_kernel(KERNEL, "gcc")
    import runguard.detectors.support._units as built

    return built


_KEYS = st.sampled_from(["id", "ID", "Name", "title", "price", "timestamp", "Trace_Id", "x", "", "étage", "K\u212a"])
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(['{"q": 1, "Id": 2}', "[1, 2]", "[not json", "{}", "", "\u6771\u4eac"])
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_KEYS | st.integers(0, 9), inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(value=_JSON, room=st.sampled_from([1, 7, 40, MAX_CHARS]))
def test_units_are_the_python_twins(kernel: object, value: object, room: int) -> None:
    assert shingles._units_c is not None
    units = shingles._Units(DEFAULT_VOLATILE)
    units.room = room
    units.walk(value, "")
    assert shingles._units_c(value, DEFAULT_VOLATILE, room, MAX_DEPTH, MAX_PARSED, parse_json) == units.out


def test_units_of_deep_and_large_values_are_the_python_twins(kernel: object) -> None:
    assert shingles._units_c is not None
    deep: object = "bottom"
    for level in range(MAX_DEPTH + 5):
        deep = {f"k{level}": deep, "n": level} if level % 2 else [deep, level]
    rows = [{"id": i, "Title": f"row {i} \u00e9t\u00e9", "score": i / 7, "ok": i % 2 == 0} for i in range(2_000)]
    for value in (deep, {"rows": rows}, rows):
        units = shingles._Units(DEFAULT_VOLATILE)
        units.walk(value, "")
        assert shingles._units_c(value, DEFAULT_VOLATILE, MAX_CHARS, MAX_DEPTH, MAX_PARSED, parse_json) == units.out
    assert sum(map(len, units.out)) <= MAX_CHARS


def test_units_of_uses_the_kernel_and_gives_the_twins_units(kernel: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.detectors.harness import result

    found = result("search", {"items": [{"name": "blue widget", "Price": 9.5, "id": "x-1"}], "timestamp": 5})
    built = shingles.units_of(found, DEFAULT_VOLATILE)
    monkeypatch.setattr(shingles, "_units_c", None)
    assert shingles.units_of(found, DEFAULT_VOLATILE) == built == ["name blue widget", "Price 9.5"]
