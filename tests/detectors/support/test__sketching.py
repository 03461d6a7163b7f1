"""The C sketch (`detectors/support/_sketching.c`) reads a call's arguments as `sketch._sketch_py` does.

`spiral`, `parallel_calls`, `fan_out` and `novelty` compare calls by their sketches and `call_targets`, and
store them in run state: a sketch made by the kernel must equal the twin's on every call, or a run that moves
to a replica built without it would judge its earlier calls as other calls. The two are compared on
arguments built from the pieces the twin's regexes and branches read (capitals after a word, quotes, paths,
file names, dotted names, digits, every ASCII whitespace, blocks of three lines, records, scalars, more words
than a sketch keeps), on arbitrary ASCII text, and on what the kernel must leave to the twin.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runguard.detectors.support import sketch
from runguard.detectors.support.normalize import sorted_dump
from runguard.detectors.support.sketch import MAX_ARGS, MAX_TOKENS
from tests.services import require_kernel

KERNEL = "runguard.detectors.support._sketching"
_PIECES = [
    *" \t\n\r\x0b\x0c\x1c\x1f",
    *"'\"`()[]{}<>,;:!?./-_\x00",
    *("a", "Paris", "Lyon", "SELECT", "X", "id", "2026", "v1.2", "0", "ab12", "src/app.py", "tests/test_x.py"),
    *("asyncio.gather", "file.tar.gz", "notes.markdown", "end.", "...", "e.g.", "a/b", "/tmp/", "http://x.io/p"),
    *("'col'", '"value"', "'two words'", "'" + "x" * 64 + "'", "'" + "y" * 65 + "'", "'a\"", "''", "it's"),
]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=24).map("".join)
_KEYS = st.sampled_from(["query", "Path", "max_results", "q2", "", "a b", "K.x", "command", "old_string"])
_RECORDS = st.lists(st.dictionaries(st.sampled_from(["content", "status"]), _TEXT, max_size=2), min_size=1, max_size=3)
_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | _RECORDS
_VALUES = st.dictionaries(_KEYS, _TEXT | _TEXT | _SCALARS, min_size=1, max_size=6)


@pytest.fixture(scope="module")
def kernel() -> object:
    require_kernel(KERNEL, "libxxhash-dev")
    import runguard.detectors.support._sketching as built

    return built


def _both(value: Any) -> tuple[tuple[Any, set[str]], tuple[Any, set[str]]]:
    assert sketch._sketch_c is not None and sketch.compiled()
    names_c: set[str] = set()
    names_py: set[str] = set()
    made = sketch._sketch_c(value, names_c, sorted_dump, MAX_ARGS, MAX_TOKENS)
    return (made, names_c), (sketch._sketch_py("", names_py, value), names_py)


@settings(max_examples=3000, deadline=None)
@given(value=_VALUES)
def test_the_kernel_sketches_as_the_twin_does(kernel: object, value: dict[str, Any]) -> None:
    made, twin = _both(value)
    assert made == twin


@settings(max_examples=500, deadline=None)
@given(text=st.text(st.characters(max_codepoint=127), max_size=300), key=st.text(st.characters(max_codepoint=127)))
def test_any_ascii_argument_is_sketched_as_the_twin_does(kernel: object, text: str, key: str) -> None:
    made, twin = _both({key: text, "n": 3})
    assert made == twin


def test_what_each_reading_finds(kernel: object) -> None:
    cases: dict[str, set[str]] = {
        "weather for Paris, then Lyon": {"paris", "lyon"},  # a capital after a word and a space, not the first
        "Weather in NYC vs Paris-Nord": {"nyc", "paris-nord"},
        "select 'user_id' from \"Orders\" where x = 'two words'": {"user_id", "orders"},  # quoted literals
        "run pytest tests/test_parser.py -k 12": {"tests/test_parser.py", "12"},
        "compare asyncio.gather and v1.2 on notes.markdown": {"v1.2"},  # an extension of 1-5: "file" names
        "edit app.py then app.tsx2 page42": {"app.py", "app.tsx2", "42"},
        "find error codes e404 and 500": {"404", "500"},  # a word's digits
    }
    for text, named in cases.items():
        made, twin = _both({"query": text})
        assert made == twin and made[1] == named, text


def test_blocks_records_scalars_and_many_words(kernel: object) -> None:
    many = " ".join(f"word{index}" for index in range(300))
    value = {
        "content": "line one\nline two\nline three\n",  # a block: a tag and no words
        "todos": [{"content": "fix it", "status": "pending"}],  # records: the same
        "limit": 10,
        "ratio": 0.25,
        "huge": 2**64 - 1,
        "flag": True,
        "none": None,
        "query": many,  # more words than a sketch keeps: the smallest kept over the whole call
    }
    made, twin = _both(value)
    assert made == twin
    tokens = {token for _, group in made[0] for token in group}
    assert len(tokens) == MAX_TOKENS and [tag for tag, _ in made[0]] == [tag for tag, _ in twin[0]]
    assert made[0][0][1] == () and made[0][-1][1] == ()  # "content", "todos"
    made, twin = _both({"x": math.inf, "y": math.nan})
    assert made == twin


def test_a_value_the_dump_refuses_raises_as_in_the_twin(kernel: object) -> None:
    # orjson reads no integer past 64 bits (it reads it as a float), so no call holds one; were one there,
    # both would raise the dump's error, not sketch it differently.
    with pytest.raises(TypeError, match="64-bit"):
        sketch._sketch_py("", set(), {"n": 2**70})
    assert sketch._sketch_c is not None
    with pytest.raises(TypeError, match="64-bit"):
        sketch._sketch_c({"n": 2**70}, set(), sorted_dump, MAX_ARGS, MAX_TOKENS)


@pytest.mark.parametrize(
    "value",
    [
        {"query": "caf\u00e9 au lait"},  # non-ASCII text: Unicode's lowercase and whitespace
        {"caf\u00e9": "x"},
        {"filter": {"year": 2026}},  # a nested object
        {"paths": ["a.py", "b.py"]},  # a list of scalars
        {"rows": []},
        {f"k{index}": index for index in range(MAX_ARGS)},  # past the arguments kept apart
        {},
        ["a", "list"],
        "text",
    ],
)
def test_what_the_kernel_leaves_to_the_twin(kernel: object, value: Any) -> None:
    names: set[str] = set()
    assert sketch._sketch_c is not None
    assert sketch._sketch_c(value, names, sorted_dump, MAX_ARGS, MAX_TOKENS) is None and names == set()
    # ... and `_sketch` still sketches it, through the twin.
    assert sketch._sketch("", set(), value) == sketch._sketch_py("", set(), value)


def test_without_the_kernel_the_twin_sketches_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    value = {"query": "weather for Paris", "max_results": 5}
    expected = sketch._sketch_py("", set(), value)
    monkeypatch.setattr(sketch, "_sketch_c", None)
    names: set[str] = set()
    assert not sketch.compiled()
    assert sketch._sketch("", names, value) == expected and names == {"paris"}
