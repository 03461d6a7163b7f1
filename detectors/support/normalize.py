"""Normalizing tool arguments and results into short, comparable hashes.

Detectors keep hashes and small token sets in run state, never content, so
everything here turns one call's arguments or one result's text into a few
bytes, in time linear in that text (never in the conversation). The words of
arguments (sketches) are read in `sketch`, calls paired with their results in
`turns`; both build on what is here.

- `result_digest`: a result's hash with volatile keys (ids, timestamps)
  dropped, so the same answer re-sent with a fresh request id hashes the same;
  `result_digest_of` computes it once per result and key set (several
  detectors read the same result in one request), from the result's JSON
  value when the wire sent one (`value_digest`), else from its text.
- `args_digest`: the exact arguments (canonical JSON) as a hash;
  `call_keyed_digest`: a hash of only the values under some keys (page, cursor).
- `call_*`: the same values for one `ToolCall`, kept on it (`remember`): several
  detectors read the same call in one request.
- `json_value` / `sorted_dump` / `squash`: the JSON reading and writing the
  hashes share (`NOT_JSON` for text that is not JSON).
- `tag` / `clip`: short stand-ins for tool and agent names in state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, MutableMapping
from typing import Any, TypeVar

import orjson
import xxhash

from runguard.proxy.core.events import DIGEST_SIZE, ToolCall, ToolResult, digest

MAX_DEPTH = 32  # nesting levels walked when dropping volatile keys or reading argument words
DEFAULT_VOLATILE_KEYS = (
    "id",
    "request_id",
    "requestId",
    "trace_id",
    "traceId",
    "timestamp",
    "time",
    "created",
    "created_at",
    "createdAt",
    "updated_at",
    "date",
    "etag",
    "nonce",
    "uuid",
)
T = TypeVar("T")
NOT_JSON = object()  # what `json_value` reads from text that is no JSON
_UNREAD = object()  # a result whose JSON was not read yet (`result_json`)


def tag(text: str) -> str:
    """An 8-hex name tag: keeps tool and agent names out of state keys and windows."""
    return digest(text, 4)


def clip(label: str, size: int) -> str:
    """A name cut to `size` characters for state; a cut name keeps a hash of the whole so names stay apart."""
    return label if len(label) <= size else f"{label[: size - 9]}~{tag(label)}"


# What a JSON text may start with once its whitespace is passed: an object, an array, a string, a number, a literal.
_JSON_STARTS = frozenset('{["-0123456789tfn')
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace


def json_value(text: str) -> Any:
    """The JSON value in `text`, or `NOT_JSON` when it is not JSON."""
    try:
        if type(text) is str and _starts_no_json(text):
            return NOT_JSON
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return NOT_JSON


def _starts_no_json(text: str) -> bool:
    """Whether `text` starts, past JSON's whitespace, with a character no JSON value starts with (a file's
    content, a command's output: most text results). orjson reads the whole text before it fails there (27 us
    for 300 KB of ASCII, 105 us of other text); this reads its first characters. A control character is left
    to orjson."""
    head = text[:1]
    if head in _JSON_STARTS:
        return False
    if head in " \t\n\r" and head:
        at = _JSON_SPACE.match(text).end()  # type: ignore[union-attr]  # (it matches the empty string too)
        head = text[at : at + 1]
    return head > " " and head not in _JSON_STARTS


def parse_json(text: str) -> Any:
    """The JSON value in `text`, or None when it is not JSON."""
    value = json_value(text)
    return None if value is NOT_JSON else value


def sorted_dump(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def squash(text: str) -> str:
    """Whitespace runs as one space, ends trimmed (str.split: several times faster than a regex)."""
    return " ".join(text.split())


def canonical(arguments: str) -> str:
    """Canonical JSON of an argument string (sorted keys); other text with whitespace collapsed."""
    value = json_value(arguments)
    if value is NOT_JSON:
        return squash(arguments)
    return sorted_dump(value)


def args_digest(arguments: str) -> str:
    """A hash of the exact arguments, independent of key order and spacing."""
    return digest(canonical(arguments))


def remember(memo: MutableMapping[Any, Any], key: Any, value: T) -> T:
    """Store `value` as `memo[key]` and return it (memos live on one request's objects).

    Each memoized helper reads its memo first and calls this only the first time:
    most reads find the value (several detectors share it), and a read that needs
    no call and no closure costs a fifth of one that does.
    """
    memo[key] = value
    return value


def call_json(call: ToolCall) -> Any:
    """`json_value` of a call's arguments, parsed once per call (its sketch, its page values and `is_wait` read
    it). The value is shared: readers must not change it."""
    found = call.parsed.get("json", _UNREAD)
    return found if found is not _UNREAD else remember(call.parsed, "json", json_value(call.arguments))


def call_canonical(call: ToolCall) -> str:
    """`canonical` of a call's arguments, computed once per call, from their value parsed once (`call_json`)."""
    found: str | None = call.derived.get("canonical")
    if found is not None:
        return found
    value = call_json(call)
    return remember(call.derived, "canonical", squash(call.arguments) if value is NOT_JSON else sorted_dump(value))


def canonical_json(call: ToolCall) -> Any:
    """`json_value(call_canonical(call))`, the canonical form's value, without parsing it again: the arguments'
    value (`call_json`) but for the order of its keys (or that of the squashed text, if they are no JSON)."""
    text = call_canonical(call)  # first: it raises where it would (a value too deep to dump)
    value = call_json(call)
    return json_value(text) if value is NOT_JSON else value


def call_args_digest(call: ToolCall) -> str:
    """`args_digest` of a call's arguments, computed once per call."""
    found: str | None = call.derived.get("args_digest")
    return found if found is not None else remember(call.derived, "args_digest", digest(call_canonical(call)))


def call_tag(call: ToolCall) -> str:
    """`tag` of a call's tool name, computed once per call."""
    found: str | None = call.derived.get("tag")
    return found if found is not None else remember(call.derived, "tag", tag(call.name))


def _walk_pairs(value: Any, keys: Collection[str], out: list[tuple[str, Any]], depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).lower() in keys:
                out.append((str(key), item))
            else:
                _walk_pairs(item, keys, out, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _walk_pairs(item, keys, out, depth + 1)


def call_keyed_digest(call: ToolCall, keys: Collection[str]) -> str:
    """A 4-hex hash of the values under `keys` (lowercase names) anywhere in a call's arguments (parsed once
    per call, `call_json`); "-" if none."""
    return _keyed_digest(call_json(call), keys)


def _keyed_digest(value: Any, keys: Collection[str]) -> str:
    found: list[tuple[str, Any]] = []
    if value is not NOT_JSON:
        _walk_pairs(value, keys, found)
    return digest(sorted_dump(sorted(found, key=lambda pair: pair[0])), 2) if found else "-"


_SCALARS = frozenset((int, float, bool, type(None)))
_OPENERS = ("{", "[")  # a string starting with one of these may be JSON text inside JSON


def _drop_keys(value: Any, keys: Collection[str], depth: int = 0) -> Any:
    """`value` without the dict entries whose key (lowercased) is in `keys`, at any depth.

    Scalars and plain strings are kept as they are without a call of their own:
    they are most of a result, and this runs over every new tool result.
    """
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        for key, item in value.items():
            if key.lower() in keys:
                continue
            kind = item.__class__
            plain = kind in _SCALARS or (kind is str and item[:1] not in _OPENERS)
            kept[key] = item if plain else _drop_keys(item, keys, depth + 1)
        return kept
    if isinstance(value, list):
        return [
            item
            if item.__class__ in _SCALARS or (item.__class__ is str and item[:1] not in _OPENERS)
            else _drop_keys(item, keys, depth + 1)
            for item in value
        ]
    if isinstance(value, str) and value[:1] in _OPENERS:
        # JSON text inside JSON: Gemini wraps a tool's return value as {"result": "<text>"}
        # and MCP tools answer with JSON in a text part; their volatile keys count too.
        inner = json_value(value)
        return value if inner is NOT_JSON else _drop_keys(inner, keys, depth + 1)
    return value


def lowered(keys: Iterable[str]) -> frozenset[str]:
    """Key names as matched: case-insensitively."""
    return frozenset(key.lower() for key in keys)


DEFAULT_VOLATILE = lowered(DEFAULT_VOLATILE_KEYS)


def result_digest(content: str, volatile_keys: Collection[str] = DEFAULT_VOLATILE) -> str:
    """A hash of a tool result without its volatile keys (lowercase names, matched at any depth).

    JSON results are re-dumped canonically; other text is hashed as sent, ends
    trimmed (collapsing its inner whitespace cost more than the rest of the
    request's detector work for a 300 KB file read, and a tool that repeats
    itself repeats its spacing too).
    """
    return _hashed(json_value(content), content, volatile_keys)


def value_digest(value: Any, volatile_keys: Collection[str] = DEFAULT_VOLATILE) -> str:
    """`result_digest` of the result whose JSON text is `value`'s, from the value itself.

    The canonical dump is hashed as orjson's UTF-8 bytes: the same hash as its
    text's, without decoding 300 KB to a string and encoding it back. Raises
    TypeError for a value nested deeper than orjson dumps (255 levels).
    """
    return digest(orjson.dumps(_drop_keys(value, volatile_keys), option=orjson.OPT_SORT_KEYS))


def result_digest_of(result: ToolResult, volatile_keys: frozenset[str] = DEFAULT_VOLATILE) -> str:
    """`result_digest` of a result's content, computed once per key set and kept on the result.

    A result sent as a JSON object (`result.value`) is hashed from that object,
    not parsed back from its dump: for a 300 KB Gemini tool result the parse
    was the largest single cost of the request.
    """
    found = result.digests.get(volatile_keys)
    if found is not None:
        return found
    value = result.value if result.value is not None else result_json(result)
    return remember(result.digests, volatile_keys, _hashed(value, result.content, volatile_keys))


def result_json(result: ToolResult) -> Any:
    """`json_value` of a result's content, parsed once per result (its digests and `novelty`'s units read it).
    The value is shared: readers must not change it."""
    found = result.derived.get("json", _UNREAD)
    return found if found is not _UNREAD else remember(result.derived, "json", json_value(result.content))


# What the client adds to a result and changes every time: replaced by "#" before results are compared.
_VOLATILE = re.compile(
    # Each starts a word (checked first: most positions fail there, and Python's re tries every branch else).
    r"(?<![\w-])(?=[\dabcdefrstABCDEFRST])(?:"
    r"\d[\d,]*(?=\s+tokens?\s+(?:left|remaining))"  # a countdown: "41,230 tokens left"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # a UUID
    r"|(?:chunk|trace|request|session|call|run)[ _-]?id\b[:=#]?\s*[\w-]{6,}"  # "chunk id: a81fQ2x"
    r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"  # a timestamp
    r"|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"  # a time of day
    r"|\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b"  # a duration: "in 0.12s", "took 35 ms"
    r"|0x[0-9a-f]{6,}\b"  # an object's address in a repr
    r"|[0-9a-f]{32,}\b"  # a long random hex id
    r")",
    re.IGNORECASE,
)
HEAD_CHARS, TAIL_CHARS = 1_024, 4_096  # where a client puts what it adds to a long result: its ends
_strip_c: Callable[[str], str | None] | None
try:  # the same replacement in C for most text (`_volatile.c`, built where a C compiler is)
    from runguard.detectors.support._volatile import strip as _strip_c
except ImportError:
    _strip_c = None


def stripper_compiled() -> bool:
    """Whether the C twin of the volatile-text regex is built and in use."""
    return _strip_c is not None


def _without_volatile(text: str) -> str:
    """`_VOLATILE.sub("#", text)`: in C when it is built, ten times faster than the regex or more, for a text
    whose characters beyond ASCII (if any) are none that the pattern reads (an arrow, an emoji: most tool
    output); the regex reads the rest (a letter, digit or space of another script)."""
    if _strip_c is not None:
        stripped = _strip_c(text)
        if stripped is not None:
            return stripped
    return _VOLATILE.sub("#", text)


def strip_volatile(text: str) -> str:
    """`text` with its volatile parts (countdowns, ids, timestamps, durations, addresses) as "#".

    A long text is read at its ends only (its first 1 KB and last 4 KB), where a client adds its reminders
    and a command prints its timing: the whole of a 300 KB file read took 40 ms, the ends take under 1 ms.
    """
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return _without_volatile(text)
    middle = text[HEAD_CHARS:-TAIL_CHARS]
    return _without_volatile(text[:HEAD_CHARS]) + middle + _without_volatile(text[-TAIL_CHARS:])


# Where a result's JSON text may hold what `_drop_keys` changes: a default volatile key (lowercase, quoted) or a
# string that may be JSON text (`"{`, `"[`); a \u escape (`_keeps_all`) could spell either. The lookahead of
# what may follow a quote skips most quotes at once: a third fewer instructions than the alternatives alone.
_MAY_DROP = re.compile(
    r'"(?=[{\[' + "".join(sorted({key[0] for key in DEFAULT_VOLATILE})) + r"])"
    r"(?:[{\[]|(?:" + "|".join(re.escape(key) for key in sorted(DEFAULT_VOLATILE)) + ')")'
)
PLAIN_CHARS = 2_048  # a longer text is not scanned: its scan (~30 instructions a character) may cost more than the walk


def _keeps_all(text: str, volatile_keys: Collection[str]) -> bool:
    """Whether `_drop_keys` would return the value of `text` (JSON) unchanged, read from the text: a short one
    with keys among the defaults, nothing in it that `_MAY_DROP`. For a small JSON result, the walk that copies
    its value was most of its digest's cost; the scan costs half as much."""
    if len(text) > PLAIN_CHARS or not DEFAULT_VOLATILE.issuperset(volatile_keys):
        return False
    lowered = text.lower()
    # A backslash is looked for first: a single character is found at memory speed, "\u" ten times slower.
    return ("\\" not in text or "\\u" not in lowered) and _MAY_DROP.search(lowered) is None


def _hashed(value: Any, text: str, volatile_keys: Collection[str]) -> str:
    """`value_digest` of a result's JSON value (`NOT_JSON`: its text is no JSON), else a hash of its text
    without its volatile parts (`strip_volatile`). `text` is the value's source or dump (`ToolResult.value`)."""
    if value is not NOT_JSON:
        if _keeps_all(text, volatile_keys):
            try:
                return digest(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
            except TypeError:  # too deep to dump, perhaps less once a key is dropped: as before, below
                pass
        try:
            return value_digest(value, volatile_keys)
        except TypeError:  # nested deeper than orjson dumps: hashed as text
            pass
    return volatile_free_digest(text.strip())


def volatile_free_digest(text: str) -> str:
    """`digest(strip_volatile(text))`, without copying a long text's middle twice: its ends are stripped and
    the three parts hashed in turn (XXH3 fed in parts hashes what it hashes whole). An ASCII text (each
    character a byte) is encoded once and its middle read in place."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return digest(_without_volatile(text))
    hasher = xxhash.xxh3_128()
    hasher.update(_without_volatile(text[:HEAD_CHARS]).encode("utf-8", "surrogatepass"))
    if text.isascii():
        hasher.update(memoryview(text.encode("ascii"))[HEAD_CHARS:-TAIL_CHARS])
    else:
        hasher.update(text[HEAD_CHARS:-TAIL_CHARS].encode("utf-8", "surrogatepass"))
    hasher.update(_without_volatile(text[-TAIL_CHARS:]).encode("utf-8", "surrogatepass"))
    return hasher.hexdigest()[: DIGEST_SIZE * 2]
