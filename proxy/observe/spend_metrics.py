"""Spend per API key, as a Prometheus metric of the app's registry.

  runguard_key_usd_total{key}                 cost per API key: its label from `guard.key_labels`,
                                              `unlabelled` for every key without one

(Cost avoided per detector is `Metrics`' `runguard_usd_avoided_total`, from `costs`.)

An `Observer` registered as a collector of `Metrics.registry` beside the
others (`create_app`). Key hashes never become labels (a client with many
keys would grow the exposition without bound): only the labels an operator
configured do, so the dashboard's spend by key shows the keys someone named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.metrics_core import CounterMetricFamily, Metric

from runguard.proxy.guard import NullObserver
from runguard.proxy.store.records import RequestRecord

UNLABELLED = "unlabelled"


class SpendMetrics(NullObserver):
    """Cheap on the request path: a dict lookup and an addition per request (the other hooks: no-ops)."""

    def __init__(self, key_labels: Mapping[str, str]) -> None:
        self._labels = dict(key_labels)
        self._by_key: dict[str, float] = {}

    def request_done(self, record: RequestRecord) -> None:
        if record.usd > 0:
            label = self._labels.get(record.key_hash, UNLABELLED)
            self._by_key[label] = self._by_key.get(label, 0.0) + record.usd

    def collect(self) -> Iterable[Metric]:
        by_key = CounterMetricFamily("runguard_key_usd", "Cost in USD per API key label.", labels=("key",))
        for label, usd in self._by_key.items():
            by_key.add_metric((label,), usd)
        yield by_key
