"""A trip's evidence as HTML: any JSON the detector recorded, shown generically, some keys specially.

Generic: a mapping becomes a definition list; a list of numbers a small line
(with the numbers); a list of mappings a table (columns: the union of their
keys); any other list an ordered list; scalars as text. Special keys, when
present: `summary` (a sentence, shown first), `agents` (the cycle of agents,
drawn as A → B → A), `calls` and `batch` (the repeated calls and results, or
one response's batch, as tables), `series` (one line per named numeric series).
Everything is escaped: evidence holds client text (tool arguments, agent names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runguard.proxy.admin.ui import charts
from runguard.proxy.admin.ui.html import Html, dl, esc, join, table, tag

MAX_ITEMS = 50  # list items shown (the rest counted)
MAX_TEXT = 2000  # characters of one value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value) if not isinstance(value, (int, float)) else str(value)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… ({len(text) - MAX_TEXT} more characters)"


def _rest(items: Sequence[Any]) -> Html:
    extra = len(items) - MAX_ITEMS
    return tag("p", f"and {extra} more", class_="muted") if extra > 0 else Html("")


def _records(title: str, items: Sequence[Mapping[str, Any]]) -> Html:
    columns: list[str] = []
    for item in items[:MAX_ITEMS]:
        columns += [key for key in item if key not in columns]
    rows = [[value_html(item.get(column)) for column in columns] for item in items[:MAX_ITEMS]]
    return Html(table([str(column) for column in columns], rows, caption=title, class_="evidence") + _rest(items))


def value_html(value: Any, name: str = "") -> Html:
    """Any JSON value as HTML (see the module docstring)."""
    if isinstance(value, Mapping):
        return dl({str(key): value_html(item, str(key)) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        if value and all(_is_number(item) for item in value):
            return Html(charts.line(name or "series", [float(item) for item in value]))
        if value and all(isinstance(item, Mapping) for item in value):
            return _records(name, value)
        items = "".join(f"<li>{value_html(item)}</li>" for item in value[:MAX_ITEMS])
        return Html(f"<ol>{items}</ol>" + _rest(value))
    if value is None:
        return tag("span", "none", class_="muted")
    return tag("code", _text(value)) if isinstance(value, str) and len(value) < 120 else esc(_text(value))


def _agents(value: Any) -> Html:
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tag("p", join(value, " → "), class_="cycle")
    return value_html(value, "agents")


def _series(value: Any) -> Html:
    if isinstance(value, Mapping):
        return dl({str(name): value_html(points, str(name)) for name, points in value.items()})
    return value_html(value, "series")


def evidence_html(evidence: Mapping[str, Any]) -> Html:
    """A trip's evidence: the special keys first, in a fixed order, then every other key."""
    if not evidence:
        return tag("p", "no evidence recorded", class_="muted")
    parts: list[Html] = []
    summary = evidence.get("summary")
    if isinstance(summary, str):
        parts.append(tag("p", summary, class_="summary"))
    elif summary is not None:
        parts.append(value_html(summary, "summary"))
    if "agents" in evidence:
        parts.append(Html(tag("h4", "Agents") + _agents(evidence["agents"])))
    for key, title in (("calls", "Calls"), ("batch", "Batch")):
        if key in evidence:
            parts.append(Html(tag("h4", title) + value_html(evidence[key], key)))
    if "series" in evidence:
        parts.append(Html(tag("h4", "Series") + _series(evidence["series"])))
    rest = {
        key: value for key, value in evidence.items() if key not in {"summary", "agents", "calls", "batch", "series"}
    }
    if rest:
        parts.append(value_html(rest))
    return tag("div", Html("".join(parts)), class_="evidence")
