"""Reading a long conversation from where its last request left off (its Slot: where checkpoints are kept).

An agent loop resends its whole history with every request: request N+1 is
request N's bytes with the new turn spliced in before the end of the
conversation array. Parsing all of it again costs a JSON parse of the whole
history per request (and the walk over it), so a late request of a long run
cost far more than an early one. A `Checkpoint` remembers, for a request, how
many bytes of it lead up to the end of its conversation array's last item,
an XXH3-128 of those bytes, the top-level keys before the array, and the
conversation those items make, read as earlier turns. The next request that
starts with the same bytes is read from there: only the new items and the
keys after the array are parsed.

This is a cache, not state: a miss (another replica, an evicted entry, a
history that was edited) reads the whole request, as always, and results are
the same either way (a property test holds it). Entries are looked up per API
key (one tenant's requests never resume from another's), by run header and the
body's first bytes; their size is bounded.

A body with duplicate top-level keys may be read differently here than by
a whole parse; providers disagree on those too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import field
from typing import Any

import orjson
import xxhash

from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers.common.conversation import Conversation, last_index
from runguard.proxy.providers.common.handoff_history import carried
from runguard.proxy.providers.common.jsonish import load_object

MIN_BODY = 32 * 1024  # bytes: a shorter request is read whole (its parse costs less than the bookkeeping)
HEAD_BYTES = 4096  # how much of a body picks its entry (with the API key and run header); < MIN_BODY
PER_ENTRY = 4  # checkpoints kept per entry: runs that share a start (no run header, same prompt)
MAX_TRIES = 4  # places `],"key"` tried for the end of the array before giving up on a checkpoint
_ITEMS = "\x00runguard-items"  # the key the new items are parsed under (no provider's)
_OPEN = b'{"\\u0000runguard-items":[0'  # ... followed by `,item,item],"key":value}`
_SPACE = b" \t\r\n"
Hasher = xxhash.xxh3_128


@frozen
class Checkpoint:
    """Where a request's conversation array ended, and what its items said."""

    length: int  # body[:length] ends with the array's last item
    digest: bytes  # XXH3-128 of body[:length]
    head: dict[str, Any]  # the top-level keys before the array, as parsed
    earlier: Conversation = field(compare=False)  # the items, all read as earlier turns; never read into
    weight: int  # bytes it holds, about


@frozen
class Resumed:
    """A request read up to its new items: the caller reads them into `talk`."""

    head: dict[str, Any]  # the top-level keys before the array (the checkpoint's)
    after: dict[str, Any]  # the top-level keys after the array
    items: list[Any]  # the array's items after the checkpoint's
    talk: Conversation  # the checkpoint's conversation, copied: read on into it


class HistoryCache:
    """Checkpoints of recent long requests, least recently used dropped first, `max_bytes` at most."""

    def __init__(self, max_bytes: int, min_body: int = MIN_BODY) -> None:
        self.max_bytes = max_bytes
        self.min_body = min_body  # a shorter body is read whole
        self._entries: OrderedDict[tuple[str, ...], list[Checkpoint]] = OrderedDict()
        self._weight = 0
        self.resumed = 0  # long requests read from a checkpoint
        self.whole = 0  # long requests read whole (no checkpoint fitted)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        return self._weight

    def find(self, key: tuple[str, ...], body: bytes) -> tuple[Checkpoint, Hasher] | None:
        """The latest checkpoint under `key` that `body` starts with (same bytes up to its length),
        and the hash of those bytes, to hash on from (the next checkpoint's lies further on)."""
        found = self._entries.get(key)
        if not found:
            return None
        self._entries.move_to_end(key)
        view = memoryview(body)
        for point in reversed(found):
            if point.length < len(body):
                hasher = xxhash.xxh3_128(view[: point.length])
                if hasher.digest() == point.digest:
                    return point, hasher
        return None

    def keep(self, key: tuple[str, ...], point: Checkpoint | None, replaces: Checkpoint | None = None) -> None:
        """Keep `point` (if any) under `key`, in place of `replaces` (the one it was read from)."""
        if point is None or point.weight > self.max_bytes // 8:
            return
        found = self._entries.setdefault(key, [])
        self._entries.move_to_end(key)
        for index, held in enumerate(found):
            if held is replaces:
                del found[index]
                self._weight -= held.weight
                break
        found.append(point)
        self._weight += point.weight
        if len(found) > PER_ENTRY:
            self._weight -= found.pop(0).weight
        while self._weight > self.max_bytes and self._entries:
            _, dropped = self._entries.popitem(last=False)
            self._weight -= sum(p.weight for p in dropped)


@frozen
class HistorySlot:
    """Where a request's checkpoints are kept: the cache, and the request's entry in it."""

    cache: HistoryCache
    key_hash: str
    run: str  # the run header, or ""

    def key_of(self, api: str, body: bytes) -> tuple[str, ...]:
        """The request's entry: its API key, API, run header, and how its body starts (the same for
        every request of a run once it is long: those bytes precede its checkpoints)."""
        start = memoryview(body)[: min(HEAD_BYTES, self.cache.min_body)]
        return (self.key_hash, api, self.run, xxhash.xxh3_64_hexdigest(start))


ItemsReader = Callable[[Conversation, list[Any], bool], Conversation | None]
"""Reads a conversation array's items into a conversation and returns the conversation of them all read
as earlier turns (the next checkpoint's). With `resumed` the conversation holds the items before them, and
None (nothing read) says the last turn is not among the new items."""

Span = Callable[[Conversation, list[Any], int, int], None]


def keep_turns(
    talk: Conversation,
    items: list[Any],
    resumed: bool,
    is_turn: Callable[[Any], bool],
    count_earlier: Span,
    read_tail: Callable[[Conversation, list[Any], int], None],
) -> Conversation | None:
    """An `ItemsReader` for an API whose last turn begins at its last assistant item (`is_turn`):
    items before it are counted (`count_earlier` over a span), the rest read (`read_tail` from an index)."""
    tail = last_index(items, is_turn)
    if resumed and tail < 0:
        return None
    tail = max(tail, 0)
    count_earlier(talk, items, 0, tail)
    kept = talk.copy()
    count_earlier(kept, items, tail, len(items))
    read_tail(talk, items, tail)
    return kept


def read_conversation(
    body: bytes,
    slot: HistorySlot | None,
    api: str,
    array: str,
    read_items: ItemsReader,
    read_whole: Callable[[Conversation, Any], None],
) -> tuple[dict[str, Any], Conversation] | str:
    """The body's top-level object and the conversation its `array` makes, or why it is no object.

    A short body, or one without a `slot`, is read whole with `read_whole`, as
    ever. A long one resumes from a checkpoint it starts with, if there is one,
    and leaves a checkpoint for the next request.
    """
    key = slot.key_of(api, body) if slot is not None and len(body) >= slot.cache.min_body else None
    if slot is not None and key is not None:
        found = slot.cache.find(key, body)
        if found is not None:
            point, hashed = found
            resumed = resume(body, point, array)
            kept = read_items(resumed.talk, resumed.items, True) if resumed is not None else None
            if resumed is not None and kept is not None:
                following = place(body, resumed.head, resumed.after, kept, (point.length, hashed))
                slot.cache.keep(key, following, replaces=point)
                slot.cache.resumed += 1
                return {**resumed.head, **resumed.after}, resumed.talk
        slot.cache.whole += 1
    data, problem = load_object(body)
    if data is None:
        return problem or "unreadable"
    talk = Conversation()
    raw = data.get(array)
    if type(raw) is list and (transcript := carried(raw)) is not None:  # openai-agents' nested handoff history
        talk.rooted(transcript.root)
        talk.handed_to(transcript.handed_to)
    if slot is None or key is None or type(raw) is not list:
        read_whole(talk, raw)
        return data, talk
    kept = read_items(talk, raw, False)
    assert kept is not None  # only a resumed read may refuse
    keys = list(data)
    at = keys.index(array)
    head = {k: data[k] for k in keys[:at]}
    slot.cache.keep(key, place(body, head, {k: data[k] for k in keys[at + 1 :]}, kept))
    return data, talk


def resume(body: bytes, point: Checkpoint, array: str) -> Resumed | None:
    """Read `body` from `point` on: None unless new items follow the checkpoint's (a retry sends none)."""
    try:
        data = orjson.loads(_OPEN + memoryview(body)[point.length :])
    except orjson.JSONDecodeError:
        return None
    if type(data) is not dict:
        return None
    items = data.pop(_ITEMS, None)
    if type(items) is not list or len(items) < 2 or type(items[0]) is not int or items[0] != 0 or array in data:
        return None
    return Resumed(point.head, data, items[1:], point.earlier.copy())


def place(
    body: bytes,
    head: dict[str, Any],
    after: dict[str, Any],
    earlier: Conversation,
    hashed: tuple[int, Hasher] | None = None,
) -> Checkpoint | None:
    """A checkpoint at the end of the last item of the array between the top-level keys `head` and
    `after` (None if it cannot be placed). `hashed`: the hash of the body's first bytes, and how
    many (the checkpoint this body was read from): hashing goes on from there.

    The array's last item ends before the `]` that is followed by the first
    key of `after` (or by the body's closing brace). That key's name may also
    occur inside later values, so each place is tried from the end: only at
    the true one does the rest of the body parse as one object equal to `after`.
    """
    close = _array_close(body, after)
    if close is None:
        return None
    length = _last_byte(body, close) + 1
    if length == 0 or body[length - 1] == ord("["):  # an empty array: nothing to resume from
        return None
    weight = 256 + len(orjson.dumps(head)) + earlier.weight()
    view = memoryview(body)
    if hashed is not None and hashed[0] <= length:
        done, hasher = hashed
        hasher.update(view[done:length])
        digest = hasher.digest()
    else:
        digest = xxhash.xxh3_128_digest(view[:length])
    return Checkpoint(length, digest, head, earlier, weight)


def _last_byte(body: bytes, before: int) -> int:
    """The offset of the last byte before `before` that is not JSON whitespace (-1: none)."""
    at = before - 1
    while at >= 0 and body[at] in _SPACE:
        at -= 1
    return at


def _array_close(body: bytes, after: dict[str, Any]) -> int | None:
    """The offset of the `]` that closes the array followed by the top-level keys `after`."""
    end = _last_byte(body, len(body)) + 1
    if end == 0 or body[end - 1] != ord("}"):
        return None
    if not after:
        close = _last_byte(body, end - 1)
        return close if close >= 0 and body[close] == ord("]") else None
    try:
        needle = orjson.dumps(next(iter(after)))
    except TypeError:
        return None
    high, tries = end, MAX_TRIES
    while tries:
        at = body.rfind(needle, 0, high)
        if at < 0:
            return None
        high = at
        comma = _last_byte(body, at)
        if comma < 1 or body[comma] != ord(","):
            continue
        close = _last_byte(body, comma)
        if close < 0 or body[close] != ord("]"):
            continue
        if _parses_as(b"{" + body[at:end], after):
            return close
        tries -= 1
    return None


def _parses_as(text: bytes, expected: dict[str, Any]) -> bool:
    try:
        return bool(orjson.loads(text) == expected)
    except orjson.JSONDecodeError:
        return False
