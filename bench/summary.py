"""The summary of a run as markdown: figures, ratios, and issue #50's targets, met or not.

Three tables, all from one results document:
- per request: CPU (small chat and 300 KB requests, sequential), added latency p50,
  a stream's first event, throughput and CPU at 16 and 32 clients, and the CPU's
  growth along a run, for the pass-through, nginx, LiteLLM and RunGuard in memory
  and on Redis; RunGuard's ratio to the pass-through and the issue's target;
- Redis over memory: what RunGuard on Redis adds to RunGuard in memory (ms, CPU-ms);
- the stage split: RunGuard's CPU per request as admission, judging, records
  (its `runguard_stage_seconds_total`) and the rest, relay and HTTP, beside the
  pass-through's whole CPU per request;
- the budget: what a CPU target leaves beyond the read-and-parse floor, beside
  what RunGuard's frame and its detectors each use of it (with `--frame`).
Targets are shown as met or not, never asserted. A figure a run did not measure is "-".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import report, stages

BASE = "passthrough"
FLOOR = "floor"  # bench/floor.py: the pass-through that also reads and parses both bodies
MEMORY, REDIS = "proxy", "proxy_redis"
FRAME = "proxy_frame"  # `--frame`: RunGuard with every detector, the record store and the access log off
COLUMNS = (
    (BASE, "pass-through"),
    (FLOOR, "read-and-parse floor"),
    ("nginx", "nginx"),
    ("litellm", "LiteLLM"),
    (MEMORY, "RunGuard (memory)"),
    (REDIS, "RunGuard (Redis)"),
)
SMALL, LARGE, STREAM = "chat whole small req", "chat whole large req", "chat stream small req"
LOAD_SCENARIO = "chat whole small"
CLIENTS = (16, 32)
REDIS_MS, REDIS_CPU_MS = 0.3, 0.3  # the allowance for Redis state over in-memory

Figures = dict[str, Any]


@dataclass(frozen=True)
class Row:
    """One line of the per-request table: where its figure is, how it prints, what the target is."""

    label: str
    value: Callable[[Figures], float | None]  # from one target's figures in the row's phase
    shown: Callable[[float], str]
    target: str
    met: Callable[[float, float], bool]  # (RunGuard, pass-through)
    gap: bool = False  # the target is a difference to the pass-through: show it beside the ratio


def _cpu_ms(value: float) -> str:
    return f"{value / 1000:.2f} ms"


def _added(value: float) -> str:
    return f"{value:+.2f} ms"


def _rps(value: float) -> str:
    return f"{value:,.0f} req/s"


def _get(key: str) -> Callable[[Figures], float | None]:
    return lambda figures: figures.get(key)


def _latency(doc: dict[str, Any], scenario: str) -> dict[str, Figures]:
    return next((e["targets"] for e in doc.get("latency", []) if e["scenario"] == scenario), {})


def _stall(doc: dict[str, Any]) -> dict[str, Figures]:
    """The chat stall, interleaved (as a sidecar meets an agent's requests), not the back-to-back variant."""
    for entry in doc.get("stall", []):
        if entry["spec"].get("api") == "chat" and entry["spec"].get("block", 1) == 1:
            return dict(entry["targets"])
    return {}


def _load(doc: dict[str, Any], clients: int, scenario: str = LOAD_SCENARIO) -> dict[str, Figures]:
    return {
        e["target"]: e
        for e in doc.get("throughput", [])
        if e["scenario"] == scenario and e.get("concurrency", 32) == clients
    }


def _clients(doc: dict[str, Any]) -> tuple[int, ...]:
    """The throughput phases' clients of this run (`--clients`; 16 and 32 unless told)."""
    return tuple(doc.get("meta", {}).get("plan", {}).get("concurrencies") or CLIENTS)


def _phases(doc: dict[str, Any]) -> list[tuple[Row, dict[str, Figures]]]:
    """The rows of the table, CPU sequential and under load side by side, each with its phase's figures.

    Issue #50's targets: CPU at most 2x the pass-through's sequentially and 2.5x under load, added p50 at
    most 0.5 ms over the pass-through's, a stream's first event at most 0.3 ms after it, throughput at least
    0.4x the pass-through's."""
    cpu, twice = "at most 2x", lambda proxy, base: proxy <= 2 * base
    loaded, within = "at most 2.5x", lambda proxy, base: proxy <= 2.5 * base
    small = [(Row("CPU, small chat request, sequential", _get("cpu_us"), _cpu_ms, cpu, twice), _latency(doc, SMALL))]
    small += [
        (Row(f"CPU, small chat request, {c} clients", _get("cpu_us"), _cpu_ms, loaded, within), _load(doc, c))
        for c in _clients(doc)
    ]
    added = _later("added latency p50, sequential", "added_ms_p50", 0.5, "over")
    first_event = _later("stream first event, later than direct", "added_first_byte_ms_p50", 0.3, "after")
    throughput = [
        (
            Row(f"throughput at {c} clients", _get("rps"), _rps, "at least 0.4x", lambda p, b: p >= 0.4 * b),
            _load(doc, c),
        )
        for c in _clients(doc)
    ]
    return [
        *small,
        (Row("CPU, 300 KB request, sequential", _get("cpu_us"), _cpu_ms, cpu, twice), _latency(doc, LARGE)),
        (added, _latency(doc, SMALL)),
        (first_event, _stall(doc)),
        *throughput,
    ]


def _later(label: str, key: str, most_ms: float, word: str) -> Row:
    """A row of milliseconds added over direct, met when at most `most_ms` over the pass-through's."""
    target = f"at most {most_ms} ms {word} the pass-through's"
    return Row(label, _get(key), _added, target, lambda proxy, base: proxy - base <= most_ms, gap=True)


def _cell(row: Row, figures: Figures | None) -> str:
    value = row.value(figures) if figures else None
    return "-" if value is None else row.shown(value)


def _judged(row: Row, phase: dict[str, Figures], name: str, against: str = BASE) -> tuple[str, str]:
    """(ratio to the baseline `against`, met?) of target `name` in this row; met is judged on the pass-through."""
    base = row.value(phase[against]) if against in phase else None
    value = row.value(phase[name]) if name in phase else None
    if value is None or base is None:
        return "-", "-"
    ratio = f"{value / base:.2f}x" if base > 0 else "-"
    if row.gap:
        ratio += f" ({value - base:+.2f} ms)"
    return ratio, "met" if row.met(value, base) else "NOT met"


def _growth_row(doc: dict[str, Any]) -> list[str] | None:
    entry = next((e for e in doc.get("growth", []) if e.get("api") == "chat"), None)
    if entry is None:
        return None
    fits = entry["fits"]
    parse = fits["orjson_parse"]["slope"]

    def slope(name: str) -> float | None:
        cpu = fits.get(name, {}).get("cpu")
        return None if cpu is None else float(cpu["slope"])

    cells = ["-" if (s := slope(name)) is None else f"{s:.2f} us/KB" for name, _ in COLUMNS]
    judged: list[tuple[str, str]] = []
    unhealthy = entry.get("unhealthy") or {}
    for name in (MEMORY, REDIS):
        mine, base = slope(name), slope(BASE)
        if mine is None or base is None or parse <= 0:
            judged.append(("-", "-"))
        elif unhealthy.get(name):
            judged.append(("-", f"NOT measured ({unhealthy[name]} answered by RunGuard)"))
        else:
            judged.append((f"{(mine - base) / parse:+.2f} parses", "met" if mine - base <= parse else "NOT met"))
    target = f"at most one orjson.loads more than the pass-through ({parse:.2f} us/KB)"
    return [
        "CPU growth along a run (300 requests, 1.6 -> 325 KB)",
        *cells,
        " / ".join(j[0] for j in judged),
        "-",
        target,
        " / ".join(j[1] for j in judged),
    ]


def _md(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def per_request_table(doc: dict[str, Any]) -> list[str]:
    headers = ["per request", *(label for _, label in COLUMNS), "RunGuard / pass-through (memory / Redis)"]
    headers += ["RunGuard / floor (memory / Redis)", "target", "met (memory / Redis)"]
    rows: list[list[str]] = []
    for row, phase in _phases(doc):
        judged = [_judged(row, phase, name) for name in (MEMORY, REDIS)]
        floored = [_judged(row, phase, name, FLOOR)[0] for name in (MEMORY, REDIS)]
        rows.append(
            [
                row.label,
                *(_cell(row, phase.get(name)) for name, _ in COLUMNS),
                " / ".join(j[0] for j in judged),
                " / ".join(floored),
                row.target,
                " / ".join(j[1] for j in judged),
            ]
        )
    growth = _growth_row(doc)
    if growth:
        rows.append(growth)
    return _md(headers, rows)


def _delta(redis: Figures | None, memory: Figures | None, key: str, scale: float = 1.0) -> float | None:
    if not redis or not memory or redis.get(key) is None or memory.get(key) is None:
        return None
    return float(redis[key] - memory[key]) / scale


def redis_table(doc: dict[str, Any]) -> list[str]:
    """What Redis state adds to the in-memory proxy, phase by phase, against the issue's 0.3 ms / 0.3 CPU-ms."""
    phases: list[tuple[str, dict[str, Figures], str]] = [
        ("small chat request, sequential (added p50)", _latency(doc, SMALL), "added_ms_p50"),
        ("300 KB request, sequential (added p50)", _latency(doc, LARGE), "added_ms_p50"),
        ("stream first event (added p50)", _stall(doc), "added_first_byte_ms_p50"),
        *((f"{c} clients (own ms p50)", _load(doc, c), "overhead_ms_p50") for c in _clients(doc)),
    ]
    rows: list[list[str]] = []
    for label, phase, key in phases:
        ms = _delta(phase.get(REDIS), phase.get(MEMORY), key)
        cpu = _delta(phase.get(REDIS), phase.get(MEMORY), "cpu_us", 1000.0)
        if ms is None and cpu is None:
            met = "-"
        else:
            met = "met" if (ms is None or ms <= REDIS_MS) and (cpu is None or cpu <= REDIS_CPU_MS) else "NOT met"
        rows.append([label, "-" if ms is None else f"{ms:+.2f}", "-" if cpu is None else f"{cpu:+.2f}", met])
    headers = ["Redis over memory", "ms", "CPU-ms per request", f"met (at most {REDIS_MS} ms, {REDIS_CPU_MS} CPU-ms)"]
    return _md(headers, rows)


def _us(value: float | None) -> str:
    """Microseconds; below zero only when the stages' clock counted waits the CPU did not (Redis round trips)."""
    if value is None:
        return "-"
    return "< 0" if value < 0 else f"{value:.0f}"


def stage_table(doc: dict[str, Any]) -> list[str]:
    """Each RunGuard target's CPU per request split by stage, beside the pass-through's whole CPU per request."""
    phases = [
        ("small chat, sequential", _latency(doc, SMALL)),
        ("300 KB request, sequential", _latency(doc, LARGE)),
        ("small chat stream, sequential", _latency(doc, STREAM)),
        *((f"{c} clients, small chat", _load(doc, c)) for c in _clients(doc)),
    ]
    rows: list[list[str]] = []
    for label, phase in phases:
        base = phase.get(BASE, {}).get("cpu_us")
        for name in sorted(n for n in phase if n.startswith("proxy")):
            split = stages.split(phase[name])
            cells = [_us(split[k]) for k in ("cpu", *stages.STAGES, "relay_http")]
            rows.append([label, name, *cells, "-" if base is None else f"{base:.0f}"])
    headers = ["phase", "target", "CPU us/req", *stages.STAGES, "relay+HTTP", "pass-through CPU us/req"]
    return _md(headers, rows)


def _judging_stages(figures: Figures | None) -> float | None:
    """Admission and judging together, us per request (None when the proxy exports no stage split)."""
    split = stages.split(figures or {})
    admission, judging = split["admission"], split["judging"]
    return None if admission is None or judging is None else admission + judging


def _less(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def budget_table(doc: dict[str, Any]) -> list[str]:
    """Per CPU target (small chat request): what it allows beyond the read-and-parse floor, and what RunGuard
    (memory) uses beyond it, as its frame's part and the part the detectors, records and access log add.

    The detectors' stages are RunGuard's admission and judging less the frame's: the hooks, their state ops and
    the engine's plumbing, without the relay's. A cell needs its targets in the run (the floor; the frame with
    `--frame`), else it is "-".
    """
    phases = [("small chat, sequential", _latency(doc, SMALL), 2.0)]
    phases += [(f"small chat, {c} clients", _load(doc, c), 2.5) for c in _clients(doc)]
    rows: list[list[str]] = []
    for label, phase, ratio in phases:
        cpu: dict[str, float | None] = {
            name: (phase.get(name) or {}).get("cpu_us") for name in (BASE, FLOOR, MEMORY, FRAME)
        }
        base = cpu[BASE]
        budget = None if base is None else ratio * base
        floor = cpu[FLOOR]
        detecting = _less(_judging_stages(phase.get(MEMORY)), _judging_stages(phase.get(FRAME)))
        cells = [
            f"{ratio}x = {_us(budget)}",
            _us(floor),
            _us(_less(budget, floor)),
            _us(_less(cpu[MEMORY], floor)),
            _us(_less(cpu[FRAME], floor)),
            _us(_less(cpu[MEMORY], cpu[FRAME])),
            _us(detecting),
        ]
        rows.append([label, *cells])
    headers = [
        "CPU us per request",
        "target (x the pass-through's)",
        "floor",
        "left beyond the floor",
        "RunGuard beyond the floor",
        "of it: the frame",
        "detectors, records, log",
        "detectors' stages",
    ]
    return _md(headers, rows)


def markdown(doc: dict[str, Any]) -> str:
    """The whole summary: the per-request table, Redis over memory, the stage split, and the run's caveats."""
    lines = [
        f"RunGuard against the baselines, one run ({report.conditions(doc['meta'])}); every detector on, "
        "SQLite records, access log on.",
        "",
        *per_request_table(doc),
        "",
        *redis_table(doc),
        "",
        "Stage split (us per request; stages from `runguard_stage_seconds_total`, relay+HTTP = CPU less the stages;"
        " a stage not exported shows - and stays in relay+HTTP). The stages are the event loop thread's CPU in their"
        " own steps: what the loop runs for other requests while a stage waits on Redis counts in theirs.",
        "",
        *stage_table(doc),
        "",
        "The budget (us per request): what each CPU target leaves beyond the read-and-parse floor, beside what "
        "RunGuard (memory) uses beyond it; its frame's part and what the detectors, records and access log add "
        "need `--frame`. The detectors' stages are RunGuard's admission and judging less the frame's.",
        "",
        *budget_table(doc),
    ]
    for entry in doc.get("growth", []):
        for name, n in (entry.get("unhealthy") or {}).items():
            lines += [
                "",
                f"**WARNING: growth run {entry['api']}: {n} requests answered by RunGuard or failed "
                f"through {name}: its slope is not a measure.**",
            ]
    return "\n".join(lines) + "\n"
