"""The proxy's stage split, read from its metrics: seconds spent per stage over a measured phase.

The proxy counts its time per stage in the counter
`runguard_stage_seconds_total{stage=...}` on `/runguard/metrics` (a histogram
`runguard_stage_seconds` would be read from its `_sum` series):
`admission` (the decision before a request goes upstream), `judging` (the
request's end: accounting, the response detectors, breakers, the record
built) and `records` (the record store's writes). The bench scrapes before and after a phase; the deltas over
the phase's requests are each stage's microseconds per request. What the
proxy's CPU per request leaves beyond those three is the relay and the HTTP
work a pass-through does too (`relay_http`). A proxy that does not export the
metric (an older checkout under `--compare`) has no split: every figure is
None and the tables print "-".

Admission and judging are the event loop thread's CPU time while they ran,
records the SQLite writer thread's CPU and the batches' building: with the
in-memory state they add up to part of the process's CPU. A stage that awaits
(Redis round trips) also counts what the loop did for other requests
meanwhile, so under load on Redis the stages can exceed the CPU.
"""

from __future__ import annotations

import re
import urllib.request
from typing import Any

METRIC = "runguard_stage_seconds"
STAGES = ("admission", "judging", "records")
_SERIES = {f"{METRIC}_sum", f"{METRIC}_total", METRIC}
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[str, float]:
    """Seconds per stage from a Prometheus text exposition (summed over other labels; {} if absent)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None or match.group(1) not in _SERIES:
            continue
        labels = dict(_LABEL.findall(match.group(2) or ""))
        stage = labels.get("stage")
        if stage is None:
            continue
        try:
            found[stage] = found.get(stage, 0.0) + float(match.group(3))
        except ValueError:
            continue
    return found


def scrape(url: str, timeout: float = 10.0) -> dict[str, float]:
    """Seconds per stage so far of the proxy at `url` ({} when unreadable or not exported)."""
    try:
        with urllib.request.urlopen(url + "/runguard/metrics", timeout=timeout) as response:
            return parse(response.read().decode(errors="replace"))
    except OSError:
        return {}


def per_request(before: dict[str, float], after: dict[str, float], requests: int) -> dict[str, float]:
    """Microseconds per request of each stage between two scrapes ({} when either lacks the metric)."""
    if not before or not after:
        return {}
    n = max(requests, 1)
    return {stage: (after.get(stage, 0.0) - before.get(stage, 0.0)) / n * 1e6 for stage in after}


def split(figures: dict[str, Any]) -> dict[str, float | None]:
    """A target's stages in us per request and `relay_http`: its CPU per request less the stages.

    A stage the proxy does not export is None and stays in `relay_http`.
    """
    stages: dict[str, float] = figures.get("stages_us") or {}
    out: dict[str, float | None] = {stage: stages.get(stage) for stage in STAGES}
    cpu = figures.get("cpu_us")
    known = [value for value in out.values() if value is not None]
    out["relay_http"] = cpu - sum(known) if known and cpu is not None else None
    out["cpu"] = cpu
    return out
