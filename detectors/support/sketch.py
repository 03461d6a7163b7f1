"""Sketch: the words of a call's arguments, as a small set two calls are compared by.

Detectors that judge whether an agent asks the same thing again in other
words (`spiral`, `novelty`, `parallel_calls`, `fan_out`) compare calls by the
words of their arguments, and keep those words in run state only as a few
2-byte hashes.

- `arg_sketch`: the words of an argument object as a bounded set of 4-hex
  token hashes (XXH3's low bits; the 48 smallest: a bottom-k sketch), grouped by
  top-level argument with a tag of each argument's value; `sketch_similarity`
  compares two calls by `jaccard` over the words of the arguments they do not
  share (exact while both hold fewer than 48 tokens, an estimate beyond);
  `writes_apart`: whether two calls write other data (code, a file's content,
  rows), which has no words to compare.
  A string with spaces contributes its words; one without (a path, an id, a
  URL) is one word, and so is a path or file name inside text; a list of
  objects (a to-do list, rows) has none. `call_targets` / `named_apart`: the files, numbers, names and literals a call's
  text names, read in the same pass, and whether two calls name other things.
- `encode_sketch` / `encode_tokens` and their decoders: sketches packed for state.
- `call_sketch`, `call_targets`, ...: the same values for one `ToolCall`, kept on it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import xxhash

from runguard.detectors.support.normalize import (
    MAX_DEPTH,
    NOT_JSON,
    call_canonical,
    canonical_json,
    json_value,
    remember,
    sorted_dump,
    squash,
)
from runguard.proxy.core.events import ToolCall, digest

_sketch_c: Callable[[Any, set[str], Callable[[Any], str], int, int], Sketch | None] | None
try:  # the same sketch in C for most arguments (`_sketching.c`, built where xxHash's header is: see setup.py)
    from runguard.detectors.support._sketching import sketch as _sketch_c
except ImportError:  # built without it: `_sketch_py` reads every call
    _sketch_c = None

MAX_TOKENS = 48  # tokens kept per argument set: bounds state and pairwise work
TOKEN_HEX = 4  # hex characters per token hash
MAX_ARGS = 16  # top-level arguments kept apart in a sketch; the rest share one group
_WORD = re.compile(r"[a-z0-9]+")
_SPACE = re.compile(r"\s")
_AROUND = "'\"`()[]{}<>,;:!?"  # quotes and punctuation around a word of free text
_PARSE = object()  # `_sketch` reads its arguments' value itself
_SCALARS = frozenset((int, float, bool, type(None)))  # JSON values that are one word each
Sketch = tuple[tuple[str, tuple[str, ...]], ...]  # (argument tag, its token hashes) per top-level argument


def call_sketch(call: ToolCall) -> Sketch:
    """`arg_sketch` of a call's arguments (read from their canonical form), computed once per call (with
    `call_targets`, read in the same pass)."""
    found: Sketch | None = call.derived.get("sketch")
    if found is None:
        names: set[str] = set()
        # Its canonical form's value: words and tags do not depend on the order of keys.
        found = remember(call.derived, "sketch", _sketch(call_canonical(call), names, canonical_json(call)))
        call.derived["targets"] = _named(names)
    return found


def call_sketch_packed(call: ToolCall) -> str:
    """`encode_sketch` of a call's sketch, computed once per call (`spiral` and `parallel_calls` both store it)."""
    found: str | None = call.derived.get("sketch_packed")
    return found if found is not None else remember(call.derived, "sketch_packed", encode_sketch(call_sketch(call)))


def call_asks_in_words(call: ToolCall) -> bool:
    """Whether a call's arguments hold free text (a string with whitespace: a query, a question),
    not only names, ids and numbers; computed once per call."""
    found: bool | None = call.derived.get("in_words")
    if found is None:
        found = remember(call.derived, "in_words", _has_free_text(canonical_json(call)))
    return found


def is_free_text(value: str) -> bool:
    """Words, not a name, an id or a path: the text holds whitespace between its ends."""
    return _SPACE.search(value.strip()) is not None


def _has_free_text(value: Any, depth: int = 0) -> bool:
    if isinstance(value, str):
        return is_free_text(value)
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return any(_has_free_text(item, depth + 1) for item in value.values())
    if isinstance(value, list):
        return any(_has_free_text(item, depth + 1) for item in value)
    return False


def _all_tokens(sketch: Sketch) -> tuple[str, ...]:
    return tuple(sorted({token for _, tokens in sketch for token in tokens}))


def arg_sketch(arguments: str) -> Sketch:
    """Each top-level argument as (a tag of its key and value, its words as 4-hex hashes), sorted by key.

    Words are the lowercase [a-z0-9] runs of the keys and of strings with spaces
    (free text: a query's words are what a rephrasing keeps); a string without
    spaces (a path, an id, a URL) and any other scalar is one word, so two
    sibling files or two ids are different words, not a shared path. An argument
    that is a list of objects has no words: it is data the call writes (a to-do
    list rewritten at every step with one status changed), not a question, and so
    is a text of three lines or more (a script edited and run again, a file's
    content rewritten: `_is_block`). Only the
    `MAX_TOKENS` smallest hashes of the whole call are kept (a bottom-k sketch);
    arguments past the first `MAX_ARGS` share one group.
    """
    return _sketch(arguments, set())


def compiled() -> bool:
    """Whether the C sketch (`_sketching`) is built and in use (else `_sketch_py` reads every call: the same
    answers, slower)."""
    return _sketch_c is not None


def _sketch(arguments: str, names: set[str], parsed: Any = _PARSE) -> Sketch:
    """`arg_sketch`, adding the files, numbers and names its free text names to `names` (`call_targets`);
    `parsed`: `json_value(arguments)`, when the caller has it. An object of ASCII strings, scalars and lists
    of objects (most calls) is read in C where it is built; anything else by `_sketch_py`."""
    value = json_value(arguments) if parsed is _PARSE else parsed
    if _sketch_c is not None:
        found = _sketch_c(value, names, sorted_dump, MAX_ARGS, MAX_TOKENS)
        if found is not None:
            return found
    return _sketch_py(arguments, names, value)


def _sketch_py(arguments: str, names: set[str], value: Any) -> Sketch:
    """`_sketch` in Python: the twin of `_sketching.sketch`, and what reads the calls it leaves."""
    if value is NOT_JSON:  # a custom tool's raw input: a block of code has no words either
        groups = [(_tag(squash(arguments)), [] if _is_block(arguments) else _WORD.findall(arguments.lower()))]
    elif isinstance(value, dict) and value:
        items = sorted(value.items())
        if len(items) >= MAX_ARGS:
            items = [*items[: MAX_ARGS - 1], ("", dict(items[MAX_ARGS - 1 :]))]
        groups = []
        for key, item in items:
            if type(item) is list and _is_records(item):  # data the call writes (a plan, rows), not words
                groups.append((_tag(f"{key}\x00{sorted_dump(item)}"), []))
                continue
            if type(item) is str and _is_block(item):  # a script, a file's content: data too
                groups.append((_tag(f"{key}\x00\x01{item}"), []))
                continue
            words = _WORD.findall(key.lower())
            if isinstance(item, str):  # most arguments: `_words` and the tag's dump, written out
                text = item.strip()
                if _SPACE.search(text):
                    words += _text_words(text, names)
                elif text:
                    words.append(text.lower())
                groups.append((_tag(f"{key}\x00\x01{item}"), words))
            elif type(item) in _SCALARS:  # a number, a flag: its one word is its dump, the tag's too (dumped once)
                dumped = sorted_dump(item)
                words.append(dumped)
                groups.append((_tag(f"{key}\x00{dumped}"), words))
            else:
                _words(item, words, names)
                groups.append((_tag(f"{key}\x00{sorted_dump(item)}"), words))
    else:
        words = []
        _words(value, words, names)
        groups = [(_tag(sorted_dump(value)), words)]
    # A word's token is the last TOKEN_HEX hex digits of its XXH3-64 (its low bits): hex of one width sorts
    # as the numbers do, so the smallest hashes are kept without formatting each one.
    hexdigest = xxhash.xxh3_64_hexdigest
    hashed: list[tuple[str, set[str]]] = []
    every: set[str] = set()
    for tag, words in groups:
        hashes = {hexdigest(word.encode("utf-8", "surrogatepass"))[-TOKEN_HEX:] for word in words}
        every |= hashes
        hashed.append((tag, hashes))
    if len(every) > MAX_TOKENS:
        kept = set(sorted(every)[:MAX_TOKENS])
        hashed = [(tag, hashes & kept) for tag, hashes in hashed]
    return tuple([(tag, tuple(sorted(hashes))) for tag, hashes in hashed])


def _text_words(original: str, names: set[str]) -> list[str]:
    """The words of free text, lowercase: its [a-z0-9] runs, but a path, a file or a dotted name in it
    ("tests/test_parser.py", "asyncio.gather") is one word, as it is on its own: a shell command run on
    another file is another command, not a rephrasing. The paths, file names, numbers and names (a
    capitalised word inside a sentence: "weather for Paris", then "for Lyon"; a quoted literal: a
    column in code, a value in SQL) it names are added to `names`."""
    text = original.lower()
    if text != original:  # something capitalised (each regex pass costs about 2 us on a sentence)
        names.update(name.lower() for name in _NAME.findall(original))
    if "'" in original or '"' in original:
        names.update(literal.lower() for _, literal in _QUOTED.findall(original))
    if "/" not in text and "." not in text:  # most text: one pass, its numbers read from its words
        plain = _WORD.findall(text)
        names.update(digits for word in plain if not word.isalpha() for digits in _DIGITS.findall(word))
        return plain
    words: list[str] = []
    for chunk in text.split():
        name = chunk.strip(_AROUND)
        if "/" in name or "." in name.rstrip("."):
            words.append(name)
            if "/" in name or _FILE.search(name):
                names.add(name)
                continue
        else:
            words += _WORD.findall(chunk)
        names.update(_DIGITS.findall(name))
    return words


def _is_block(text: str) -> bool:
    """A text of three lines or more: code, a file's content, a document the call writes or runs. Edited
    and sent again it is work; sent again unchanged, `repeat_call`'s."""
    return text.count("\n") >= 2 and text.count("\n", 0, len(text.rstrip())) >= 2


def _is_records(value: Any) -> bool:
    """A list of objects: a to-do list or plan rewritten whole at every step, rows to insert."""
    return type(value) is list and bool(value) and all(type(item) is dict for item in value)


def _tag(text: str) -> str:
    """8 hex characters naming one argument and its value (XXH3-64's low 32 bits)."""
    return "%08x" % (xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass")) & 0xFFFFFFFF)


def _words(value: Any, out: list[str], names: set[str], depth: int = 0) -> None:
    """Append the words of an argument value to `out` (see `arg_sketch`)."""
    if depth > MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_WORD.findall(str(key).lower()))
            _words(item, out, names, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _words(item, out, names, depth + 1)
    elif isinstance(value, str) and not _is_block(value):
        text = value.strip()
        if _SPACE.search(text):
            out.extend(_text_words(text, names))
        elif text:
            out.append(text.lower())
    else:
        out.append(sorted_dump(value))


def sketch_similarity(a: Sketch, b: Sketch) -> float:
    """How near two calls' arguments are: `jaccard` over the words of the arguments they do not share.

    A parameter both calls pass with the same value (a fixed `max_results`, an
    exchange, a query language) says nothing about whether they ask the same
    thing, so it does not count. Calls sharing every argument are identical
    (1.0); calls with no words at all (no arguments) are 0.0, as for `jaccard`.
    """
    shared = {tag for tag, _ in a if tag} & {tag for tag, _ in b}
    rest_a = [token for tag, tokens in a if tag not in shared for token in tokens]
    rest_b = [token for tag, tokens in b if tag not in shared for token in tokens]
    if rest_a or rest_b:
        return jaccard(rest_a, rest_b)
    return 1.0 if any(tokens for _, tokens in a) else 0.0


def writes_apart(a: Sketch, b: Sketch) -> bool:
    """Whether two calls write other data: an argument that has no words (a text of three lines or more, a
    list of objects: `arg_sketch`) is in one call and not, with that value, in the other. Two edits of one
    file at two places (another old and new text each), two scripts, two files' contents are other work,
    however alike the words of their other arguments (the same path): `sketch_similarity` compares words only,
    and finds nothing to tell them apart."""
    shared = {tag for tag, _ in a} & {tag for tag, _ in b}
    return any(not tokens and tag not in shared for tag, tokens in (*a, *b))


def encode_sketch(sketch: Sketch) -> str:
    """A sketch packed for state: "<tag>.<packed tokens>" per argument, joined by ";"."""
    return ";".join([f"{tag}.{encode_tokens(tokens)}" for tag, tokens in sketch])


def decode_sketch(text: str) -> Sketch:
    """The sketch `encode_sketch` packed; a bare token pack (an older entry) reads as one untagged argument."""
    out = []
    for part in text.split(";"):
        tag, _, packed = part.rpartition(".")
        out.append((tag, decode_tokens(packed)))
    return tuple(out)


def encode_tokens(tokens: Iterable[str]) -> str:
    """Token hashes packed for state: base64 of their bytes (a third shorter than the hex)."""
    # binascii, not base64.b64encode (a Python wrapper around it): every response's calls are packed.
    return binascii.b2a_base64(bytes.fromhex("".join(tokens)), newline=False).decode("ascii")


def decode_tokens(text: str) -> tuple[str, ...]:
    """The token hashes `encode_tokens` packed; an unreadable value reads as no tokens."""
    try:
        packed = base64.b64decode(text, validate=True).hex()
    except ValueError:
        return ()
    return tuple(packed[i : i + TOKEN_HEX] for i in range(0, len(packed) - TOKEN_HEX + 1, TOKEN_HEX))


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """Jaccard similarity of two token sketches; 0.0 when both are empty.

    Bottom-k estimator: among the k smallest hashes of the union, the share
    present in both. With fewer than k tokens on each side it is exact.
    """
    set_a, set_b = set(a), set(b)
    union = sorted(set_a | set_b)[:MAX_TOKENS]
    if not union:
        return 0.0
    both = sum(1 for token in union if token in set_a and token in set_b)
    return both / len(union)


_FILE = re.compile(r"\.[a-z0-9]{1,5}$")  # a file name's extension (or a version's minor number)
_DIGITS = re.compile(r"\d+")
_NAME = re.compile(r"(?<=[\w,;)'\"] )[A-Z][\w-]*")  # a capitalised word inside a sentence (not its first)
_QUOTED = re.compile(r"""(['"])([^'"\s]{1,64})\1""")  # a quoted literal: a column, a value in code or SQL


MAX_NAMED = 6  # names kept per call by `call_targets`


def _named(names: set[str]) -> str:
    """Up to `MAX_NAMED` names as 2-hex hashes, sorted and concatenated ("-" for none)."""
    if not names:
        return "-"
    return "".join(sorted({digest(name, 1) for name in names})[:MAX_NAMED])


def named_apart(a: str, b: str) -> bool:
    """Whether two `call_targets` name other things: each names something, and neither names all that
    the other does (a rephrasing that adds a year to its words still asks the same)."""
    if a == b or a in ("-", "") or b in ("-", ""):
        return False
    first, second = {a[i : i + 2] for i in range(0, len(a), 2)}, {b[i : i + 2] for i in range(0, len(b), 2)}
    return not (first <= second or second <= first)


def call_targets(call: ToolCall) -> str:
    """The paths, file names, numbers and names a call's free-text arguments name, as `_named` keeps them
    (see `named_apart`): a shell command run on another file, a query for another year, order or city is
    other work however alike the rest of it. Computed once per call, with its sketch."""
    found: str | None = call.derived.get("targets")
    if found is None:
        call_sketch(call)
        found = call.derived["targets"]
    return found
