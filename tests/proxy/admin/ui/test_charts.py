"""Server-rendered SVG charts: well-formed, scaled to the largest figure, every bar titled with its value,
every client-chosen label escaped, and nothing drawn for what is zero."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from runguard.proxy.admin.ui.charts import PALETTE, bars, line, stacked_days

SVG = "{http://www.w3.org/2000/svg}"
XSS = '<script>alert("x")</script>'


def _svg(markup: str) -> ET.Element:
    return ET.fromstring(markup.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def test_stacked_days_stack_each_day_s_series_in_palette_order() -> None:
    chart = _svg(stacked_days("Spend per day", ["11-27", "11-28"], {"k_a": [1.0, 3.0], "k_b": [1.0, 0.0]}))
    assert chart.get("role") == "img" and chart.get("aria-label") == "Spend per day"
    bars_ = [r for r in chart.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    titles = [r.findtext(f"{SVG}title") for r in bars_]
    assert titles == ["11-27 k_a: $1.0000", "11-27 k_b: $1.0000", "11-28 k_a: $3.0000"]  # no bar for a zero
    heights = [float(r.get("height", 0)) for r in bars_]
    assert heights[2] == max(heights) and abs(heights[0] + heights[1] - heights[2] * 2 / 3) < 0.5
    assert [r.get("fill") for r in bars_] == [PALETTE[0], PALETTE[1], PALETTE[0]]
    assert "$3" in "".join(t.text or "" for t in chart.iter(f"{SVG}text"))  # the axis tops at the peak


def test_labels_are_escaped_in_every_chart() -> None:
    for markup in (
        stacked_days(XSS, [XSS], {XSS: [1.0]}),
        bars(XSS, {XSS: 2.0}),
        line(XSS, [1.0, 2.0]),
    ):
        assert "<script>" not in markup
        _svg(markup)  # still well-formed


def test_bars_are_scaled_to_the_largest_value() -> None:
    chart = _svg(bars("Trips by detector", {"spiral": 4.0, "text_loop": 1.0}))
    rects = list(chart.iter(f"{SVG}rect"))
    widths = [float(r.get("width", 0)) for r in rects]
    assert widths[0] == 4 * widths[1]
    assert [r.findtext(f"{SVG}title") for r in rects] == ["spiral: 4", "text_loop: 1"]


def test_a_line_needs_two_points_else_it_is_text() -> None:
    assert line("tokens", [5.0]) == "5" and line("tokens", []) == ""
    chart = _svg(line("tokens", [1.0, 3.0, 2.0]))
    points = [tuple(map(float, p.split(","))) for p in (chart.find(f"{SVG}polyline").get("points") or "").split()]  # type: ignore[union-attr]
    assert len(points) == 3 and points[1][1] < points[2][1] < points[0][1]  # higher value, higher on the page
    assert chart.findtext(f"{SVG}title") == "tokens: 1, 3, 2"


def test_empty_charts_still_draw() -> None:
    _svg(stacked_days("nothing", [], {}))
    _svg(bars("nothing", {}))
