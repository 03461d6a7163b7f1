"""The graceful stop's one clock: streams may drain for most of the grace period, then every stream still
being relayed is cut (its next read raises StreamCut), and the reserve is left for records and undos."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import StreamReader

from runguard.proxy.relay.shutdown import MAX_RESERVE, Shutdown, StreamCut, handlers_wait, reserve_of


def _upstream_body() -> StreamReader:
    """An upstream body as the client session gives it (the protocol only matters for flow control)."""
    return StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=asyncio.get_running_loop())


@pytest.mark.parametrize(("grace", "reserve"), [(10.0, 2.0), (1.0, 0.2), (60.0, MAX_RESERVE), (0.0, 0.0)])
def test_a_fifth_of_the_grace_is_kept_at_most_max_reserve(grace: float, reserve: float) -> None:
    assert reserve_of(grace) == pytest.approx(reserve)
    assert Shutdown(grace).drain == pytest.approx(grace - reserve)


async def test_before_the_stop_all_the_grace_remains_and_after_it_runs_down() -> None:
    shutdown = Shutdown(5.0)
    assert not shutdown.begun
    assert shutdown.remaining() == 5.0
    shutdown.begin()
    await asyncio.sleep(0.05)
    shutdown.begin()  # a second begin does not restart the clock
    assert shutdown.begun
    assert 0.0 < shutdown.remaining() < 4.96  # running down (a loaded machine may sleep long)
    shutdown.cut()


async def test_a_stream_still_open_when_the_drain_ends_is_cut_and_counted() -> None:
    shutdown = Shutdown(0.25)  # drain 0.2 s
    body = _upstream_body()
    body.feed_data(b"data: first\n\n")
    with shutdown.streaming(body):
        shutdown.begin()
        assert await body.readany() == b"data: first\n\n"
        with pytest.raises(StreamCut):
            await asyncio.wait_for(body.readany(), timeout=2.0)
    assert shutdown.cut_streams == 1
    assert shutdown.remaining() == pytest.approx(0.05, abs=0.05)


async def test_a_stream_that_ended_before_the_cut_is_not_cut() -> None:
    shutdown = Shutdown(1.0)
    finished, done_early = _upstream_body(), _upstream_body()
    finished.feed_eof()
    with shutdown.streaming(finished):
        pass
    with shutdown.streaming(done_early):
        done_early.feed_eof()
        shutdown.cut()
    assert shutdown.cut_streams == 0
    assert done_early.exception() is None


async def test_a_stream_that_starts_after_the_cut_is_cut_at_once() -> None:
    shutdown = Shutdown(1.0)
    shutdown.cut()
    late = _upstream_body()
    with shutdown.streaming(late), pytest.raises(StreamCut):
        await late.readany()


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


@pytest.mark.parametrize("grace", [2.0, 5.0, 30.0, 600.0])
def test_aiohttp_waits_for_handlers_past_the_cut_and_within_the_grace(grace: float) -> None:
    drain = Shutdown(grace).drain
    assert drain < handlers_wait(grace) < grace
    assert handlers_wait(grace) - drain == pytest.approx(reserve_of(grace) / 2)
