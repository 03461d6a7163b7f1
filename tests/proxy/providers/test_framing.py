"""`framing`: an SSE stream's unfinished event waits for its blank line; an error follows the last whole one."""

from __future__ import annotations

from runguard.proxy.providers.framing import MAX_PENDING_EVENT, SSE, WholeEvents, sse_framing
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter


def test_an_unfinished_event_waits_for_its_blank_line_wherever_the_chunks_split() -> None:
    stream = b'data: {"a":1}\n\ndata: {"b":2}\r\n\r\ndata: {"c"'
    for cut in range(len(stream) + 1):
        held = SSE.hold(True, True)
        sent = held.take(stream[:cut]) + held.take(stream[cut:])
        assert sent == b'data: {"a":1}\n\ndata: {"b":2}\r\n\r\n'
        assert held.pending == b'data: {"c"'
        assert held.ending(b"data: error\n\n") == b"data: error\n\n"


def test_nothing_is_held_unless_the_answer_is_sse_and_holding_is_wanted() -> None:
    for sse, on in ((False, True), (True, False)):
        held = SSE.hold(sse, on)
        assert held.take(b"data: x") == b"data: x"
        assert held.pending == b""


def test_a_body_that_never_ends_an_event_stops_the_holding_back() -> None:
    held = WholeEvents(True)
    assert held.take(b"x" * MAX_PENDING_EVENT) == b""
    big = held.take(b"y")
    assert len(big) == MAX_PENDING_EVENT + 1 and not held.on


def test_the_default_framing_is_sse_and_keeps_the_adapter() -> None:
    adapter = ChatAdapter()
    framing = sse_framing(True, {"alt": "json"})
    assert framing is SSE and framing.framed(adapter) is adapter
