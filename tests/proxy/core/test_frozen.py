"""`@frozen`: a value class that hashes and compares by its fields, and that mypy will not let you assign to."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from runguard.proxy.core.frozen import frozen


@frozen
class Point:
    x: int
    tags: tuple[str, ...] = ()
    notes: list[str] = dataclasses.field(default_factory=list, compare=False, hash=False)


def test_equal_values_are_equal_and_hash_alike() -> None:
    assert Point(1, ("a",)) == Point(1, ("a",)) != Point(2, ("a",))
    assert len({Point(1, ("a",)), Point(1, ("a",)), Point(2)}) == 2
    assert Point(1).notes == [] and Point(1).notes is not Point(1).notes


def test_it_is_slotted_and_replace_makes_a_changed_copy() -> None:
    point = Point(1, ("a",))
    assert not hasattr(point, "__dict__")
    moved = dataclasses.replace(point, x=5)
    assert (moved.x, moved.tags, point.x) == (5, ("a",), 1)
    with pytest.raises(AttributeError):
        point.other = 3  # type: ignore[attr-defined]


@pytest.fixture
def package_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`runguard.*` laid out as mypy needs it: it cannot follow the editable install's finder.

    (`.ci/mypy` builds the same tree for the type gate; a fresh checkout has none.)
    """
    package = tmp_path / "layout" / "runguard"
    package.mkdir(parents=True)
    root = Path(__file__).resolve().parents[3]
    for name in ("proxy", "detectors", "config"):
        (package / name).symlink_to(root / name, target_is_directory=True)
    monkeypatch.setenv("MYPYPATH", str(package.parent))


@pytest.mark.usefixtures("package_tree")
def test_mypy_refuses_an_assignment_to_a_field(tmp_path: Path) -> None:
    source = tmp_path / "uses_frozen.py"
    source.write_text(
        textwrap.dedent(
            """
            from runguard.proxy.core.frozen import frozen

            @frozen
            class Point:
                x: int

            Point(1).x = 2
            Point(x="one")
            """
        )
    )
    out, _, status = mypy_api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(source)])
    assert status == 1
    assert 'Property "x" defined in "Point" is read-only' in out
    assert 'Argument "x" to "Point" has incompatible type "str"' in out
