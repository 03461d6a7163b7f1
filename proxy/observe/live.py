"""Values a scrape reads where they live: the record sink's backlog, drops and writing time, the state's
health, the seconds spent per stage, the history cache's counts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from runguard.proxy.providers.common.history import HistoryCache


def counter(name: str, doc: str, labels: Sequence[str], values: Iterable[tuple[Sequence[str], float]]) -> Metric:
    """A counter family with one child per label values."""
    family = CounterMetricFamily(name, doc, labels=labels)
    for label_values, value in values:
        family.add_metric(label_values, value)
    return family


def _number(source: object, name: str) -> float | None:
    """`source.name` as a number (attribute, property or zero-argument method), else None."""
    value = getattr(source, name, None)
    if callable(value):
        value = value()
    return float(value) if isinstance(value, int | float) else None


class Live:
    """Values read at scrape time: the record sink's backlog and drops, the guard's health, the history cache."""

    def __init__(
        self,
        sink: object,
        degraded: Callable[[], bool],
        history: HistoryCache | None,
        stages: Callable[[], Mapping[str, float]] | None = None,
    ) -> None:
        self._sink = sink
        self._degraded = degraded
        self._history = history
        self._stages = stages

    def collect(self) -> Iterable[Metric]:
        backlog = _number(self._sink, "backlog")
        if backlog is not None:
            yield GaugeMetricFamily("runguard_store_backlog", "Records waiting for the store.", value=backlog)
        dropped = _number(self._sink, "dropped")
        if dropped is not None:
            yield CounterMetricFamily("runguard_store_dropped", "Records dropped: store queue full.", value=dropped)
        degraded = 1.0 if self._degraded() else 0.0
        yield GaugeMetricFamily("runguard_state_degraded", "1 while the state backend is failing.", value=degraded)
        seconds = dict(self._stages()) if self._stages is not None else {}
        if (written := _number(self._sink, "busy_seconds")) is not None:
            seconds["records"] = written
        if seconds:
            yield counter(
                "runguard_stage_seconds_total",
                "Seconds spent per stage: admission (before a request goes upstream), judging (after its answer: "
                "accounting, response detectors, breakers, records built, log and metrics), records (writing them).",
                ("stage",),
                (((stage,), value) for stage, value in seconds.items()),
            )
        if self._history is not None:
            reads = ((("resumed",), self._history.resumed), (("whole",), self._history.whole))
            yield counter(
                "runguard_long_requests_total",
                "Long requests read from where the run's last request left off (resumed), or whole.",
                ("read",),
                reads,
            )
            held = self._history.weight
            yield GaugeMetricFamily("runguard_history_cache_bytes", "Bytes of conversation checkpoints.", value=held)
