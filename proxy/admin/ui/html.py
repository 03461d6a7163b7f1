"""Building the dashboard's HTML: escaping, the page layout, tables, and how figures are written.

Every text that reaches a page goes through `esc` (or `attr` inside an
attribute) unless it is markup built here: run ids, agent and model names,
reasons and evidence come from clients and are attacker-controlled. Markup is
passed around as `Html` (a str subclass) so that a plain str is always text.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import quote, urlencode

BASE = "/runguard/ui"
NAV = (("", "Overview"), ("runs", "Runs"), ("trips", "Trips"), ("keys", "Keys"), ("detectors", "Detectors"))


class Html(str):
    """Markup that is already safe (built here, its texts escaped)."""


Cell = Html | str | int | float | None


def esc(value: Cell) -> Html:
    """`value` as page text: markup passes as is, anything else is escaped (None is empty)."""
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def attr(value: object) -> str:
    """A value for inside a double-quoted attribute."""
    return html.escape(str(value), quote=True)


def join(parts: Iterable[Cell], sep: str = "") -> Html:
    return Html(sep.join(esc(part) for part in parts))


def tag(name: str, content: Cell = "", **attrs: object) -> Html:
    """`<name attrs>content</name>`; attribute names use `_` for `-` and a trailing `_` for keywords."""
    rendered = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{attr(value)}"' for key, value in attrs.items() if value is not None
    )
    return Html(f"<{name}{rendered}>{esc(content)}</{name}>")


def link(href: str, text: Cell, **attrs: object) -> Html:
    return tag("a", text, href=href, **attrs)


def run_href(run_id: str) -> str:
    return f"{BASE}/runs/{quote(run_id, safe='')}"


def href(target: str, /, **query: object) -> str:
    """A dashboard URL with the query parameters that have a value."""
    kept = {key: value for key, value in query.items() if value not in (None, "")}
    return f"{BASE}/{target}" + (f"?{urlencode(kept)}" if kept else "")


def table(
    headers: Sequence[str], rows: Iterable[Sequence[Cell]], *, caption: str | None = None, **attrs: object
) -> Html:
    """A table with a header row; numeric cells are right-aligned."""
    head = "".join(f'<th scope="col">{esc(header)}</th>' for header in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{esc(cell)}</td>' if isinstance(cell, (int, float)) else f"<td>{esc(cell)}</td>"
            for cell in row
        )
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(headers)}" class="empty">nothing to show</td></tr>')
    title = f"<caption>{esc(caption)}</caption>" if caption else ""
    return Html(
        f"{tag('table', Html(title + f'<thead><tr>{head}</tr></thead><tbody>' + ''.join(body) + '</tbody>'), **attrs)}"
    )


def dl(items: Mapping[str, Cell]) -> Html:
    """A definition list of label: value pairs."""
    return Html("<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items.items()) + "</dl>")


def usd(value: float | None) -> str:
    """Money as every view writes it: four decimals (agent requests often cost fractions of a cent)."""
    return f"${value or 0.0:,.4f}"


def when(epoch: float | None) -> Html:
    """A time in UTC, machine-readable in a <time> element."""
    if not epoch:
        return Html("")
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return tag("time", moment.strftime("%Y-%m-%d %H:%M:%S"), datetime=moment.isoformat())


def tokens(count: int | None) -> str:
    return f"{count or 0:,}"


def badge(status: str) -> Html:
    """A run status as text with a colour class (the text carries the meaning, not the colour)."""
    kind = status.partition(":")[0]
    return tag("span", status, class_=f"badge badge-{kind}")


def short(key_hash: str, length: int = 12) -> Html:
    """A key hash shortened for a table, the whole hash in its title."""
    return tag("abbr", key_hash[:length] + ("…" if len(key_hash) > length else ""), title=key_hash)


def pager(page: int, more: bool, target: str, query: Mapping[str, object]) -> Html:
    """Previous / next links that keep the other query parameters."""
    parts = []
    if page > 1:
        parts.append(link(href(target, **{**query, "page": page - 1}), "← newer", rel="prev"))
    parts.append(tag("span", f"page {page}"))
    if more:
        parts.append(link(href(target, **{**query, "page": page + 1}), "older →", rel="next"))
    return tag("nav", join(parts, " "), class_="pager", aria_label="pages")


def layout(title: str, active: str, body: Html, *, refresh: int | None = None) -> Html:
    """The page: head (stylesheet, optional refresh), the navigation with the current page marked, the body."""
    nav = "".join(
        f"<li>{link(f'{BASE}/{page}', label, aria_current='page' if page == active else None)}</li>"
        for page, label in NAV
    )
    meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    return Html(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta}<title>{esc(title)} · RunGuard</title>"
        f'<link rel="stylesheet" href="{BASE}/static/ui.css">'
        f'<script src="{BASE}/static/ui.js" defer></script></head><body>'
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header><span class="brand">RunGuard</span><nav aria-label="dashboard"><ul>{nav}</ul></nav></header>'
        f'<main id="main"><h1>{esc(title)}</h1>{body}</main></body></html>'
    )
