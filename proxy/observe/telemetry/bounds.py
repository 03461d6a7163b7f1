"""Client-chosen text as OpenTelemetry attribute values and span names: printable, short, and few.

Model, agent and tool names come from whoever sends a request. As metric
attributes each distinct value is a series the SDK keeps in memory and
exports every interval, and in a span name it is one more name a tracing
backend indexes; so they are bounded the way the Prometheus labels are
(`observe/metrics.py`): control characters escaped, at most
`MAX_VALUE_CHARS` characters, and past `MAX_VALUES` distinct values of one
kind the rest are `other`.
"""

from __future__ import annotations

from runguard.proxy.core.safe_text import printable

MAX_VALUE_CHARS = 200  # a value longer than this is cut (client text)
MAX_VALUES = 256  # distinct values of one kind before the rest are "other"
OTHER = "other"


def bounded(text: str) -> str:
    """`text` printable and at most `MAX_VALUE_CHARS` characters; `unknown` when empty."""
    # Cut before escaping too, so a 20 MB name costs no more than a short one.
    return printable(text[:MAX_VALUE_CHARS])[:MAX_VALUE_CHARS] or "unknown"


class BoundedValues:
    """The distinct values of one kind (models, agents, tools) seen so far, `bounded`; past `max_values`
    a new one is `other`."""

    def __init__(self, max_values: int = MAX_VALUES) -> None:
        self._max = max_values
        self._seen: set[str] = set()

    def __call__(self, text: str) -> str:
        value = bounded(text)
        if value in self._seen:
            return value
        if len(self._seen) >= self._max:
            return OTHER
        self._seen.add(value)
        return value
