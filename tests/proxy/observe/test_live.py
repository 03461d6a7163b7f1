"""What a scrape reads where it lives: the sink's numbers (when it has them), the state's health, the stages."""

from __future__ import annotations

from prometheus_client.metrics_core import Metric

from runguard.proxy.observe.live import Live, counter


class Sink:
    backlog = 4

    def dropped(self) -> int:  # a method counts as well as an attribute
        return 2

    busy_seconds = 0.5


def _values(families: list[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def test_the_sinks_numbers_the_health_and_the_stages_with_records_from_the_sink() -> None:
    found = _values(list(Live(Sink(), lambda: False, None, lambda: {"admission": 1.0, "judging": 2.0}).collect()))
    assert found[("runguard_store_backlog", ())] == 4
    assert found[("runguard_store_dropped_total", ())] == 2
    assert found[("runguard_state_degraded", ())] == 0
    stages = {labels[0][1]: v for (name, labels), v in found.items() if name == "runguard_stage_seconds_total"}
    assert stages == {"admission": 1.0, "judging": 2.0, "records": 0.5}


def test_a_sink_without_numbers_and_no_stages_add_nothing_of_theirs() -> None:
    found = _values(list(Live(object(), lambda: True, None).collect()))
    assert found == {("runguard_state_degraded", ()): 1.0}


def test_counter_has_one_child_per_label_values() -> None:
    family = counter("runguard_things", "Things.", ("kind",), [(("a",), 1.0), (("b",), 2.0)])
    assert {s.labels["kind"]: s.value for s in family.samples} == {"a": 1.0, "b": 2.0}
