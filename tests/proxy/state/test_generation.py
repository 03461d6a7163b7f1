"""`Generation` tells a state that lost writes from one that did not, and lets one process rebuild it."""

from __future__ import annotations

from runguard.proxy.core.ops import Put, Scope
from runguard.proxy.state.generation import _IDS, BEAT, MARK, Generation, Look
from runguard.proxy.state.memory import MemoryState


class _Server(MemoryState):
    """A state that names the server answering it (as Redis does with its run id)."""

    def __init__(self) -> None:
        super().__init__()
        self.run_id = "server-1"

    async def server_id(self) -> str:
        return self.run_id


async def test_a_new_state_is_lost_until_rebuilt_then_intact() -> None:
    state = MemoryState()
    one, two = Generation(state, clock=lambda: 100.0), Generation(state, clock=lambda: 100.0)
    assert await one.look() is Look.LOST
    assert await two.look() is Look.LOST
    assert await one.take() is not None
    assert await two.take() is None  # one process rebuilds
    assert await two.look() is Look.BUSY
    await one.done()
    assert [await one.look(), await two.look(), await one.look()] == [Look.INTACT] * 3


async def test_an_emptied_state_or_a_heartbeat_that_went_back_is_lost() -> None:
    state = MemoryState()
    gen = Generation(state)
    await gen.look()
    await gen.take()
    await gen.done()
    assert await gen.look() is Look.INTACT
    await state.clear_scope(Scope.KEY, _IDS.key)  # a restart without persistence
    assert await gen.look() is Look.LOST
    await gen.take()
    await gen.done()
    for _ in range(3):
        await gen.look()
    # A replica promoted with the mark but without the last beats: the beat goes back.
    await state.execute(_IDS, [Put(Scope.KEY, BEAT, None)])
    assert await gen.look() is Look.LOST


async def test_another_server_answering_is_a_loss_and_a_stale_rebuild_is_taken_over() -> None:
    state = _Server()
    now = [100.0]
    gen = Generation(state, clock=lambda: now[0], stale_after=60.0)
    await gen.look()
    await gen.take()
    await gen.done()
    assert await gen.look() is Look.INTACT
    state.run_id = "server-2"  # failed over, the data kept
    assert await gen.look() is Look.LOST
    assert await gen.take() is not None  # ... and the process that took it died half-way
    other = Generation(state, clock=lambda: now[0], stale_after=60.0)
    assert await other.look() is Look.BUSY
    now[0] += 61.0
    assert await other.look() is Look.LOST
    assert await other.take() is not None
    await other.done()
    assert isinstance((await state.read_scope(Scope.KEY, _IDS.key))[MARK], str)
