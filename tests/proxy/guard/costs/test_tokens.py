"""Token estimates: exact with a cached tiktoken table, by characters otherwise, never downloading."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
from pathlib import Path

import aiohttp
import pytest

from runguard.proxy.guard.costs.tokens import TokenEstimator, cached_table
from runguard.proxy.providers.openai.provider import encoding as encoding_name


def test_models_map_to_their_encodings() -> None:
    assert encoding_name("gpt-4o-mini") == "o200k_base"
    assert encoding_name("gpt-5.6-luna") == "o200k_base"  # unknown future names: o200k
    assert encoding_name("gpt-4-turbo") == "cl100k_base"
    assert encoding_name("gpt-3.5-turbo") == "cl100k_base"
    assert encoding_name("gemini-2.5-flash") is None


def test_without_a_cached_table_it_counts_characters_and_never_opens_a_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the estimator tried to reach the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    estimator = TokenEstimator({"TIKTOKEN_CACHE_DIR": str(tmp_path)})
    assert estimator.count("x" * 41, "gpt-4o") == 11
    assert estimator.count("y" * 8, "gemini-2.5-flash") == 2
    assert estimator.count("", "gpt-4o") == 0


def test_a_damaged_cached_table_is_not_trusted(tmp_path: Path) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"not a table")
    # tiktoken would delete it and download the table again; the proxy does not let it.
    assert cached_table("o200k_base", {"TIKTOKEN_CACHE_DIR": str(tmp_path)}) is None
    assert TokenEstimator({"TIKTOKEN_CACHE_DIR": str(tmp_path)}).count("abcd" * 3, "gpt-4o") == 3


async def test_the_proxy_loads_the_encodings_at_start_up_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    from runguard.proxy.guard.costs import tokens
    from tests.e2e import payloads
    from tests.support.proxy import ListSink, settings_for, start_proxy
    from tests.support.upstream import FakeUpstream, Reply

    loop_thread = threading.get_ident()
    looked_up: list[tuple[str, bool, bool]] = []  # (encoding, on the loop's thread, before the first request)
    first_request = asyncio.Event()
    real = tokens.cached_table

    def watched(encoding: str, environ: dict[str, str] | None = None) -> str | None:
        looked_up.append((encoding, threading.get_ident() == loop_thread, first_request.is_set()))
        return real(encoding, environ)

    monkeypatch.setattr(tokens, "cached_table", watched)
    upstream = await FakeUpstream().start()
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("no usage in this stream"))  # estimated
    sink = ListSink()
    running = await start_proxy(settings_for(upstream.url), sink=sink)
    try:
        first_request.set()
        async with aiohttp.ClientSession() as session:
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            async with session.post(running.url + "/v1/chat/completions", json=body) as response:
                await response.read()
    finally:
        await running.stop()
        await upstream.stop()
    assert sorted(looked_up) == [("cl100k_base", False, False), ("o200k_base", False, False)]
    assert sink.records[-1].usage_estimated  # type: ignore[union-attr]
