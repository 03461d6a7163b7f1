"""A long conversation read from its last request's checkpoint reads exactly as a whole parse does.

Each test plays a run: the same conversation resent with more items every
request, serialized the way one client would (its key order and separators
kept for the whole run), and every request is read twice: through a
`HistorySlot` (from a checkpoint when one fits) and whole. The `RequestInfo`s
must be equal; the cache's counts show the checkpoints were used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runguard.proxy.providers.base import Adapter, RequestContext
from runguard.proxy.providers.common.conversation import Conversation
from runguard.proxy.providers.common.history import HistoryCache, HistorySlot, place, read_conversation
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter, keep_messages, read_messages
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from tests.proxy.providers.common.test_earlier_turns import (
    _CHAT_MESSAGE,
    _CHAT_TURNS,
    _GEMINI_CONTENT,
    _GEMINI_TURNS,
    _INPUT_ITEM,
    _TURNS,
    chat_loop,
    gemini_loop,
    responses_loop,
)

ARRAY = {"chat": "messages", "responses": "input", "gemini": "contents"}
ADAPTERS: dict[str, Callable[[], Adapter]] = {
    "chat": ChatAdapter,
    "responses": ResponsesAdapter,
    "gemini": GeminiAdapter,
}
TOOLS = [{"type": "function", "function": {"name": "model", "parameters": {"model": {"type": "string"}}}}]
Dumps = Callable[[Any], bytes]
LAYOUTS: dict[str, Dumps] = {
    "compact": lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(),  # httpx >= 0.28
    "json": lambda value: json.dumps(value).encode(),  # ", " and ": ", ASCII escapes: older httpx
    "indented": lambda value: json.dumps(value, indent=2, ensure_ascii=False).encode(),
}


def body_of(api: str, items: Any, layout: Dumps, array_at: int, request: int, *, changing_first: bool = False) -> bytes:
    """A request with `items` at position `array_at` among the other top-level keys, and a key whose
    value changes every request after them all (before them all with `changing_first`).

    `"model"` follows the array in most layouts, and also occurs inside the
    tools and as a string value: the checkpoint must find the array's end anyway.
    """
    others: list[tuple[str, Any]] = [("model", "gpt-4.1-mini"), ("tools", TOOLS)]
    if api != "gemini":
        others.append(("safety_identifier", "user-4711"))  # read on either side of the array
    if api == "responses":
        others.append(("instructions", "Be brief."))
    elif api == "gemini":
        others.append(("systemInstruction", {"parts": [{"text": "Be brief."}]}))
    pairs = [*others[:array_at], (ARRAY[api], items), *others[array_at:]]
    changing = ("metadata", {"request": request, "note": "model"})  # read afresh each time
    return layout(dict([changing, *pairs] if changing_first else [*pairs, changing]))


def play(
    api: str, items: list[Any], cuts: list[int], layout: Dumps, array_at: int, *, changing_first: bool = False
) -> HistoryCache:
    """Send `items[:cut]` for each cut as one run; every read through the cache equals the whole read."""
    cache = HistoryCache(1 << 20, min_body=0)
    slot = HistorySlot(cache, "k_test", "run-1")
    adapter = ADAPTERS[api]()
    for request, cut in enumerate(cuts):
        body = body_of(api, items[:cut], layout, array_at, request, changing_first=changing_first)
        resumed = adapter.parse_request(body, RequestContext(path_model="m", history=slot))
        whole = adapter.parse_request(body, RequestContext(path_model="m"))
        assert resumed == whole, f"request {request} (items[:{cut}])"
    return cache


def cuts_of(length: int, data: st.DataObject) -> list[int]:
    points = data.draw(st.lists(st.integers(1, max(length, 1)), min_size=1, max_size=8), label="cuts")
    return sorted(set(points))


ITEMS = {  # turns as agents send them, two times in three
    "chat": st.one_of(st.lists(_CHAT_MESSAGE, max_size=14), _CHAT_TURNS, _CHAT_TURNS),
    "responses": st.one_of(st.lists(_INPUT_ITEM, max_size=14), _TURNS, _TURNS),
    "gemini": st.one_of(st.lists(_GEMINI_CONTENT, max_size=14), _GEMINI_TURNS, _GEMINI_TURNS),
}


@pytest.mark.parametrize("api", ["chat", "responses", "gemini"])
@given(data=st.data())
@settings(max_examples=250, deadline=None)
def test_any_growing_conversation_reads_the_same_from_a_checkpoint(api: str, data: st.DataObject) -> None:
    items = data.draw(ITEMS[api], label="items")
    layout = data.draw(st.sampled_from(sorted(LAYOUTS)), label="layout")
    array_at = data.draw(st.integers(0, 4), label="array_at")  # past the keys there are: last
    play(api, items, cuts_of(len(items), data), LAYOUTS[layout], array_at)


LOOPS: dict[str, Callable[[int], list[Any]]] = {"chat": chat_loop, "responses": responses_loop, "gemini": gemini_loop}
ITEMS_PER_STEP = {"chat": 2, "responses": 4, "gemini": 2}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("api", ["chat", "responses", "gemini"])
def test_an_agent_loop_resumes_every_request_after_the_first(api: str, layout: str) -> None:
    items = LOOPS[api](30)
    step = ITEMS_PER_STEP[api]
    first = len(items) - 30 * step
    cuts = [first + step * n for n in range(1, 31)]
    for array_at in (0, 2, 3):
        cache = play(api, items, cuts, LAYOUTS[layout], array_at)
        assert (cache.resumed, cache.whole) == (29, 1), array_at
    # A key that changes every request before the array: no request starts with another's bytes.
    cache = play(api, items, cuts, LAYOUTS[layout], 0, changing_first=True)
    assert (cache.resumed, cache.whole) == (0, 30)


def test_a_retry_an_edited_history_and_a_call_still_without_its_result_are_read_whole() -> None:
    items = chat_loop(12)
    cache = HistoryCache(1 << 20, min_body=0)
    slot = HistorySlot(cache, "k_test", "run-1")
    adapter = ChatAdapter()

    def read(messages: list[Any]) -> None:
        body = body_of("chat", messages, orjson.dumps, 1, 0)
        assert adapter.parse_request(body, RequestContext(history=slot)) == adapter.parse_request(
            body, RequestContext()
        )

    read(items[:-2])
    read(items[:-2])  # a retry: nothing new after the checkpoint
    edited = [*items[:3], {**items[3], "content": "changed"}, *items[4:]]
    read(edited)  # an earlier message differs: its bytes do not match
    read([*edited, {"role": "user", "content": "and?"}])  # no assistant turn among the new messages
    assert (cache.resumed, cache.whole) == (0, 4)
    read([*edited, {"role": "user", "content": "and?"}, *items[-2:]])
    assert (cache.resumed, cache.whole) == (1, 4)


def test_checkpoints_are_kept_per_api_key() -> None:
    cache = HistoryCache(1 << 20, min_body=0)
    adapter = ChatAdapter()
    items = chat_loop(10)
    first, second = (body_of("chat", items[:n], orjson.dumps, 0, 0) for n in (len(items) - 2, len(items)))
    adapter.parse_request(first, RequestContext(history=HistorySlot(cache, "k_one", "")))
    adapter.parse_request(second, RequestContext(history=HistorySlot(cache, "k_two", "")))
    assert (cache.resumed, cache.whole) == (0, 2)  # another key's checkpoint is never used
    adapter.parse_request(second, RequestContext(history=HistorySlot(cache, "k_one", "")))
    assert cache.resumed == 1


def test_runs_that_share_a_start_keep_their_own_checkpoints() -> None:
    """Without a run header, parallel runs of one agent share an entry: each still resumes."""
    cache = HistoryCache(1 << 20, min_body=0)
    adapter = ChatAdapter()
    slot = HistorySlot(cache, "k_test", "")
    runs = [chat_loop(8), [{**m, "content": "other"} if m.get("role") == "tool" else m for m in chat_loop(8)]]
    for cut in (len(runs[0]) - 4, len(runs[0]) - 2, len(runs[0])):
        for items in runs:
            body = body_of("chat", items[:cut], orjson.dumps, 0, 0)
            assert adapter.parse_request(body, RequestContext(history=slot)) == adapter.parse_request(
                body, RequestContext()
            )
    assert (cache.resumed, cache.whole) == (4, 2)


def test_the_cache_stays_within_its_bytes() -> None:
    cache = HistoryCache(64 * 1024, min_body=0)
    adapter = ChatAdapter()
    items = chat_loop(6)
    for run in range(200):
        slot = HistorySlot(cache, "k_test", f"run-{run}")
        adapter.parse_request(body_of("chat", items, orjson.dumps, 0, 0), RequestContext(history=slot))
        assert cache.weight <= cache.max_bytes
    assert 0 < len(cache) < 200  # the least recently used runs were dropped


def test_a_body_whose_array_end_cannot_be_placed_keeps_no_checkpoint() -> None:
    cache = HistoryCache(1 << 20, min_body=0)
    slot = HistorySlot(cache, "k_test", "run-1")
    messages = chat_loop(3)
    body = orjson.dumps({"messages": messages, "model": "m"})
    read = read_conversation(body + b"garbage", slot, "chat", "messages", keep_messages, read_messages)
    assert isinstance(read, str) and "invalid JSON" in read
    assert len(cache) == 0
    kept = keep_messages(Conversation(), messages, False)
    assert kept is not None
    assert place(b'{"messages":[],"model":"m"}', {}, {"model": "m"}, kept) is None  # nothing to resume from
    assert place(b'{"messages":[{}],"model":"m"}', {}, {"model": "x"}, kept) is None  # the rest is not `after`
    assert place(b'{"messages":[{}],"model":"m"}', {}, {"model": "m"}, kept) is not None


def test_a_last_item_whose_bytes_go_on_is_not_taken_for_a_finished_one() -> None:
    """A number ends where the next byte says: `5` may go on as `55` or `5.5` behind the same bytes."""
    adapter = ChatAdapter()
    head = orjson.dumps({"messages": chat_loop(3), "model": "m"})
    cut = head.index(b'],"model"')
    turn = orjson.dumps([{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}])[1:-1]
    for last, resumed in ((b"5", 1), (b"55", 0), (b"5.5", 0), (b"5e1", 0), (b"50", 0)):
        cache = HistoryCache(1 << 20, min_body=0)
        slot = HistorySlot(cache, "k_test", "run-1")
        first = head[:cut] + b",5" + head[cut:]
        assert adapter.parse_request(first, RequestContext(history=slot)).parse_error is None
        second = head[:cut] + b"," + last + b"," + turn + head[cut:]
        got = adapter.parse_request(second, RequestContext(history=slot))
        assert got.parse_error is None and got == adapter.parse_request(second, RequestContext()), last
        assert (cache.resumed, cache.whole) == (resumed, 2 - resumed), last  # whole when the item went on
