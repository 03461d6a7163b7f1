"""One clock for a graceful stop: streams drain, then are cut, and a reserve is kept for the records."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import StreamReader

from runguard.proxy.relay.shutdown import MAX_RESERVE, Shutdown, StreamCut, reserve_of


def reader() -> StreamReader:
    loop = asyncio.get_running_loop()
    return StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=loop)


def test_a_fifth_of_the_grace_is_kept_for_what_follows_the_streams_at_most_max_reserve() -> None:
    assert reserve_of(10.0) == pytest.approx(2.0)
    assert reserve_of(600.0) == MAX_RESERVE
    stop = Shutdown(10.0)
    assert stop.drain == pytest.approx(8.0) and not stop.begun and stop.remaining() == 10.0


async def test_once_begun_the_remaining_time_runs_down() -> None:
    stop = Shutdown(5.0)
    stop.begin()
    stop.begin()  # once
    await asyncio.sleep(0.02)
    assert stop.begun and 4.0 < stop.remaining() < 5.0
    stop.cut()


async def test_streams_still_relayed_when_the_drain_ends_are_cut_and_later_ones_at_once() -> None:
    stop = Shutdown(0.05)  # drains for 0.04 s
    open_stream, finished = reader(), reader()
    finished.feed_eof()
    with stop.streaming(open_stream), stop.streaming(finished):
        stop.begin()
        with pytest.raises(StreamCut):
            await asyncio.wait_for(open_stream.read(1), 1.0)
    assert stop.cut_streams == 1  # the finished one had nothing left to cut
    late = reader()
    with stop.streaming(late), pytest.raises(StreamCut):
        await late.read(1)
