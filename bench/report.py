"""Turning a results document into tables: figures, and ratios to the baselines measured in the same run.

Conventions: "+X" is latency added over going direct to the fake upstream
(the median of per-round paired differences, so drift cancels); "xpass" is a
ratio to the minimal aiohttp pass-through; CPU is microseconds of the server
process per request. Targets from the Performance issue are shown as met or
not, never asserted.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

BASE = "passthrough"


def progress(message: str) -> None:
    sys.stderr.write(f"[bench] {message}\n")
    sys.stderr.flush()


def fit(xs: list[float], ys: list[float]) -> dict[str, float]:
    """Least-squares line y = intercept + slope * x, with r^2."""
    if len(xs) < 2 or len(set(xs)) < 2:
        return {"intercept": ys[0] if ys else 0.0, "slope": 0.0, "r2": 0.0}
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return {"intercept": intercept, "slope": slope, "r2": 1 - ss_res / ss_tot if ss_tot else 0.0}


def growth_fits(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per target: CPU and latency against body size (per KB = 1000 bytes), start and end of the run."""
    kb = [row["body_bytes"] / 1000 for row in rows]
    fits: dict[str, Any] = {"orjson_parse": fit(kb, [row["parse_us"] for row in rows])}
    edge = max(1, len(rows) // 15)
    for name in rows[0]["targets"] if rows else []:
        figures = [row["targets"][name] for row in rows]
        entry: dict[str, Any] = {"latency": fit(kb, [f["latency_ms"] for f in figures])}
        if all("cpu_us" in f for f in figures) and any(f["cpu_us"] for f in figures):
            cpu = [f["cpu_us"] for f in figures]
            entry["cpu"] = fit(kb, cpu)
            entry["cpu_first_us"] = statistics.median(cpu[:edge])
            entry["cpu_last_us"] = statistics.median(cpu[-edge:])
        entry["trips"] = sorted({f["trip"] for f in figures if f.get("trip")})
        entry["warnings"] = sum(1 for f in figures if f.get("warning"))
        entry["statuses"] = sorted({f["status"] for f in figures})
        fits[name] = entry
    return fits


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base or base <= 0:
        return "-"
    return f"{value / base:.2f}x"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(out)


def _others(targets: dict[str, Any]) -> list[str]:
    return [name for name in targets if name not in ("direct",)]


def latency_table(entries: list[dict[str, Any]]) -> str:
    names = sorted({n for e in entries for n in _others(e["targets"])}, key=_order)
    headers = ["scenario", "req KB", "direct p50"]
    for name in names:
        headers += [f"+{name}"] + ([f"+{name} xpass"] if name != BASE else [])
    for name in names:
        headers += [f"cpu {name}"] + ([f"cpu {name} xpass"] if name != BASE else [])
    # What the proxy says it spent before answering (x-runguard-overhead-ms, p50): the rest of `+proxy` is
    # the relay (two more sockets, the event loop) and, for a stream, its events' parsing.
    headers += ["proxy p99", "proxy own ms", "proxy trips/warn"]
    rows = []
    for entry in entries:
        t = entry["targets"]
        base = t.get(BASE, {})
        row = [
            entry["scenario"],
            f"{entry.get('request_bytes', 0) / 1000:.1f}",
            _num(t.get("direct", {}).get("latency_ms_p50")),
        ]
        for name in names:
            added = t.get(name, {}).get("added_ms_p50")
            row += [_num(added)] + ([_ratio(added, base.get("added_ms_p50"))] if name != BASE else [])
        for name in names:
            cpu = t.get(name, {}).get("cpu_us")
            row += [_num(cpu, 0)] + ([_ratio(cpu, base.get("cpu_us"))] if name != BASE else [])
        proxy = t.get("proxy", {})
        row += [_num(proxy.get("latency_ms_p99")), _num(proxy.get("overhead_ms_p50")), _trips(proxy)]
        rows.append(row)
    return _table(headers, rows)


def _trips(figures: dict[str, Any]) -> str:
    if not figures:
        return "-"
    trips = sum(figures.get("trips", {}).values())
    bad = sum(v for k, v in figures.get("statuses", {}).items() if k != "200")
    return f"{trips}/{figures.get('warnings', 0)}" + (f" non200={bad}" if bad else "")


def _order(name: str) -> tuple[int, str]:
    order = [
        "passthrough",
        "floor",
        "nginx",
        "litellm",
        "proxy_frame",
        "proxy_before",
        "proxy",
        "proxy_redis_before",
        "proxy_redis",
    ]
    return (order.index(name) if name in order else len(order), name)


def stall_table(entries: list[dict[str, Any]]) -> str:
    names = sorted({n for e in entries for n in _others(e["targets"])}, key=_order)
    headers = ["scenario", "direct first event ms"] + [f"+{n} first event" for n in names] + ["proxy buffered?"]
    rows = []
    for entry in entries:
        t = entry["targets"]
        stall = entry["spec"]["stall_ms"]
        row = [entry["scenario"], _num(t["direct"].get("first_byte_ms_p50"))]
        row += [_num(t.get(n, {}).get("added_first_byte_ms_p50")) for n in names]
        proxy_first = t.get("proxy", {}).get("first_byte_ms_p50")
        row.append("-" if proxy_first is None else ("YES" if proxy_first >= stall else "no"))
        rows.append(row)
    return _table(headers, rows)


def throughput_table(entries: list[dict[str, Any]]) -> str:
    base = {(e["scenario"], e.get("concurrency", 32)): e for e in entries if e["target"] == BASE}
    headers = [
        "scenario",
        "clients",
        "target",
        "req/s",
        "xpass",
        "p50 ms",
        "p99 ms",
        "cpu us/req",
        "cpu xpass",
        "non-200",
        "admin read ms",
        "own ms p50",
    ]
    rows = []
    for e in entries:
        b = base.get((e["scenario"], e.get("concurrency", 32)), {})
        bad = sum(v for k, v in e.get("statuses", {}).items() if k != "200")
        rows.append(
            [
                e["scenario"],
                str(e.get("concurrency", 32)),
                e["target"],
                f"{e['rps']:.0f}",
                _ratio(e["rps"], b.get("rps")),
                _num(e.get("latency_ms_p50")),
                _num(e.get("latency_ms_p99")),
                _num(e.get("cpu_us"), 0),
                _ratio(e.get("cpu_us"), b.get("cpu_us")) if e["target"] != "direct" else "-",
                str(bad),
                _num(e.get("admin_read_ms"), 0),
                _num(e.get("overhead_ms_p50")),
            ]
        )
    return _table(headers, rows)


def growth_table(entries: list[dict[str, Any]]) -> str:
    headers = [
        "api",
        "target",
        "cpu us @start",
        "cpu us @end",
        "cpu slope us/KB",
        "r2",
        "latency slope us/KB",
        "trips",
        "warnings",
        "statuses",
    ]
    rows = []
    for entry in entries:
        fits = entry["fits"]
        parse = fits["orjson_parse"]
        for name, f in fits.items():
            if name == "orjson_parse":
                continue
            cpu = f.get("cpu", {})
            rows.append(
                [
                    entry["api"],
                    name,
                    _num(f.get("cpu_first_us"), 0),
                    _num(f.get("cpu_last_us"), 0),
                    _num(cpu.get("slope"), 2),
                    _num(cpu.get("r2"), 2),
                    _num(f["latency"]["slope"] * 1000, 2),
                    ",".join(f["trips"]) or "0",
                    str(f["warnings"]),
                    ",".join(map(str, f["statuses"])),
                ]
            )
        rows.append(
            [
                entry["api"],
                "orjson.loads (client)",
                "-",
                "-",
                _num(parse["slope"], 2),
                _num(parse["r2"], 2),
                "-",
                "-",
                "-",
                "-",
            ]
        )
        last = entry["steps"][-1]["body_bytes"] / 1000 if entry["steps"] else 0
        rows.append(
            [
                entry["api"],
                f"(bodies {entry['steps'][0]['body_bytes'] / 1000:.1f} -> {last:.0f} KB)",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
            ]
        )
    return _table(headers, rows)


def state_table(result: dict[str, Any]) -> str:
    headers = [
        "step",
        "body KB",
        "run fields",
        "run bytes (deep)",
        "run bytes (json)",
        "all scopes bytes",
        "plain entries",
    ]
    rows = []
    for row in result["steps"]:
        state = row["state"]
        run = state.get("run", {})
        rows.append(
            [
                str(row["step"]),
                f"{row['body_bytes'] / 1000:.1f}",
                str(run.get("fields", 0)),
                str(run.get("bytes", 0)),
                str(run.get("json_bytes", 0)),
                str(sum(v["bytes"] for v in state.values())),
                str(state.get("plain", {}).get("scopes", 0)),
            ]
        )
    return _table(headers, rows) + f"\nstatuses {result.get('statuses')} trips {result.get('trips') or 0}"


def soak_table(result: dict[str, Any]) -> str:
    headers = ["requests", "RSS MB", "seconds", "store backlog", "dropped"]
    rows = [
        [
            str(s["requests"]),
            f"{s['rss_mb']:.1f}",
            f"{s['seconds']:.1f}",
            *(f"{s[name]:.0f}" if name in s else "-" for name in ("store_backlog", "store_dropped")),
        ]
        for s in result["samples"]
    ]
    figures: dict[str, Any] = next(iter(result.get("targets", {}).values()), {})
    tail = (
        f"\n{result['runs']} runs of 4 requests, max_runs={result['max_runs']}, "
        f"{figures.get('rps', 0):.0f} req/s, statuses {figures.get('statuses')}, trips {figures.get('trips')}"
    )
    return _table(headers, rows) + tail


def targets_summary(doc: dict[str, Any]) -> list[str]:
    """What the summary tables (`bench/summary.py`) do not show: the growth run's slope and the soak's RSS."""
    out: list[str] = []
    for entry in doc.get("growth", []):
        fits, parse = entry["fits"], entry["fits"]["orjson_parse"]
        base = fits.get(BASE, {}).get("cpu")
        for name in sorted((n for n in fits if n.startswith("proxy")), key=_order):
            cpu = fits[name].get("cpu")
            if not cpu or not base:
                continue
            extra = cpu["slope"] - base["slope"]
            out.append(
                f"growth run {entry['api']}, {name}: CPU slope {cpu['slope']:.2f} us/KB (pass-through "
                f"{base['slope']:.2f}), {extra:.2f} us/KB over the pass-through's = {_ratio(extra, parse['slope'])} "
                f"an orjson.loads ({parse['slope']:.2f} us/KB); trips {fits[name]['trips'] or 'none'}, "
                f"answered by RunGuard or failed: {entry.get('unhealthy', {}).get(name, 0)}"
            )
    soak = doc.get("soak")
    if soak and len(soak["samples"]) > 2:
        samples = soak["samples"]
        total = samples[-1]["requests"]
        # From a tenth of the way in: the first thousand requests still warm caches and pools up.
        warm = next(s for s in samples if s["requests"] >= total / 10)
        backlog = [s["store_backlog"] for s in samples if "store_backlog" in s]
        dropped = samples[-1].get("store_dropped", 0)
        store = f"; record store backlog at most {max(backlog):.0f}, {dropped:.0f} dropped" if backlog else ""
        out.append(
            f"RSS from {warm['requests']} to {total} requests: {warm['rss_mb']:.1f} -> {samples[-1]['rss_mb']:.1f} MB "
            f"({samples[-1]['rss_mb'] - warm['rss_mb']:+.1f} MB; {samples[1]['rss_mb']:.1f} MB at "
            f"{samples[1]['requests']}){store}"
        )
    return out


def conditions(meta: dict[str, Any]) -> str:
    """What a run was measured under, as both reports head it: mode, commit, CPUs, load at its start."""
    load = " ".join(meta["loadavg_at_start"])
    return f"{meta['mode']}, commit {meta['commit']}, {meta['cpus']} CPUs, load at start {load}"


def render(doc: dict[str, Any]) -> str:
    meta = doc["meta"]
    parts = [
        f"RunGuard bench ({conditions(meta)}, {meta.get('seconds', 0):.0f} s)",
        "",
    ]
    sections = [
        (
            "Latency (ms; +X = added over direct, paired p50) and server CPU per request (us), sequential",
            "latency",
            latency_table,
        ),
        ("Stream time to first event (ms; upstream sends one event, stalls, then the rest)", "stall", stall_table),
        (
            "Throughput, 16 and 32 concurrent keep-alive clients, 2 cores shared by client, server and upstream",
            "throughput",
            throughput_table,
        ),
        (
            "Growth run: 300 requests of one run, one tool turn more each (CPU per request vs body size)",
            "growth",
            growth_table,
        ),
    ]
    for title, key, table in sections:
        if doc.get(key):
            parts += [title, table(doc[key]), ""]
    if doc.get("state_size"):
        parts += ["Per-run state along the growth run (in-process MemoryState)", state_table(doc["state_size"]), ""]
    if doc.get("soak"):
        parts += ["RSS soak (many short runs, eviction on)", soak_table(doc["soak"]), ""]
    lines = targets_summary(doc)
    if lines:
        parts += ["Growth and RSS (measured, not asserted):", *(f"- {line}" for line in lines), ""]
    if doc.get("notes"):
        parts += ["Notes:", *(f"- {note}" for note in doc["notes"]), ""]
    if doc.get("summary_md"):
        parts += ["Summary (also in the results JSON as summary_md):", "", doc["summary_md"]]
    return "\n".join(parts)
