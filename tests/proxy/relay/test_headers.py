from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from runguard.proxy.relay.headers import HOP_BY_HOP, client_response_headers, header_text, upstream_request_headers


def test_request_headers_drop_hop_by_hop_and_own_headers_only() -> None:
    headers = CIMultiDictProxy(
        CIMultiDict(
            {
                "Authorization": "Bearer sk-x",
                "Connection": "keep-alive, X-Custom-Hop",
                "X-Custom-Hop": "1",
                "Keep-Alive": "timeout=5",
                "Host": "proxy:8787",
                "X-Run-Id": "run-1",
                "x-runguard-limit": "budget.run_usd=1",
                "Content-Length": "10",
                "x-stainless-retry-count": "0",
                "Accept-Encoding": "gzip",
            }
        )
    )
    out = upstream_request_headers(headers, ("X-Run-Id", "X-Agent-Name"))
    assert dict(out) == {"Authorization": "Bearer sk-x", "x-stainless-retry-count": "0", "Accept-Encoding": "gzip"}


def test_response_headers_keep_length_only_for_whole_bodies() -> None:
    headers = CIMultiDictProxy(
        CIMultiDict(
            {
                "Content-Type": "application/json",
                "Content-Length": "5",
                "Transfer-Encoding": "chunked",
                "Content-Encoding": "gzip",
                "x-request-id": "req_1",
            }
        )
    )
    assert "Content-Length" in client_response_headers(headers, keep_length=True)
    streamed = client_response_headers(headers, keep_length=False)
    assert set(streamed) == {"Content-Type", "Content-Encoding", "x-request-id"}


def test_repeated_headers_keep_every_value_in_order_and_any_spelling_is_dropped() -> None:
    headers = CIMultiDictProxy(
        CIMultiDict(
            [
                ("X-Trace", "a"),
                ("connection", "X-Hop"),
                ("x-hop", "1"),
                ("X-Trace", "b"),
                ("X-HOP", "2"),
                ("X-RUNGUARD-MAX-STEPS", "5"),
                ("x-trace", "c"),
            ]
        )
    )
    out = upstream_request_headers(headers, ())
    assert list(out.items()) == [("X-Trace", "a"), ("X-Trace", "b"), ("x-trace", "c")]


def test_response_headers_named_by_connection_are_dropped() -> None:
    headers = CIMultiDictProxy(
        CIMultiDict(
            [("Content-Type", "application/json"), ("Connection", "close, X-Upstream-Hop"), ("X-Upstream-Hop", "1")]
        )
    )
    assert list(client_response_headers(headers, keep_length=True).items()) == [("Content-Type", "application/json")]


def test_header_text_escapes_bytes_that_were_not_utf8_and_keeps_the_rest() -> None:
    undecodable = b"run-\xff\xfe".decode("utf-8", "surrogateescape")  # as aiohttp hands such a header over
    assert header_text(undecodable) == "run-\\xff\\xfe"
    assert header_text(undecodable).encode() == b"run-\\xff\\xfe"  # encodable: logs, databases, Redis take it
    assert header_text("agent-é") == "agent-é"
    assert header_text("run-1") == "run-1"
    assert header_text(None) is None


def _reference(headers: CIMultiDictProxy[str], skip: frozenset[str], own: bool) -> list[tuple[str, str]]:
    """What crosses, tested name by name (the memoised `_dropped` must agree with it)."""
    named = {n.strip().lower() for value in headers.getall("Connection", ()) for n in value.split(",")}
    return [
        (name, value)
        for name, value in headers.items()
        if (low := name.lower()) not in skip and low not in named and not (own and low.startswith("x-runguard-"))
    ]


_NAMES = st.sampled_from(
    [
        "Host",
        "host",
        "Connection",
        "Keep-Alive",
        "X-Run-Id",
        "x-agent-name",
        "X-RunGuard-Limit",
        "x-runguard-",
        "Content-Length",
        "TE",
        "X-Hop",
        "x-hop",
        "Authorization",
        "X-Trace",
        "Accept",
        "Transfer-Encoding",
    ]
)
_VALUES = st.sampled_from(["1", "keep-alive", "close, X-Hop", "x-hop ,X-Trace", " te", ""])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=12), st.booleans())
def test_what_crosses_is_what_a_name_by_name_test_keeps_first_time_and_remembered(
    items: list[tuple[str, str]], twice: bool
) -> None:
    headers = CIMultiDictProxy(CIMultiDict(items))
    own = ("X-Run-Id", "X-Agent-Name")
    skip = HOP_BY_HOP | {"x-run-id", "x-agent-name", "host", "content-length"}
    for _ in range(2 if twice else 1):  # the second time from the memo
        assert list(upstream_request_headers(headers, own).items()) == _reference(headers, skip, own=True)
        for keep_length in (True, False):
            dropped = HOP_BY_HOP if keep_length else HOP_BY_HOP | {"content-length"}
            got = client_response_headers(headers, keep_length=keep_length)
            assert list(got.items()) == _reference(headers, dropped, own=False)


def test_past_the_memo_bound_each_list_of_names_is_still_read() -> None:
    for i in range(600):  # more distinct header lists and Connection values than are remembered
        headers = CIMultiDictProxy(
            CIMultiDict([(f"X-Custom-{i}", "1"), ("Connection", f"X-Custom-{i}"), ("X-Kept", "k"), ("Host", "h")])
        )
        assert list(upstream_request_headers(headers, ()).items()) == [("X-Kept", "k")]
