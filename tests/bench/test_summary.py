"""The run summary's budget table: what a CPU target leaves beyond the read-and-parse floor, beside what
RunGuard's frame and its detectors use of it, from a results document shaped as `bench.run` writes it."""

from __future__ import annotations

from typing import Any

from bench import summary


def _figures(cpu: float, admission: float | None = None, judging: float | None = None) -> dict[str, Any]:
    figures: dict[str, Any] = {"cpu_us": cpu}
    if admission is not None and judging is not None:
        figures["stages_us"] = {"admission": admission, "judging": judging, "records": 10.0}
    return figures


def _doc(frame: bool = True) -> dict[str, Any]:
    sequential = {
        "passthrough": _figures(770.0),
        "floor": _figures(780.0),
        "proxy": _figures(2030.0, 388.0, 325.0),
    }
    loaded = {
        "passthrough": _figures(153.0),
        "floor": _figures(167.0),
        "proxy": _figures(742.0, 167.0, 146.0),
    }
    if frame:
        sequential["proxy_frame"] = _figures(1330.0, 119.0, 85.0)
        loaded["proxy_frame"] = _figures(399.0, 42.0, 33.0)
    throughput = [
        {"target": name, "scenario": summary.LOAD_SCENARIO, "concurrency": 16, **figures}
        for name, figures in loaded.items()
    ]
    return {
        "meta": {
            "mode": "quick",
            "commit": "c0ffee",
            "cpus": 2,
            "loadavg_at_start": ["0.1"],
            "plan": {"concurrencies": [16]},
        },
        "latency": [{"scenario": summary.SMALL, "targets": sequential}],
        "throughput": throughput,
    }


def _rows(lines: list[str]) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])}


def test_the_budget_beyond_the_floor_beside_what_runguard_uses_of_it() -> None:
    rows = _rows(summary.budget_table(_doc()))

    # 2.5x of 153 us is 382 us (382.5, printed whole); the floor's 167 leave 216.
    assert rows["small chat, 16 clients"] == ["2.5x = 382", "167", "216", "575", "232", "343", "238"]
    assert rows["small chat, sequential"] == ["2.0x = 1540", "780", "760", "1250", "550", "700", "509"]


def test_without_the_frame_its_cells_are_unknown_not_zero() -> None:
    rows = _rows(summary.budget_table(_doc(frame=False)))

    assert rows["small chat, 16 clients"] == ["2.5x = 382", "167", "216", "575", "-", "-", "-"]


def test_the_summary_ends_with_the_budget() -> None:
    text = summary.markdown(_doc())

    assert "The budget (us per request)" in text
    assert text.rstrip().splitlines()[-1].startswith("| small chat, 16 clients | 2.5x = 382 |")
