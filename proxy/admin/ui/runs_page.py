"""The runs list: filters (status, key, detector, time), pages of 50, refreshed while runs are live.

Query parameters: `status` (running, idle, completed, tripped, error), `key`
(a key hash), `detector` (runs with a trip or warning of it), `since` (a
duration such as 30m, 24h or 7d: runs active within it), `page` (from 1).
Page 1 refreshes itself every few seconds while it shows a live run (a
`<meta http-equiv=refresh>`, no script).
"""

from __future__ import annotations

from aiohttp import web

from runguard.proxy.admin.ui.html import (
    Html,
    attr,
    badge,
    esc,
    join,
    layout,
    link,
    pager,
    run_href,
    short,
    table,
    tag,
    tokens,
    when,
)
from runguard.proxy.admin.ui.routes import UiContext, no_store, reader_of
from runguard.proxy.guard import spend
from runguard.proxy.store import STATUSES, RunFilter, StoreReader

REFRESH_SECONDS = 5
SINCE = {"": "any time", "1h": "last hour", "24h": "last 24 hours", "7d": "last 7 days", "30d": "last 30 days"}
_UNITS = {"m": 60.0, "h": 3600.0, "d": 86400.0}


class BadFilter(ValueError):
    """A query parameter the page cannot use."""


def seconds(duration: str) -> float | None:
    """`30m`, `24h`, `7d` (or plain seconds) as seconds; None for empty; BadFilter otherwise."""
    if not duration:
        return None
    unit = _UNITS.get(duration[-1], 1.0)
    number = duration[:-1] if duration[-1] in _UNITS else duration
    try:
        value = float(number)
    except ValueError:
        raise BadFilter(f"since: expected a duration such as 24h or 7d, got {duration!r}") from None
    if value <= 0:
        raise BadFilter(f"since: must be positive, got {duration!r}")
    return value * unit


def page_number(raw: str | None) -> int:
    try:
        return max(1, min(int(raw or "1"), 100_000))
    except ValueError:
        return 1


def _select(name: str, label: str, options: dict[str, str], chosen: str) -> Html:
    items = "".join(
        f'<option value="{attr(value)}"{" selected" if value == chosen else ""}>{esc(text)}</option>'
        for value, text in options.items()
    )
    return Html(f'<label>{esc(label)} <select name="{name}">{items}</select></label>')


def filters(ctx: UiContext, status: str, key: str, detector: str, since: str) -> Html:
    statuses = {"": "any", **{s: s for s in STATUSES}}
    detectors = {"": "any", **{d.name: d.name for d in ctx.policy.detectors}}
    if detector and detector not in detectors:
        detectors[detector] = detector
    since_options = dict(SINCE) if since in SINCE else {**SINCE, since: since}
    return Html(
        '<form method="get" class="filters" action="">'
        + _select("status", "Status", statuses, status)
        + f'<label>Key <input name="key" value="{attr(key)}" size="20" placeholder="key hash"></label>'
        + _select("detector", "Detector", detectors, detector)
        + _select("since", "Active", since_options, since)
        + '<button type="submit">Filter</button></form>'
    )


async def page(request: web.Request, ctx: UiContext) -> Html:
    status, key = request.query.get("status", ""), request.query.get("key", "").strip()
    detector, since = request.query.get("detector", ""), request.query.get("since", "")
    number = page_number(request.query.get("page"))
    form = filters(ctx, status, key, detector, since)
    reader = reader_of(request)
    if not isinstance(reader, StoreReader):
        return layout("Runs", "runs", Html(form + no_store()))
    try:
        window = seconds(since)
    except BadFilter as exc:
        return layout("Runs", "runs", Html(form + tag("p", str(exc), class_="notice")))
    if status and status not in STATUSES:
        return layout("Runs", "runs", Html(form + tag("p", f"unknown status {status!r}", class_="notice")))
    found = RunFilter(
        status or None, key or None, detector or None, reader.now() - window if window is not None else None
    )
    result = await reader.runs.page(found, number)
    rows = [
        [
            link(run_href(r["run_id"]), r["run_id"], class_="run-id"),
            badge(r["status"]),
            short(r["key_hash"]),
            join(r["agents"], ", "),
            join(r["models"], ", "),
            join(r["providers"], ", "),
            r["requests"],
            f"{tokens(r['input_tokens'])} / {tokens(r['output_tokens'])}",
            spend(r["usd"], r["unpriced"]),
            spend(r["usd_avoided"], r["unpriced"]) if r["trips"] else "",
            when(r["first_seen"]),
            when(r["last_seen"]),
        ]
        for r in result.rows
    ]
    headers = [
        "run",
        "status",
        "key",
        "agents",
        "models",
        "providers",
        "requests",
        "tokens in / out",
        "spend",
        "avoided (est.)",
        "started",
        "last activity",
    ]
    live = number == 1 and any(r["status"] == "running" for r in result.rows)
    query = {"status": status, "key": key, "detector": detector, "since": since}
    note = tag("p", f"Live runs shown: this page refreshes every {REFRESH_SECONDS} s.", class_="muted") if live else ""
    body = Html(form + esc(note) + table(headers, rows, class_="runs") + pager(number, result.more, "runs", query))
    return layout("Runs", "runs", body, refresh=REFRESH_SECONDS if live else None)
