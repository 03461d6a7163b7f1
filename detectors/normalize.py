"""Normalizing tool arguments and results into short, comparable hashes.

Detectors keep hashes and small token sets in run state, never content, so
everything here turns one call's arguments or one result's text into a few
bytes, in time linear in that text (never in the conversation).

- `arg_sketch`: the words of an argument object as a bounded set of 4-hex
  token hashes (XXH3's low bits; the 48 smallest: a bottom-k sketch), grouped by
  top-level argument with a tag of each argument's value; `sketch_similarity`
  compares two calls by `jaccard` over the words of the arguments they do not
  share (exact while both hold fewer than 48 tokens, an estimate beyond).
  A string with spaces contributes its words; one without (a path, an id, a
  URL) is one word, and so is a path or file name inside text; a list of
  objects (a to-do list, rows) has none. `arg_tokens` is all of a sketch's
  tokens. `call_targets` / `named_apart`: the files, numbers, names and literals a call's
  text names, read in the same pass, and whether two calls name other things.
- `result_digest`: a result's hash with volatile keys (ids, timestamps)
  dropped, so the same answer re-sent with a fresh request id hashes the same;
  `result_digest_of` computes it once per result and key set (several
  detectors read the same result in one request), from the result's JSON
  value when the wire sent one (`value_digest`), else from its text.
- `args_digest`: the exact arguments (canonical JSON) as a hash;
  `keyed_values_digest`: a hash of only the values under some keys (page, cursor).
- `paired_results` / `turn_signature`: the last assistant turn's calls with
  the results the request sends back for them.
- `acknowledges` / `is_wait` / `tool_work`: a result that only says the call was
  done, a call that only lets time pass, and a response's calls less those
  handing work to another agent.
- `call_*`: the same values for one `ToolCall`, kept on it: several detectors
  read the same call in one request.
- `tag` / `clip`: short stand-ins for tool and agent names in state.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Collection, Iterable, MutableMapping, Sequence
from typing import Any, TypeVar

import orjson
import xxhash

from runguard.proxy.core.events import HandoffKind, RequestInfo, ResponseInfo, ToolCall, ToolResult, digest, is_transfer

MAX_TOKENS = 48  # tokens kept per argument set: bounds state and pairwise work
TOKEN_HEX = 4  # hex characters per token hash
MAX_ARGS = 16  # top-level arguments kept apart in a sketch; the rest share one group
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
_WORD = re.compile(r"[a-z0-9]+")
ACK_CHARS = 200  # a longer result says more than that it was done
_DONE = re.compile(
    r"\b(?:ok|okay|success|successful|successfully|succeeded|done|true|saved|written|wrote|sent|created"
    r"|updated|deleted|removed|applied|completed|stored|uploaded|edited|modified|changed|replaced|inserted"
    r"|added|appended|moved|renamed|copied|patched|posted|published|scheduled|booked|cancelled|canceled"
    r"|archived|marked|assigned|closed|merged|committed|pushed|deployed|installed|recorded|logged|noted"
    r"|confirmed|accepted|approved|enabled|disabled|set)\b"
)
_NOT_DONE = re.compile(
    r"error|fail|invalid|denied|not found|unable|cannot|can't|could not|couldn't|timeout|timed out|retry|try again"
    r"|unavailable|partial|exception|refused|forbidden|unauthori|missing|empty|no results|not allowed|rejected"
    r"|conflict|too many|rate limit|null|none|false|pending|queued|later|\bnot\b|\bno\b|nothing|unchanged"
    r"|skipped|ignored|already"
)
_SPACE = re.compile(r"\s")
_AROUND = "'\"`()[]{}<>,;:!?"  # quotes and punctuation around a word of free text
Sketch = tuple[tuple[str, tuple[str, ...]], ...]  # (argument tag, its token hashes) per top-level argument
T = TypeVar("T")
_MISSING = object()


def tag(text: str) -> str:
    """An 8-hex name tag: keeps tool and agent names out of state keys and windows."""
    return digest(text, 4)


def clip(label: str, size: int) -> str:
    """A name cut to `size` characters for state; a cut name keeps a hash of the whole so names stay apart."""
    return label if len(label) <= size else f"{label[: size - 9]}~{tag(label)}"


def _parse(text: str) -> Any:
    """The JSON value in `text`, or `_MISSING` when it is not JSON."""
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return _MISSING


def parse_json(text: str) -> Any:
    """The JSON value in `text`, or None when it is not JSON."""
    value = _parse(text)
    return None if value is _MISSING else value


def _dump(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _squash(text: str) -> str:
    """Whitespace runs as one space, ends trimmed (str.split: several times faster than a regex)."""
    return " ".join(text.split())


def canonical(arguments: str) -> str:
    """Canonical JSON of an argument string (sorted keys); other text with whitespace collapsed."""
    value = _parse(arguments)
    if value is _MISSING:
        return _squash(arguments)
    return _dump(value)


def args_digest(arguments: str) -> str:
    """A hash of the exact arguments, independent of key order and spacing."""
    return digest(canonical(arguments))


def _keep(memo: MutableMapping[Any, Any], key: Any, value: T) -> T:
    """Store `value` as `memo[key]` and return it (memos live on one request's objects).

    Each memoized helper reads its memo first and calls this only the first time:
    most reads find the value (several detectors share it), and a read that needs
    no call and no closure costs a fifth of one that does.
    """
    memo[key] = value
    return value


def call_canonical(call: ToolCall) -> str:
    """`canonical` of a call's arguments, computed once per call."""
    found: str | None = call.derived.get("canonical")
    return found if found is not None else _keep(call.derived, "canonical", canonical(call.arguments))


def call_args_digest(call: ToolCall) -> str:
    """`args_digest` of a call's arguments, computed once per call."""
    found: str | None = call.derived.get("args_digest")
    return found if found is not None else _keep(call.derived, "args_digest", digest(call_canonical(call)))


def call_tag(call: ToolCall) -> str:
    """`tag` of a call's tool name, computed once per call."""
    found: str | None = call.derived.get("tag")
    return found if found is not None else _keep(call.derived, "tag", tag(call.name))


def arg_tokens(arguments: str) -> tuple[str, ...]:
    """All the argument words of `arg_sketch`, sorted."""
    return _all_tokens(arg_sketch(arguments))


def call_sketch(call: ToolCall) -> Sketch:
    """`arg_sketch` of a call's arguments (read from their canonical form), computed once per call (with
    `call_targets`, read in the same pass)."""
    found: Sketch | None = call.derived.get("sketch")
    if found is None:
        names: set[str] = set()
        found = _keep(call.derived, "sketch", _sketch(call_canonical(call), names))
        call.derived["targets"] = _named(names)
    return found


def call_sketch_packed(call: ToolCall) -> str:
    """`encode_sketch` of a call's sketch, computed once per call (`spiral` and `parallel_calls` both store it)."""
    found: str | None = call.derived.get("sketch_packed")
    return found if found is not None else _keep(call.derived, "sketch_packed", encode_sketch(call_sketch(call)))


def call_asks_in_words(call: ToolCall) -> bool:
    """Whether a call's arguments hold free text (a string with whitespace: a query, a question),
    not only names, ids and numbers; computed once per call."""
    found: bool | None = call.derived.get("in_words")
    if found is None:
        found = _keep(call.derived, "in_words", _has_free_text(_parse(call_canonical(call))))
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


def _sketch(arguments: str, names: set[str]) -> Sketch:
    """`arg_sketch`, adding the files, numbers and names its free text names to `names` (`call_targets`)."""
    value = _parse(arguments)
    if value is _MISSING:  # a custom tool's raw input: a block of code has no words either
        groups = [(_tag(_squash(arguments)), [] if _is_block(arguments) else _WORD.findall(arguments.lower()))]
    elif isinstance(value, dict) and value:
        items = sorted(value.items())
        if len(items) >= MAX_ARGS:
            items = [*items[: MAX_ARGS - 1], ("", dict(items[MAX_ARGS - 1 :]))]
        groups = []
        for key, item in items:
            if type(item) is list and _is_records(item):  # data the call writes (a plan, rows), not words
                groups.append((_tag(f"{key}\x00{_dump(item)}"), []))
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
            else:
                _words(item, words, names)
                groups.append((_tag(f"{key}\x00{_dump(item)}"), words))
    else:
        words = []
        _words(value, words, names)
        groups = [(_tag(_dump(value)), words)]
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
        out.append(_dump(value))


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


def encode_sketch(sketch: Sketch) -> str:
    """A sketch packed for state: "<tag>.<packed tokens>" per argument, joined by ";"."""
    return ";".join(f"{tag}.{encode_tokens(tokens)}" for tag, tokens in sketch)


def decode_sketch(text: str) -> Sketch:
    """The sketch `encode_sketch` packed; a bare token pack (an older entry) reads as one untagged argument."""
    out = []
    for part in text.split(";"):
        tag, _, packed = part.rpartition(".")
        out.append((tag, decode_tokens(packed)))
    return tuple(out)


def encode_tokens(tokens: Iterable[str]) -> str:
    """Token hashes packed for state: base64 of their bytes (a third shorter than the hex)."""
    return base64.b64encode(bytes.fromhex("".join(tokens))).decode("ascii")


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


def keyed_values_digest(arguments: str, keys: Collection[str]) -> str:
    """A 4-hex hash of the values under `keys` (lowercase names) anywhere in the arguments; "-" if none."""
    value = _parse(arguments)
    found: list[tuple[str, Any]] = []
    if value is not _MISSING:
        _walk_pairs(value, keys, found)
    return digest(_dump(sorted(found, key=lambda pair: pair[0])), TOKEN_HEX // 2) if found else "-"


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
        inner = _parse(value)
        return value if inner is _MISSING else _drop_keys(inner, keys, depth + 1)
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
    return _hashed(_parse(content), content, volatile_keys)


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
    value = result.value if result.value is not None else _parse(result.content)
    return _keep(result.digests, volatile_keys, _hashed(value, result.content, volatile_keys))


def _hashed(value: Any, text: str, volatile_keys: Collection[str]) -> str:
    """`value_digest` of a result's JSON value (`_MISSING`: its text is no JSON), else a hash of its text."""
    if value is not _MISSING:
        try:
            return value_digest(value, volatile_keys)
        except TypeError:  # nested deeper than orjson dumps: hashed as text
            pass
    return digest(text.strip())


def _call_positions(request: RequestInfo) -> list[int | None]:
    """For each new result, the position of the prior call it answers: by call id, else the next of that name.

    Computed once per request (several detectors pair results with calls).
    """
    found: list[int | None] | None = request.derived.get("positions")
    return found if found is not None else _keep(request.derived, "positions", _positions(request))


def _positions(request: RequestInfo) -> list[int | None]:
    calls = request.prior_calls
    free = set(range(len(calls)))
    by_id = {call.call_id: i for i, call in enumerate(calls) if call.call_id}
    positions: list[int | None] = []
    for result in request.new_results:
        found = by_id.get(result.call_id) if result.call_id else None
        if found is None or found not in free:
            found = next((i for i in sorted(free) if calls[i].name == result.name), None)
        if found is not None:
            free.discard(found)
        positions.append(found)
    return positions


def paired_results(request: RequestInfo) -> list[tuple[ToolCall | None, ToolResult]]:
    """Each new tool result with the prior call it answers (None when no call matches)."""
    positions = _call_positions(request)
    return [
        (None if i is None else request.prior_calls[i], result)
        for i, result in zip(positions, request.new_results, strict=True)
    ]


def result_uniq(request: RequestInfo, result: ToolResult, position: int) -> str:
    """Identifies one tool result across re-sends: its call id, or (Gemini) where it sits in the conversation."""
    return tag(result.call_id or f"{request.message_count}.{position}")


_WAITS = ("wait", "sleep", "pause", "delay")


def is_wait(call: ToolCall) -> bool:
    """A call that only lets time pass (`wait(seconds=10)`, `sleep(ms=500)`): a poll makes the same one, with
    the same answer, each round; what the poll finds is what tells progress."""
    if not call.name.lower().startswith(_WAITS):
        return False
    value = _parse(call_canonical(call))
    return isinstance(value, dict) and all(type(item) in (int, float) for item in value.values())


def acknowledges(result: ToolResult) -> bool:
    """Whether a tool result only says that what was asked was done ("ok", "File written successfully.",
    `{"status": "sent"}`): a short text with a word of success and none of failure or delay. A tool that
    writes, sends or saves answers so every time it works: the same answer is progress there."""
    content = result.content
    if len(content) > ACK_CHARS:
        return False
    text = content.lower()
    return _DONE.search(text) is not None and _NOT_DONE.search(text) is None


def tool_work(response: ResponseInfo) -> list[ToolCall]:
    """The response's calls that use a tool: not a transfer to another agent (`is_transfer`), nor a
    delegation (Agno's `delegate_task_to_member`, a call of an agent tool: a leader's work is handing out
    tasks). `handoff_cycle` judges both; the detectors that count how often a tool is used leave them out."""
    calls = response.tool_calls
    if not response.handoffs:
        return [call for call in calls if not is_transfer(call.name)]
    delegated = {h.call_id or h.tool for h in response.handoffs if h.kind is HandoffKind.DELEGATE}
    return [call for call in calls if not is_transfer(call.name) and (call.call_id or call.name) not in delegated]


def turn_signature(request: RequestInfo) -> tuple[str, str] | None:
    """The last assistant turn as one action: (hash of its calls and their results, a per-turn id).

    None when that turn made no tool calls but transfers to another agent
    (`is_transfer`: an acknowledged handoff is the same call and result in every
    round of a healthy review loop). Calls are sorted, so a parallel batch in
    another order is the same action. Computed once per request.
    """
    if all(is_transfer(call.name) for call in request.prior_calls):
        return None
    found: tuple[str, str] | None = request.derived.get("turn")
    return found if found is not None else _keep(request.derived, "turn", _turn_signature(request))


def _turn_signature(request: RequestInfo) -> tuple[str, str]:
    answered = {i: r for i, r in zip(_call_positions(request), request.new_results, strict=True) if i is not None}
    parts = sorted(
        f"{call.name}\x00{call_args_digest(call)}\x00" + (result_digest_of(answered[i]) if i in answered else "-")
        for i, call in enumerate(request.prior_calls)
        if not is_transfer(call.name)
    )
    first = request.prior_calls[0].call_id
    return digest("\x01".join(parts)), tag(first or f"turn.{request.message_count}")
