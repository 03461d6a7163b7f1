"""The overview page: spend by day (by key, by model), runs live now, trips of the last 24 h, cost avoided."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from aiohttp import web

from runguard.proxy.admin.ui import charts
from runguard.proxy.admin.ui.html import (
    Html,
    badge,
    esc,
    href,
    join,
    layout,
    link,
    run_href,
    short,
    table,
    tag,
    usd,
    when,
)
from runguard.proxy.admin.ui.routes import UiContext, no_store, reader_of
from runguard.proxy.admin.ui.trips_page import detector_table
from runguard.proxy.guard import spend
from runguard.proxy.store import AVOIDED_BASIS, Row, RunFilter, StoreReader

DAYS = 7
TOP = 5  # series shown per chart; the rest are summed as "other"


def _series(starts: Sequence[float], rows: list[Row], label: dict[str, str]) -> dict[str, list[float]]:
    totals: dict[str, float] = {}
    for row in rows:
        totals[row["group"]] = totals.get(row["group"], 0.0) + row["usd"]
    top = sorted(totals, key=lambda name: (-totals[name], name))[:TOP]
    series: dict[str, list[float]] = {str(label.get(name, name)): [0.0] * len(starts) for name in top}
    for row in rows:
        name = str(label.get(row["group"], row["group"]) if row["group"] in top else "other")
        series.setdefault(name, [0.0] * len(starts))[row["day"]] += row["usd"]
    return series


def _day(start: float) -> str:
    return datetime.datetime.fromtimestamp(start, datetime.UTC).strftime("%m-%d")


def _spend_chart(title: str, starts: Sequence[float], series: dict[str, list[float]]) -> Html:
    days = [_day(start) for start in starts]
    rows = [[name, *(usd(v) for v in values), usd(sum(values))] for name, values in series.items()]
    numbers = table(["", *days, "total"], rows, caption=f"{title} (USD)")
    return tag(
        "section",
        Html(
            tag("h2", title)
            + charts.stacked_days(title, days, series)
            + tag("details", Html(tag("summary", "the numbers") + numbers))
        ),
    )


def _cards(items: list[tuple[str, str, str | None]]) -> Html:
    cards = []
    for label, value, target in items:
        figure = link(target, value) if target else esc(value)
        cards.append(f'<div class="card"><div class="label">{esc(label)}</div><div class="value">{figure}</div></div>')
    return Html('<section class="cards" aria-label="figures">' + "".join(cards) + "</section>")


async def page(request: web.Request, ctx: UiContext) -> Html:
    reader = reader_of(request)
    if not isinstance(reader, StoreReader):
        return layout("Overview", "", no_store())
    labels = {hash_: name for hash_, name in ctx.settings.guard.key_labels.items()}
    now = reader.now()
    starts, by_key = await reader.spend.by_day(DAYS, "key_hash", ctx.past)
    _, by_model = await reader.spend.by_day(DAYS, "model", ctx.past)
    live = await reader.runs.count_live()
    recent = await reader.runs.page(RunFilter(status="running"), per_page=10)
    day_trips = await reader.trips.by_detector(now - 86400)
    week_trips = await reader.trips.by_detector(now - 7 * 86400)
    today = [row for row in by_key if row["day"] == len(starts) - 1]
    spent_today = spend(sum(row["usd"] for row in today), sum(row["unpriced"] for row in today))
    spent_week = spend(sum(row["usd"] for row in by_key), sum(row["unpriced"] for row in by_key))
    cards = _cards(
        [
            ("Spend today (UTC)", spent_today, None),
            (f"Spend, last {DAYS} days", spent_week, None),
            ("Runs live now", str(live), href("runs", status="running")),
            ("Trips, last 24 h", str(sum(r["trips"] for r in day_trips)), href("trips")),
            ("Warnings, last 24 h", str(sum(r["warnings"] for r in day_trips)), href("trips")),
            ("Cost avoided, last 24 h (est.)", usd(sum(r["usd_avoided"] for r in day_trips)), None),
            (f"Cost avoided, last {DAYS} days (est.)", usd(sum(r["usd_avoided"] for r in week_trips)), None),
        ]
    )
    by_detector = {row["detector"]: float(row["trips"] + row["warnings"]) for row in day_trips}
    trips_part = Html(
        tag("h2", "Trips in the last 24 hours, by detector")
        + (charts.bars("Trips and warnings by detector, last 24 hours", by_detector) if by_detector else Html(""))
        + detector_table(day_trips, "runs")
    )
    live_rows = [
        [
            link(run_href(r["run_id"]), r["run_id"]),
            badge(r["status"]),
            short(r["key_hash"]),
            join(r["agents"], ", "),
            r["requests"],
            spend(r["usd"], r["unpriced"]),
            when(r["last_seen"]),
        ]
        for r in recent.rows
    ]
    live_part = Html(
        tag("h2", "Runs live now")
        + table(["run", "status", "key", "agents", "requests", "spend", "last activity"], live_rows)
        + (link(href("runs", status="running"), "all live runs") if recent.more else Html(""))
    )
    body = Html(
        cards
        + tag(
            "div",
            Html(
                _spend_chart("Spend per day by key", starts, _series(starts, by_key, labels))
                + _spend_chart("Spend per day by model", starts, _series(starts, by_model, {}))
            ),
            class_="grid2",
        )
        + trips_part
        + live_part
        + tag("p", AVOIDED_BASIS, class_="muted")
    )
    return layout("Overview", "", body)
