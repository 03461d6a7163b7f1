"""Whether an agent was asked the same thing again: a task kept as its words, and two tasks compared.

A coordinator asking a sub-agent again in other words ("find the cheapest flights Lisbon to Berlin in
May", "search again for the cheapest Lisbon to Berlin flights in May") asks the same; one handing it
another task ("book the option the traveller picked: TP552") asks something new, even when the sub-agent
answers the same. `asked_entry` keeps a task as the words of its arguments (`sketch.call_sketch`) and what
they name (`sketch.call_targets`), or, for a call without words, as its arguments' digest;
`asked_alike` tells whether two kept tasks ask the same: their words' similarity reaches `ALIKE` (a
reworded task keeps 0.5-0.7 of its words, a new one 0-0.3) and they name nothing apart, or, without
words, their arguments are the same.
"""

from __future__ import annotations

from runguard.detectors.support.normalize import call_args_digest
from runguard.detectors.support.sketch import (
    call_asks_in_words,
    call_sketch_packed,
    call_targets,
    decode_sketch,
    named_apart,
    sketch_similarity,
)
from runguard.proxy.core.events import ToolCall

ALIKE = 0.5


def asked_entry(call: ToolCall) -> str:
    """A task as kept: "<names>/<packed sketch>" when it asks in words, else "=<arguments' digest>"."""
    if not call_asks_in_words(call):
        return f"={call_args_digest(call)}"
    return f"{call_targets(call)}/{call_sketch_packed(call)}"


def asked_alike(first: str, second: str) -> bool:
    """Whether two kept tasks (`asked_entry`) ask the same thing."""
    if first.startswith("=") or second.startswith("="):
        return first == second
    names, _, sketch = first.partition("/")
    other_names, _, other_sketch = second.partition("/")
    if named_apart(names, other_names):
        return False
    return sketch_similarity(decode_sketch(sketch), decode_sketch(other_sketch)) >= ALIKE
