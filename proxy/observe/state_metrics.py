"""What the in-memory state holds and what it dropped to make room, as Prometheus metrics.

  runguard_state_entries                      entries (scopes) held now
  runguard_state_kept_entries                 of them, held ones (stops, spend) found when room was made:
                                              kept until idle, past `runs.max_runs` if need be
  runguard_state_evictions_total{reason}      entries dropped before their idle time: `room` (past
                                              `runs.max_runs`), `tenant` (a tenant's own run, past
                                              `runs.max_runs_per_tenant`)
  runguard_state_refused_runs_total           new runs refused (429 state_full): their tenant's runs were
                                              all stopped at its bound

A collector of the app's registry (`create_app`), read per scrape: nothing on the request path. With Redis
there is nothing to show (Redis expires entries itself), so it yields nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from runguard.proxy.state import MemoryState, StateBackend


def figures(state: StateBackend) -> dict[str, int] | None:
    """The state's figures (for the health check too); None for a backend that does not make room itself."""
    if not isinstance(state, MemoryState):
        return None
    pressure = state.pressure
    return {
        "entries": len(state),
        "kept": state.kept,
        "evicted": pressure.evicted,
        "evicted_in_tenant": pressure.evicted_in_tenant,
        "refused_runs": pressure.refused,
    }


class StateMetrics:
    def __init__(self, state: StateBackend) -> None:
        self._state = state

    def collect(self) -> Iterable[Metric]:
        now = figures(self._state)
        if now is None:
            return
        yield GaugeMetricFamily("runguard_state_entries", "In-memory state entries.", value=now["entries"])
        yield GaugeMetricFamily(
            "runguard_state_kept_entries",
            "In-memory entries holding a stop or spend, kept until idle when room was made.",
            value=now["kept"],
        )
        evictions = CounterMetricFamily(
            "runguard_state_evictions",
            "In-memory entries dropped before their idle time, by reason.",
            labels=("reason",),
        )
        evictions.add_metric(("room",), now["evicted"])
        evictions.add_metric(("tenant",), now["evicted_in_tenant"])
        yield evictions
        yield CounterMetricFamily(
            "runguard_state_refused_runs", "New runs refused: their tenant's runs all held.", value=now["refused_runs"]
        )
