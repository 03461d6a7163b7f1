"""Spend per key label, as the app's Prometheus exposition shows it (cost avoided: tests/proxy/test_costs.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from runguard.proxy.observe.spend_metrics import SpendMetrics
from runguard.proxy.store.records import RequestRecord


def _request(key_hash: str, usd: float) -> RequestRecord:
    return RequestRecord(
        run_id="r", key_hash=key_hash, index=1, at=0.0, agent="a", model="gpt-4o", provider="openai",
        api="chat", streamed=False, status=200, usd=usd,
    )  # fmt: skip


def test_spend_is_summed_per_key_label_and_keys_without_one_are_pooled() -> None:
    spend = SpendMetrics({"k_search": "search-team"})
    registry = CollectorRegistry()
    registry.register(spend)
    for key, usd in (("k_search", 0.25), ("k_search", 0.5), ("k_other1", 0.125), ("k_other2", 0.125), ("k_x", 0.0)):
        spend.request_done(_request(key, usd))
    text = generate_latest(registry).decode()
    assert 'runguard_key_usd_total{key="search-team"} 0.75' in text
    assert 'runguard_key_usd_total{key="unlabelled"} 0.25' in text
    assert "k_other" not in text  # key hashes never become labels
