"""Server-rendered SVG charts: stacked bars per day, horizontal bars, a small line.

Each chart is an inline <svg role="img"> with a <title> naming what it shows
and a <title> per bar (the browser's tooltip); the numbers are also in a table
next to it, so nothing is only in the picture. Colours come from a fixed
palette that reads on white and in greyscale order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runguard.proxy.admin.ui.html import Html, attr, esc

PALETTE = ("#1f5fa8", "#d9822b", "#2e8540", "#b3261e", "#6a4c93", "#5c6670")


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def stacked_days(title: str, days: Sequence[str], series: Mapping[str, Sequence[float]], unit: str = "$") -> Html:
    """One bar per day, stacked by series (at most len(PALETTE) series: callers group the rest)."""
    width, height, left, bottom, top = 560, 200, 56, 24, 10
    totals = [sum(values[i] for values in series.values()) for i in range(len(days))]
    peak = max(totals, default=0.0) or 1.0
    slot = (width - left) / max(len(days), 1)
    bar = slot * 0.6
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height + 40}" role="img" aria-label="{attr(title)}">']
    parts.append(f"<title>{esc(title)}</title>")
    for fraction in (0.0, 0.5, 1.0):
        y = top + (height - top - bottom) * (1 - fraction)
        parts.append(f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" class="axis" text-anchor="end">{unit}{_fmt(peak * fraction)}</text>'
        )
    for index, day in enumerate(days):
        x = left + slot * index + (slot - bar) / 2
        base = float(height - bottom)
        for color, (name, values) in zip(PALETTE, series.items(), strict=False):
            value = values[index]
            if value <= 0:
                continue
            size = (height - top - bottom) * value / peak
            base -= size
            label = f"{day} {name}: {unit}{value:.4f}"
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{bar:.1f}" height="{max(size, 0.5):.1f}" fill="{color}">'
                f"<title>{esc(label)}</title></rect>"
            )
        parts.append(
            f'<text x="{x + bar / 2:.1f}" y="{height - 6}" class="axis" text-anchor="middle">{esc(day)}</text>'
        )
    legend_x = left
    for color, name in zip(PALETTE, series, strict=False):
        parts.append(f'<rect x="{legend_x}" y="{height + 14}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="{height + 23}" class="legend">{esc(name[:24])}</text>')
        legend_x += 14 + min(len(name), 24) * 7 + 16
    parts.append("</svg>")
    return Html("".join(parts))


def bars(title: str, values: Mapping[str, float]) -> Html:
    """Horizontal bars, one per label, longest first as given."""
    row, left, width = 22, 150, 520
    peak = max(values.values(), default=0.0) or 1.0
    height = row * max(len(values), 1) + 4
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{attr(title)}">']
    parts.append(f"<title>{esc(title)}</title>")
    for index, (label, value) in enumerate(values.items()):
        y = index * row + 2
        size = (width - left - 50) * value / peak
        parts.append(f'<text x="{left - 6}" y="{y + 14}" class="axis" text-anchor="end">{esc(label[:22])}</text>')
        parts.append(
            f'<rect x="{left}" y="{y + 3}" width="{max(size, 1):.1f}" height="{row - 8}" fill="{PALETTE[0]}">'
            f"<title>{esc(label)}: {_fmt(value)}</title></rect>"
        )
        parts.append(f'<text x="{left + size + 6:.1f}" y="{y + 14}" class="axis">{_fmt(value)}</text>')
    parts.append("</svg>")
    return Html("".join(parts))


def line(title: str, values: Sequence[float]) -> Html:
    """A small line over a numeric series (evidence such as input tokens per request)."""
    width, height, pad = 240, 60, 4
    if len(values) < 2:
        return esc(", ".join(_fmt(v) for v in values))
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = (width - 2 * pad) / (len(values) - 1)
    points = " ".join(
        f"{pad + step * i:.1f},{height - pad - (height - 2 * pad) * (v - low) / span:.1f}" for i, v in enumerate(values)
    )
    return Html(
        f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{attr(title)}"><title>{esc(title)}: {esc(", ".join(_fmt(v) for v in values))}</title>'
        f'<polyline points="{points}" fill="none" stroke="{PALETTE[0]}" stroke-width="2"/></svg>'
    )
