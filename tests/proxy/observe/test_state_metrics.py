"""The in-memory state's figures as metrics and in the health check; none for a backend without them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from runguard.proxy.core.ops import Add, Put, Scope
from runguard.proxy.guard.accounting import HELD_FIELDS
from runguard.proxy.observe.state_metrics import StateMetrics, figures
from runguard.proxy.state.base import ScopeIds, ScopeTtls
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.state.redis import RedisState


async def test_evictions_and_kept_entries_are_counted() -> None:
    state = MemoryState(max_scopes=3, held=HELD_FIELDS)
    stop = Put(Scope.RUN, "breaker", "open")
    await state.execute(ScopeIds("a/r", "a", "a|m", "a|d"), [Add(Scope.RUN, "n"), stop])
    for i in range(4):
        await state.execute(ScopeIds(f"j{i}/r", f"j{i}", "x", "y"), [Add(Scope.RUN, "n")])
    registry = CollectorRegistry()
    registry.register(StateMetrics(state))
    text = generate_latest(registry).decode()
    assert figures(state) == {"entries": 3, "kept": 1, "evicted": 2, "evicted_in_tenant": 0, "refused_runs": 0}
    assert 'runguard_state_evictions_total{reason="room"} 2.0' in text
    assert "runguard_state_kept_entries 1.0" in text
    assert "runguard_state_entries 3.0" in text
    assert "runguard_state_refused_runs_total 0.0" in text


async def test_a_shared_backend_has_no_figures() -> None:
    shared = RedisState.from_url("redis://127.0.0.1:9", key_prefix="unused", ttls=ScopeTtls(), timeout=0.1)
    assert figures(shared) is None
    registry = CollectorRegistry()
    registry.register(StateMetrics(shared))
    assert "runguard_state" not in generate_latest(registry).decode()
    await shared.close()
