"""Trips: the last 24 hours by detector, then every trip and warning, newest first (filter by detector)."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from runguard.proxy.admin.ui.html import (
    Html,
    attr,
    esc,
    href,
    layout,
    link,
    pager,
    run_href,
    short,
    table,
    tag,
    usd,
    when,
)
from runguard.proxy.admin.ui.routes import UiContext, no_store, reader_of
from runguard.proxy.admin.ui.runs_page import page_number
from runguard.proxy.store import Row, StoreReader


def detector_table(summary: Sequence[Row], target: str) -> Html:
    """`TripReader.by_detector`'s rows as a table: each detector's trips, warnings, runs, estimated cost
    avoided and last trip, its name linking to the `target` page filtered to it."""
    rows = [
        [
            link(href(target, detector=r["detector"]), r["detector"]),
            r["trips"],
            r["warnings"],
            r["runs"],
            usd(r["usd_avoided"]),
            when(r["last_at"]),
        ]
        for r in summary
    ]
    return table(["detector", "trips", "warnings", "runs", "cost avoided (est.)", "last"], rows)


async def page(request: web.Request, ctx: UiContext) -> Html:
    reader = reader_of(request)
    if not isinstance(reader, StoreReader):
        return layout("Trips", "trips", no_store())
    detector = request.query.get("detector", "")
    number = page_number(request.query.get("page"))
    summary = await reader.trips.by_detector(reader.now() - 86400)
    found = await reader.trips.page(detector or None, number)
    rows = [
        [
            when(t["at"]),
            link(run_href(t["run_id"]), t["run_id"], class_="run-id"),
            short(t["key_hash"]),
            t["detector"],
            "stopped" if t["action"] == "block" else "warned",
            t["reason"],
            t["request_index"],
            usd(t["usd_so_far"]),
            usd(t["usd_avoided"]),
        ]
        for t in found.rows
    ]
    options = "".join(
        f'<option value="{attr(d.name)}"{" selected" if d.name == detector else ""}>{esc(d.name)}</option>'
        for d in ctx.policy.detectors
    )
    form = Html(
        '<form method="get" class="filters" action=""><label>Detector <select name="detector">'
        f'<option value="">any</option>{options}</select></label><button type="submit">Filter</button></form>'
    )
    body = Html(
        tag("h2", "Last 24 hours by detector")
        + detector_table(summary, "trips")
        + tag("h2", "All trips and warnings")
        + form
        + table(
            ["when", "run", "key", "detector", "action", "reason", "request", "spend so far", "avoided (est.)"],
            rows,
            class_="trips",
        )
        + pager(number, found.more, "trips", {"detector": detector})
    )
    return layout("Trips", "trips", body)
