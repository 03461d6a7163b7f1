"""`background`: a poll's answer is looked up only when its API says the response is done (`Polls.final`)."""

from __future__ import annotations

from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.guard.costs.background import BackgroundCosts
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.observer import NullObserver
from runguard.proxy.runs import continuation, tenants
from runguard.proxy.state.memory import MemoryState
from tests.support.proxy import ListSink


class _Recalls(MemoryState):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def recall(self, name: str) -> str | None:
        self.asked.append(name)
        return await super().recall(name)


async def test_only_a_response_in_one_of_its_api_s_final_statuses_is_looked_up() -> None:
    state = _Recalls()
    costs = BackgroundCosts(state, ModelTables(), ListSink(), NullObserver(), 60.0, tenants.Tenants({}))
    final = frozenset({"completed", "failed"})
    for reason in ("in_progress", "queued", "completed"):
        info = ResponseInfo(response_id="resp_1", finish_reason=reason)
        await costs.polled(info, key_hash="k", streamed=False, status=200, latency=0.1, began=0.0, final=final)
    assert state.asked == [continuation.entry("k", "resp_1")]  # the completed one only: nothing pending is found
