from __future__ import annotations

from multidict import CIMultiDict, CIMultiDictProxy

from runguard.proxy.relay.headers import client_response_headers, header_text, upstream_request_headers


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
