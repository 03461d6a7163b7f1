"""Which forwarded requests may cost money, and whether a key may spend on them now (`spending`)."""

from __future__ import annotations

import pytest

from runguard.config.settings import BreakerSettings, GuardSettings
from runguard.detectors.budget import Budget
from runguard.proxy.core.ops import Add, Put, Scope
from runguard.proxy.guard import breaker
from runguard.proxy.guard.batches import Batches
from runguard.proxy.guard.breaker import BreakerRecord, BreakerState
from runguard.proxy.guard.costs.spending import KeySpending, costs_money
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.guard.ticket import scope_ids
from runguard.proxy.state.memory import MemoryState

NOW = 1_000_000.0


@pytest.mark.parametrize(
    ("method", "path", "costly"),
    [
        ("POST", "/v1/completions", True),
        ("POST", "/v1/embeddings", True),
        ("POST", "/v1/images/generations", True),
        ("POST", "/v1/audio/speech", True),
        ("POST", "/v1/batches", True),
        ("POST", "/v1beta/models/gemini-2.5-flash:batchGenerateContent", True),
        ("POST", "/v1beta/models/gemini-2.5-flash:embedContent", True),
        ("POST", "/v1/messages/batches", True),
        ("PUT", "/v1/anything", True),
        ("GET", "/v1/models", False),
        ("DELETE", "/v1/files/file-1", False),
        ("POST", "/v1/files", False),
        ("POST", "/v1/uploads/up-1/parts", False),
        ("POST", "/v1/batches/batch-1/cancel", False),
        ("POST", "/v1/messages/count_tokens", False),
        ("POST", "/v1beta/models/gemini-2.5-flash:countTokens", False),
        ("POST", "/v1/moderations", False),
        ("POST", "/v1/projects/p/locations/us-east5/publishers/google/models/gemini-2.5-flash:computeTokens", False),
        ("POST", "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict", False),
        ("POST", "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:rawPredict", True),
    ],
)
def test_what_may_cost_money(method: str, path: str, costly: bool) -> None:
    assert costs_money(method, path) is costly


def _spending(state: MemoryState, daily: float | None, action: str = "block") -> KeySpending:
    guard = GuardSettings.model_validate({"detectors": {"budget": {"key_daily_usd": daily, "action": action}}})
    batches = Batches(state, fail_closed=False, clock=lambda: NOW, on_error=lambda: None)
    return KeySpending(batches, Policy([Budget()], guard), BreakerSettings(), lambda: NOW, None)


async def test_an_open_key_breaker_or_a_spent_day_refuses_and_nothing_else_does() -> None:
    state = MemoryState()
    ids = scope_ids("", "k_a", "m", NOW)
    spending = _spending(state, 1.0)
    assert await spending.refusal("k_a", "m") is None
    await state.execute(ids, [Add(Scope.KEY_DAY, "core.usd", 1.5)])
    refused = await spending.refusal("k_a", "m")
    assert refused is not None and refused[0] == "budget" and "daily budget" in refused[1]
    assert "runguard-proxy reset" in refused[1]
    assert await _spending(state, 1.0, action="warn").refusal("k_a", "m") is None  # warn-only: let through
    assert await _spending(state, 2.0).refusal("k_a", "m") is None  # under this key's cap
    record = BreakerRecord(BreakerState.OPEN, NOW - 10, 3600.0, 1, "spend_rate", "spending too fast")
    await state.execute(ids, [Put(Scope.KEY, breaker.FIELD, record.dumps())])
    assert await _spending(state, None).refusal("k_a", "m") == (
        "spend_rate",
        "spending too fast. Reset with: runguard-proxy reset --key k_a",
    )
    assert await _spending(state, None).refusal("k_b", "m") is None  # another key
    assert len([name for name in state._slots if name.startswith("run:")]) == 0  # no run entry made
